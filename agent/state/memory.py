"""InMemoryStateStore: the state store of simulations, rehearsals and tests.

It keeps the encoded document, not the object, so what it returns went through the same codec as a
ConfigMap would. Shared by several agents in one process, it stands in for the ConfigMap replicas share.
"""

from __future__ import annotations

import logging
from datetime import datetime

from agent.planning import PlannerMemory
from agent.state.codec import StateDocumentUnreadable, decode, encode

log = logging.getLogger(__name__)


class InMemoryStateStore:
    def __init__(self, saved_by: str = "leadtime") -> None:
        self.saved_by = saved_by
        self.document: str | None = None
        self.saves = 0

    def load(self) -> PlannerMemory | None:
        if self.document is None:
            return None
        try:
            return decode(self.document)
        except StateDocumentUnreadable as exc:
            log.warning("saved planner memory ignored: %s", exc)
            return None

    def save(self, memory: PlannerMemory, now: datetime) -> None:
        self.document = encode(memory, now, self.saved_by)
        self.saves += 1

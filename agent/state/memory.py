"""InMemoryStateStore: the state store of simulations, rehearsals and tests.

It keeps the encoded document, not the object, so what it returns went through the same codec as a
ConfigMap would. Shared by several agents in one process, it stands in for the ConfigMap replicas share.
``replica`` gives another replica's own view of the same document: like ``KubernetesStateStore`` on a
ConfigMap's resourceVersion, a view that saves over a write it has not read gets ``StateConflict``, changes
nothing, and reads before its next save.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from agent.planning import PlannerMemory
from agent.state.codec import decode, encode
from models import StateConflict, StateDocumentUnreadable

log = logging.getLogger(__name__)


@dataclass
class _Document:
    text: str | None = None
    version: int = 0  # bumped by every write, like a resourceVersion
    saves: int = 0


class InMemoryStateStore:
    def __init__(self, saved_by: str = "leadtime", *, _shared: _Document | None = None) -> None:
        self.saved_by = saved_by
        self._shared = _shared if _shared is not None else _Document()
        self._version: int | None = None  # the version this view last read or wrote; None: read before writing

    def replica(self, saved_by: str) -> InMemoryStateStore:
        """Another replica's view of the same document."""
        return InMemoryStateStore(saved_by, _shared=self._shared)

    @property
    def document(self) -> str | None:
        return self._shared.text

    @document.setter
    def document(self, text: str | None) -> None:
        """Replace the stored text as someone else would (tests use it to plant an unreadable document)."""
        self._shared.text = text
        self._shared.version += 1

    @property
    def saves(self) -> int:
        return self._shared.saves

    def load(self) -> PlannerMemory | None:
        self._version = self._shared.version
        if self._shared.text is None:
            return None
        try:
            return decode(self._shared.text)
        except StateDocumentUnreadable as exc:
            log.warning("saved planner memory ignored: %s", exc)
            return None

    def save(self, memory: PlannerMemory, now: datetime) -> None:
        if self._version is None:
            self._version = self._shared.version
        if self._version != self._shared.version:
            self._version = None  # read again before the next write
            raise StateConflict("the planner memory was written by another replica since this one read it")
        self._shared.text = encode(memory, now, self.saved_by)
        self._shared.version += 1
        self._shared.saves += 1
        self._version = self._shared.version

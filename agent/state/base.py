"""The StateStore interface: load and save the planner's memory as one versioned JSON document.

A store holds one document shared by every replica; only the leader writes it. Failures are raised as
``StateUnavailable`` (the store cannot be reached or refused the write) or its subclass ``StateConflict``
(someone wrote the document since this store last read it); the caller keeps its in-memory copy and tries again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from agent.planning import PlannerMemory


class StateStore(Protocol):
    def load(self) -> PlannerMemory | None:
        """The memory last saved, or None when nothing was ever saved (or the document cannot be used)."""
        ...

    def save(self, memory: PlannerMemory, now: datetime) -> None:
        """Replace the saved memory with ``memory``; raises ``StateUnavailable`` when it could not."""
        ...

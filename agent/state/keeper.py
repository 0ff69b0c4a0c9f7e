"""MemoryKeeper: when the planner's memory is loaded from and saved to its store, and what a failure does.

* ``resume()`` is called when this replica becomes the leader: before its next tick plans, the memory the
  previous leader saved (or this replica before a restart) replaces the in-memory copy.
* ``after_tick(memory, now)`` saves the memory when it differs from what the store holds. A failed save is
  logged and retried on the next tick; the tick itself is never held up or failed by the store.
* Until a load has succeeded, nothing is saved: a new leader that cannot read the store must not overwrite
  the back-offs and blocks its predecessor saved with its own, emptier, memory. It keeps retrying the load.
"""

from __future__ import annotations

import logging
from datetime import datetime

from agent.planning import PlannerMemory
from agent.state.base import StateStore
from models import StateUnavailable

log = logging.getLogger(__name__)


class MemoryKeeper:
    def __init__(self, store: StateStore) -> None:
        self._store = store
        self._loaded = False
        self._stored: PlannerMemory | None = None  # what the store holds, as far as this replica knows
        self._failing: str | None = None
        self.failures = 0

    @property
    def loaded(self) -> bool:
        return self._loaded

    def resume(self) -> None:
        """Leadership starts (again): read the store before the next tick plans."""
        self._loaded = False

    def before_tick(self, memory: PlannerMemory) -> tuple[PlannerMemory, StateUnavailable | None]:
        """The memory the tick should plan with (the stored one right after ``resume``, else ``memory``), and
        the error when the store could not be read."""
        if self._loaded:
            return memory, None
        try:
            stored = self._store.load()
        except StateUnavailable as exc:
            self._failed("load", exc)
            return memory, exc
        self._recovered()
        self._loaded = True
        self._stored = stored
        if stored is None:
            log.info("no saved planner memory; starting from the one in memory")
            return memory, None
        log.info(
            "planner memory restored: %d recent changes, %d back-offs, %d blocked pools",
            len(stored.last_change),
            len(stored.backoff_until),
            len(stored.blocked),
            extra={"blocked": sorted(stored.blocked), "backoff": sorted(stored.backoff_until)},
        )
        return stored, None

    def after_tick(self, memory: PlannerMemory, now: datetime) -> StateUnavailable | None:
        """Save ``memory`` if the store holds something else; the error when that failed (retried next tick)."""
        if not self._loaded:
            return None
        if memory == self._stored or (self._stored is None and memory == PlannerMemory()):
            return None
        try:
            self._store.save(memory, now)
        except StateUnavailable as exc:
            self._failed("save", exc)
            return exc
        self._recovered()
        self._stored = memory
        log.debug("planner memory saved")
        return None

    def _failed(self, what: str, exc: StateUnavailable) -> None:
        self.failures += 1
        message = f"{type(exc).__name__}: {exc}"
        if message != self._failing:  # once per outage, not every tick
            log.warning(
                "planner memory %s failed, keeping the copy in memory and retrying next tick: %s", what, message
            )
        self._failing = message

    def _recovered(self) -> None:
        if self._failing is not None:
            log.info("planner memory store answers again")
        self._failing = None

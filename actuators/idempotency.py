"""Idempotency keys: a repeated key reports the first outcome instead of acting again.

Resizes remember every outcome. Drains remember only settled ones (done, failed, rejected), so that a drain still
waiting on a disruption budget is continued by repeating its key. After a restart the memory is empty and the
cloud's own state (operations, node pools, queued resources, instance groups) decides instead: targets are
absolute and unit names deterministic, so a repeated request finds the work already there and starts nothing.
"""

from __future__ import annotations

from collections import OrderedDict

from models import ActionResult, ActionStatus

_SETTLED = (ActionStatus.DONE, ActionStatus.FAILED, ActionStatus.REJECTED)


class KeyedResults:
    """The outcome of each key (only settled ones if ``settled_only``), oldest forgotten first beyond ``capacity``."""

    def __init__(self, settled_only: bool = False, capacity: int = 10_000) -> None:
        self._results: OrderedDict[str, ActionResult] = OrderedDict()
        self._settled_only = settled_only
        self._capacity = capacity

    def get(self, key: str) -> ActionResult | None:
        return self._results.get(key)

    def remember(self, result: ActionResult) -> ActionResult:
        if result.status in _SETTLED or not self._settled_only:
            self._results[result.key] = result
            while len(self._results) > self._capacity:
                self._results.popitem(last=False)
        return result

"""Idempotency keys: a repeated key reports the first outcome instead of acting again.

Only settled outcomes are remembered (done, failed, rejected). A started operation is not: repeating its key
re-reads the cloud, which already shows the units in flight, so nothing is started twice either way, and a drain
that is still waiting on a disruption budget can be continued with the same key. After a restart the memory is
empty and the cloud's own state (operations, node pools, queued resources, instance groups) decides instead.
"""

from __future__ import annotations

from collections import OrderedDict

from models import ActionResult, ActionStatus

_SETTLED = (ActionStatus.DONE, ActionStatus.FAILED, ActionStatus.REJECTED)


class KeyedResults:
    """The settled outcome of each key, oldest forgotten first beyond ``capacity``."""

    def __init__(self, capacity: int = 10_000) -> None:
        self._results: OrderedDict[str, ActionResult] = OrderedDict()
        self._capacity = capacity

    def get(self, key: str) -> ActionResult | None:
        return self._results.get(key)

    def remember(self, result: ActionResult) -> ActionResult:
        if result.status in _SETTLED:
            self._results[result.key] = result
            while len(self._results) > self._capacity:
                self._results.popitem(last=False)
        return result

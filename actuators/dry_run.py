"""The dry-run wrapper: reads pass through, writes are recorded and never reach the wrapped actuator."""

from __future__ import annotations

from collections.abc import Sequence

from actuators.base import Actuator
from models import ActionResult, ActionStatus, PoolState
from models.clock import Clock


class DryRunActuator:
    """Wraps any Actuator. ``recorded`` lists what would have been done, in order."""

    def __init__(self, inner: Actuator, clock: Clock) -> None:
        self._inner = inner
        self._clock = clock
        self.recorded: list[tuple[str, int, str]] = []

    def list_pools(self) -> Sequence[PoolState]:
        return self._inner.list_pools()

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        self.recorded.append((pool_id, to_units, key))
        return ActionResult(
            key=key,
            pool_id=pool_id,
            status=ActionStatus.RECORDED,
            at=self._clock.now(),
            detail=f"dry-run: would set {pool_id} to {to_units} units",
        )

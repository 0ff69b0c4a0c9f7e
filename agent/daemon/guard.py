"""Leader-only wrappers around the writers: a replica that does not lead at the moment of a write refuses it.

The daemon checks leadership before a tick starts; these wrappers check again right before every resize and
drain, and a drainer that makes several writes in one call (cordon, each eviction, the node's removal) is handed
the same check for each, so a tick that outlives the leader's renew deadline stops before its next write instead
of racing the new leader. Reads pass through.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from actuators import Actuator, NodeDrainer
from actuators.base import unread_pools
from models import ActionResult, ActuatorError, PoolState, TransientActuatorError
from models.clock import Clock


class Leadership(Protocol):
    def is_leader(self, now: datetime) -> bool: ...


@runtime_checkable
class GuardsWrites(Protocol):
    """A drainer that makes several writes in one call and checks before each (``KubernetesNodeDrainer``)."""

    def guard_writes(self, may_write: Callable[[], bool]) -> None: ...


class LeaderOnlyActuator:
    def __init__(self, inner: Actuator, leadership: Leadership, clock: Clock) -> None:
        self._inner = inner
        self._leadership = leadership
        self._clock = clock

    def list_pools(self) -> Sequence[PoolState]:
        return self._inner.list_pools()

    def unread_pools(self) -> Mapping[str, ActuatorError]:
        return unread_pools(self._inner)

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        if not self._leadership.is_leader(self._clock.now()):
            raise TransientActuatorError(pool_id, "this replica no longer leads; the resize is left to the leader")
        return self._inner.resize(pool_id, to_units, key)


class LeaderOnlyDrainer:
    def __init__(self, inner: NodeDrainer, leadership: Leadership, clock: Clock) -> None:
        self._inner = inner
        self._leadership = leadership
        self._clock = clock
        if isinstance(inner, GuardsWrites):  # one drain call evicts pod after pod: check before each write
            inner.guard_writes(lambda: leadership.is_leader(clock.now()))

    def idle_nodes(self, pool_id: str, idle_for: timedelta) -> Sequence[str]:
        return self._inner.idle_nodes(pool_id, idle_for)

    def pool_nodes(self, pool_id: str) -> Sequence[str]:
        return self._inner.pool_nodes(pool_id)

    def drain(self, pool_id: str, node: str, key: str) -> ActionResult:
        if not self._leadership.is_leader(self._clock.now()):
            raise TransientActuatorError(pool_id, f"this replica no longer leads; node {node} is left to the leader")
        return self._inner.drain(pool_id, node, key)

    def draining_nodes(self, pool_id: str) -> Mapping[str, str]:
        return self._inner.draining_nodes(pool_id)

    def cancel(self, pool_id: str, node: str, key: str) -> ActionResult:
        if not self._leadership.is_leader(self._clock.now()):
            raise TransientActuatorError(pool_id, f"this replica no longer leads; node {node} is left to the leader")
        return self._inner.cancel(pool_id, node, key)

"""Leader-only wrappers around the writers: a replica that does not lead at the moment of a write refuses it.

The daemon checks leadership before a tick starts; these wrappers check again right before every resize and
drain, and a drainer that makes several writes in one call (cordon, each eviction, the node's removal) is handed
the same check for each, so a tick that outlives the leader's renew deadline stops before its next write instead
of racing the new leader. Reads pass through.

A resize or a drain reads the cloud before it writes, and those reads take what they take: each resize, drain and
drain cancel runs inside a write window (``actuators.write_window``), so the adapters check again right before each
cloud write that the leadership left covers the write's time limit, and send it with that limit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from datetime import datetime, timedelta
from typing import Literal, Protocol, runtime_checkable

from actuators import Actuator, NodeDrainer
from actuators.base import held_units, hold_rejected, unforced_drains, unread_pools
from actuators.dry_run import sends_drains
from actuators.write_window import DEFAULT_WRITE_TIMEOUT, WriteWindow, write_window
from agent.drains import ForgetsDrains, left_deleting, removal_state
from models import ActionResult, ActuatorError, PoolState, TransientActuatorError
from models.clock import Clock


class Leadership(Protocol):
    def is_leader(self, now: datetime) -> bool: ...


@runtime_checkable
class Lapses(Protocol):
    """Leadership that lapses unless renewed (``LeaseElector``): how many seconds are left, on the monotonic clock."""

    def lead_left(self) -> float: ...


def _window(leadership: Leadership, write_limit: timedelta) -> WriteWindow:
    return WriteWindow(write_limit, leadership.lead_left if isinstance(leadership, Lapses) else lambda: None)


@runtime_checkable
class GuardsWrites(Protocol):
    """A drainer that makes several writes in one call and checks before each (``KubernetesNodeDrainer``)."""

    def guard_writes(self, may_write: Callable[[], bool]) -> None: ...


class LeaderOnlyActuator:
    """``write_limit``: the time limit of each cloud write (the daemon's: ``LeaderElectionSettings.write_limit``)."""

    def __init__(
        self, inner: Actuator, leadership: Leadership, clock: Clock, write_limit: timedelta = DEFAULT_WRITE_TIMEOUT
    ) -> None:
        self._inner = inner
        self._leadership = leadership
        self._clock = clock
        self._window = _window(leadership, write_limit)

    def list_pools(self) -> Sequence[PoolState]:
        return self._inner.list_pools()

    def unread_pools(self) -> Mapping[str, ActuatorError]:
        return unread_pools(self._inner)

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        if not self._leadership.is_leader(self._clock.now()):
            raise TransientActuatorError(pool_id, "this replica no longer leads; the resize is left to the leader")
        with write_window(self._window):
            return self._inner.resize(pool_id, to_units, key)


class LeaderOnlyDrainer:
    def __init__(
        self, inner: NodeDrainer, leadership: Leadership, clock: Clock, write_limit: timedelta = DEFAULT_WRITE_TIMEOUT
    ) -> None:
        self._inner = inner
        self._leadership = leadership
        self._clock = clock
        self._window = _window(leadership, write_limit)
        if isinstance(inner, GuardsWrites):  # one drain call evicts pod after pod: check before each write
            inner.guard_writes(lambda: leadership.is_leader(clock.now()))

    def idle_nodes(self, pool_id: str, idle_for: timedelta) -> Sequence[str]:
        return self._inner.idle_nodes(pool_id, idle_for)

    def pool_nodes(self, pool_id: str) -> Sequence[str]:
        return self._inner.pool_nodes(pool_id)

    def drain(self, pool_id: str, node: str, key: str, forced: bool = False) -> ActionResult:
        if not self._leadership.is_leader(self._clock.now()):
            raise TransientActuatorError(pool_id, f"this replica no longer leads; node {node} is left to the leader")
        with write_window(self._window):  # the drain's last step removes the node from the cloud
            return self._inner.drain(pool_id, node, key, forced)

    def draining_nodes(self, pool_id: str) -> Mapping[str, str]:
        return self._inner.draining_nodes(pool_id)

    def unforced_drains(self, pool_id: str) -> Set[str]:
        return unforced_drains(self._inner, pool_id)

    def held_units(self, pool_id: str) -> Mapping[str, str]:
        return held_units(self._inner, pool_id)

    def hold_rejected(self, pool_id: str, unit: str, why: str) -> None:  # the drainer's memory: no write to guard
        hold_rejected(self._inner, pool_id, unit, why)

    def sends_drains(self) -> bool:
        return sends_drains(self._inner)

    def cancel(self, pool_id: str, node: str, key: str) -> ActionResult:
        if not self._leadership.is_leader(self._clock.now()):
            raise TransientActuatorError(pool_id, f"this replica no longer leads; node {node} is left to the leader")
        with write_window(self._window):
            return self._inner.cancel(pool_id, node, key)

    def removal_state(self, pool_id: str, unit: str) -> Literal["deleting", "gone", "kept"] | None:
        """What the cloud does with a unit whose drain was taken over or left it cordoned (a read: no write to
        guard); None when the drainer inside cannot tell."""
        return removal_state(self._inner, pool_id, unit)

    def left_deleting(self, pool_id: str) -> Mapping[str, str] | None:
        """The units the drainer inside marks as left cordoned while the cloud deleted them (a read: no write to
        guard); None when it cannot tell."""
        return left_deleting(self._inner, pool_id)

    def forget(self) -> None:
        """Forget what the drainer inside did with its drains (its memory: no write to guard), for a replica that
        leads again after another may have led (``NodeDrains.forget``)."""
        if isinstance(self._inner, ForgetsDrains):
            self._inner.forget()

    def forget_settled(self, keys: Set[str]) -> None:
        """Forget the removals of the drains with these keys, which another leader settled (the drainer's memory: no
        write to guard; ``NodeDrains.recall_settled``)."""
        if isinstance(self._inner, ForgetsDrains):
            self._inner.forget_settled(keys)

"""The dry-run wrappers: reads pass through, writes are recorded and never reach the wrapped actuator or drainer.

A dry-run drainer sends nothing, so it cannot continue a drain the cluster records (one an agent in enforce mode
started before the switch back to dry-run): it says so (``SendsDrains``), and the agent leaves such drains alone
instead of taking them over (``agent.drains``), as it leaves the nodes such an agent's drains left cordoned while the
cloud deleted them, which it lists (``DryRunDrainer.left_deleting``) for the agent to warn about. Its one write is
taking the marks of a drain a person ended (``kubectl uncordon``) off a node that is schedulable
(``KubernetesDrainMarks.write_only_ended_marks``): left there through a dry-run term, they would read as that drain,
forced perhaps, once anyone cordons the node again and the agent is switched back to enforce mode.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Protocol, runtime_checkable

from actuators.base import Actuator, NodeDrainer, held_units, hold_rejected, unread_pools
from models import ActionResult, ActionStatus, ActuatorError, PoolState
from models.clock import Clock


class DryRunActuator:
    """Wraps any Actuator. ``recorded`` lists what would have been done, in order."""

    def __init__(self, inner: Actuator, clock: Clock) -> None:
        self._inner = inner
        self._clock = clock
        self.recorded: list[tuple[str, int, str]] = []

    def list_pools(self) -> Sequence[PoolState]:
        return self._inner.list_pools()

    def unread_pools(self) -> Mapping[str, ActuatorError]:
        return unread_pools(self._inner)

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        self.recorded.append((pool_id, to_units, key))
        return ActionResult(
            key=key,
            pool_id=pool_id,
            status=ActionStatus.RECORDED,
            at=self._clock.now(),
            detail=f"dry-run: would set {pool_id} to {to_units} units",
        )


@runtime_checkable
class SendsDrains(Protocol):
    """A drainer that says whether its drains reach the cluster: a dry-run drainer's do not (``DryRunDrainer``), and
    the wrappers around one say what it says (the daemon's leader-only wrapper)."""

    def sends_drains(self) -> bool: ...


def sends_drains(drainer: NodeDrainer) -> bool:
    """Whether ``drainer``'s drains reach the cluster (cordon, evict, remove); a drainer that does not say does."""
    return drainer.sends_drains() if isinstance(drainer, SendsDrains) else True


class DryRunDrainer:
    """Wraps any NodeDrainer: idle, pool and held nodes are read for real, drains (of busy nodes too) are recorded (no
    cordon, no eviction, no node removed; its one write takes an ended drain's marks off a schedulable node).
    ``recorded`` lists ``(pool, node, key)`` in order. It continues no drain the cluster records (``draining_nodes``,
    read for real): the agent leaves them alone (``sends_drains``)."""

    def __init__(self, inner: NodeDrainer, clock: Clock) -> None:
        self._inner = inner
        self._clock = clock
        self.recorded: list[tuple[str, str, str]] = []
        if callable(only := getattr(inner, "write_only_ended_marks", None)):
            only()  # its reads write one thing: the marks of a drain a person ended, off a schedulable node

    def guard_writes(self, may_write: Callable[[], bool]) -> None:
        """The leader-only wrapper's check reaches the wrapped drainer: only the leader takes ended marks off."""
        if callable(guard := getattr(self._inner, "guard_writes", None)):
            guard(may_write)

    def idle_nodes(self, pool_id: str, idle_for: timedelta) -> Sequence[str]:
        return self._inner.idle_nodes(pool_id, idle_for)

    def pool_nodes(self, pool_id: str) -> Sequence[str]:
        return self._inner.pool_nodes(pool_id)

    def drain(self, pool_id: str, node: str, key: str, forced: bool = False) -> ActionResult:
        self.recorded.append((pool_id, node, key))
        return ActionResult(
            key=key,
            pool_id=pool_id,
            status=ActionStatus.RECORDED,
            at=self._clock.now(),
            detail=f"dry-run: would drain and remove node {node} of {pool_id}",
        )

    def draining_nodes(self, pool_id: str) -> Mapping[str, str]:
        return self._inner.draining_nodes(pool_id)

    def left_deleting(self, pool_id: str) -> Mapping[str, str] | None:
        """The units the wrapped drainer lists as left cordoned by a drain that ended while the cloud deleted them
        (``KubernetesDrainMarks.left_deleting``: a read, of the marks ``draining_nodes`` read), which a dry run warns
        about and leaves as they are; None when it cannot tell."""
        listed = getattr(self._inner, "left_deleting", None)
        return listed(pool_id) if callable(listed) else None

    def held_units(self, pool_id: str) -> Mapping[str, str]:  # a read: a dry run tells the idle nodes it leaves too
        return held_units(self._inner, pool_id)

    def hold_rejected(self, pool_id: str, unit: str, why: str) -> None:  # the drainer's memory; a dry run rejects none
        hold_rejected(self._inner, pool_id, unit, why)

    def sends_drains(self) -> bool:
        return False

    def cancel(self, pool_id: str, node: str, key: str) -> ActionResult:
        self.recorded.append((pool_id, node, f"cancel {key}"))
        return ActionResult(
            key=key,
            pool_id=pool_id,
            status=ActionStatus.RECORDED,
            at=self._clock.now(),
            detail=f"dry-run: would end the drain of node {node} of {pool_id} and uncordon it",
        )

"""Ec2AutoScalingGroupActuator: self-managed GPU nodes in EC2 Auto Scaling groups, resized by desired capacity.

Growing sets the group's desired capacity (``SetDesiredCapacity`` with ``HonorCooldown`` off: the agent's own
plan decides when, not the group's cooldown). There is no operation to wait for: the instances the group is
launching are the units in flight, read from the group itself, so a restarted agent sees them and asks for
nothing twice. Shrinking terminates chosen instances, not ones the group's termination policy picks; ``delete_nodes``
terminates exactly the nodes a drain emptied. A group over several Availability Zones may still rebalance after a
termination, terminating an instance of its own choosing, unless its ``AZRebalance`` process is suspended
(``rebalance_warnings``, checked at start; see ``actuators.aws_groups``).

The group's ``MinSize`` and ``MaxSize`` bound every change (AWS refuses a desired capacity outside them): a target
above ``MaxSize`` grows to ``MaxSize`` and the result says how many units the bound held back; at ``MaxSize`` the
resize is refused with CapacityUnavailable naming the bound (as a GKE pool at its ``totalMaxNodeCount``), which
sends the demand to the next eligible pool. A target below ``MinSize`` shrinks to ``MinSize``, and a resize that
can remove nothing is REJECTED with the bound in its detail.

A launch refused for capacity (``InsufficientInstanceCapacity``, an unfulfillable Spot request) shows as a failed
scaling activity after the call: while that failure is current (recent, and nothing changed in the group since: see
``actuators.aws_groups``), the instances asked for and missing are failed units, removed by the next resize
(desired capacity back to what exists, or to ``MinSize`` if that is more: the group keeps retrying those), and a
resize that asks for more is refused with CapacityUnavailable for ``CAPACITY_MEMORY`` after the failure, which backs
the pool off and sends the demand to the next eligible pool. A launch failed for another reason (a subnet out of
free addresses, a launch template gone) leaves failed units that carry AWS's message (``PoolState.failed_messages``):
removed the same way, with no refusal, and backed off by the executor once they keep failing. Failed units the
``MinSize`` keeps asked for leave a scale-up within the desired capacity nothing to add: it fails with a
TransientActuatorError quoting AWS's message and the minimum size (not the maximum, nor a stockout), which the
executor retries and tells of once it keeps failing. Failed units carry
AWS's message whatever the reason, so the operator reads it: ``PoolState.failed_for_capacity`` says the adapter read
it as capacity or quota, ``failed_for_quota`` as a quota, which does not clear by itself.

An adapter built ``drained`` (the daemon's: every group's nodes are drained before they go) never shrinks by a resize:
one below the group's target as read now, once its failed launches are removed, is REJECTED as "pool changed since
the plan" (see ``actuators.aws_groups``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from actuators.aws_activities import CAPACITY_MEMORY
from actuators.aws_errors import capacity_unavailable
from actuators.aws_group_view import GroupView
from actuators.aws_groups import AutoScalingGroups
from actuators.idempotency import KeyedResults
from actuators.plan_changes import changed_since_plan
from actuators.pool_reads import PoolReads
from config.aws import AutoScalingGroupMapping
from models import (
    ActionResult,
    ActionStatus,
    ActuatorError,
    CapacityUnavailable,
    PermanentActuatorError,
    PoolState,
    TransientActuatorError,
)
from models.clock import Clock

log = logging.getLogger(__name__)


class Ec2AutoScalingGroupActuator:
    """``drained``: the groups' nodes are removed by a drainer through ``delete_nodes``, never by a resize."""

    def __init__(
        self,
        groups: AutoScalingGroups,
        mappings: Sequence[AutoScalingGroupMapping],
        clock: Clock,
        drained: bool = False,
    ) -> None:
        self._groups = groups
        self._drained = drained
        self._mappings = {m.pool: m for m in mappings}
        self._clock = clock
        self._results = KeyedResults()
        self._reads = PoolReads()

    def list_pools(self) -> Sequence[PoolState]:
        """Each group read with its own calls: a group whose read fails is left out (``unread_pools``)."""
        now = self._clock.now()
        return self._reads.each(self._mappings, lambda pool_id: self._state(pool_id, now))

    def unread_pools(self) -> Mapping[str, ActuatorError]:
        return self._reads.unread

    def _state(self, pool_id: str, now: datetime) -> PoolState:
        seen = self._observe(pool_id)
        recreating = min(seen.recreating, max(0, seen.target - seen.ready))
        return PoolState(
            pool_id,
            now,
            seen.ready,
            seen.target,
            failed_units=seen.failed,
            failed_messages=seen.failed_messages,
            failed_for_capacity=seen.stockout,
            failed_for_quota=seen.for_quota,
            recreating_units=recreating,
            refreshing_units=min(seen.refreshing, max(0, seen.target - seen.ready - recreating)),
        )

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        if (known := self._results.get(key)) is not None:
            return known
        seen = self._observe(pool_id)
        if to_units == seen.target and not seen.failed:
            return self._remember(key, pool_id, ActionStatus.DONE, "already at target")
        removed = ""
        if seen.failed:
            seen, dropped = self._drop_failed(pool_id, seen)
            if to_units > seen.target and seen.stockout:
                raise capacity_unavailable(
                    pool_id, f"{seen.failed + dropped} instances could not be launched: {seen.failure}"
                )
            gone = f"removed {dropped} instances that could not be launched"
            if to_units == seen.target:
                detail = gone
                if seen.failed:
                    detail += f"; {seen.held_at_min(seen.failed)}: the group keeps retrying their launch"
                status = ActionStatus.STARTED if dropped else ActionStatus.REJECTED
                return self._remember(key, pool_id, status, detail)
            removed = gone if dropped else ""
        if self._drained and to_units < seen.target:
            detail = changed_since_plan(seen.target, to_units, "node", removed)
            log.warning("pool %s: %s (key %s)", pool_id, detail, key)
            return self._remember(key, pool_id, ActionStatus.REJECTED, detail)
        if to_units > seen.target:
            if seen.stockout and seen.failure_at is not None and self._clock.now() - seen.failure_at < CAPACITY_MEMORY:
                raise capacity_unavailable(pool_id, f"the latest launch failed: {seen.failure}")
            goal = min(to_units, seen.max_size)
            if goal <= seen.desired and seen.failed:  # a minimum size keeps them asked for: they fail to launch
                raise TransientActuatorError(
                    pool_id, seen.failing_at_min(to_units, seen.desired, seen.failed, seen.failure)
                )
            if goal <= seen.desired:
                raise CapacityUnavailable(
                    pool_id, f"target {to_units} nodes: {seen.held_at_max(to_units - seen.target)}"
                )
            self._groups.set_desired(pool_id, seen.name, goal)
            detail = f"desired capacity {seen.desired} -> {goal}"
            if goal < to_units:
                detail += f"; {seen.held_at_max(to_units - goal)}"
                log.warning("pool %s: %s", pool_id, detail)
        else:
            change = self._groups.shrink(pool_id, seen, to_units)
            if not change.acted:
                log.warning("pool %s: %s (key %s)", pool_id, change.detail, key)
                return self._remember(key, pool_id, ActionStatus.REJECTED, change.detail)
            detail = change.detail
        log.info("pool %s: %s (key %s)", pool_id, detail, key)
        return self._remember(key, pool_id, ActionStatus.STARTED, detail)

    def delete_nodes(self, pool_id: str, nodes: Sequence[str], key: str) -> ActionResult:
        """Terminate exactly these nodes' instances, lowering the desired capacity by as many (never below
        ``MinSize``: see ``AutoScalingGroups.remove_nodes``)."""
        if (known := self._results.get(key)) is not None:
            return known
        detail = self._groups.remove_nodes(pool_id, self._observe(pool_id), nodes)
        log.info("pool %s: %s (key %s)", pool_id, detail, key)
        return self._remember(key, pool_id, ActionStatus.STARTED, detail)

    def kept_units(self, pool_id: str, units: Sequence[str], draining: Sequence[str] = ()) -> str:
        """Why ``delete_nodes`` could not remove these nodes now (the group at its minimum size once the nodes
        ``draining`` are removed), "" when it could: their drain is not started
        (``actuators.kubernetes_drain.KeepsUnits``)."""
        return self._groups.kept_at_min(pool_id, self._observe(pool_id), units, draining)

    def rebalance_warnings(self) -> list[str]:
        """One warning per mapped group that spans several Availability Zones with ``AZRebalance`` not suspended,
        or that cannot be read to tell."""
        warnings = []
        for pool_id, mapping in self._mappings.items():
            try:
                warning = self._groups.rebalance_warning(pool_id, mapping.group)
            except ActuatorError as exc:
                warning = f"pool {pool_id}: cannot tell whether AZRebalance is suspended: {exc}"
            if warning:
                warnings.append(warning)
        return warnings

    def _drop_failed(self, pool_id: str, seen: GroupView) -> tuple[GroupView, int]:
        """Lower the desired capacity to what exists, but not below ``MinSize``; the group as it is then, and how
        many failed units went."""
        desired = max(seen.target, seen.min_size)
        dropped = seen.desired - desired
        if dropped > 0:
            self._groups.set_desired(pool_id, seen.name, desired)
        log.warning(
            "pool %s: %d instances could not be launched (%s); desired capacity %d -> %d%s",
            pool_id,
            seen.failed,
            seen.failure,
            seen.desired,
            desired,
            f" ({seen.held_at_min(desired - seen.target)})" if desired > seen.target else "",
        )
        return replace(seen, desired=desired), max(dropped, 0)

    def _observe(self, pool_id: str) -> GroupView:
        mapping = self._mappings.get(pool_id)
        if mapping is None:
            raise PermanentActuatorError(pool_id, "no EC2 Auto Scaling group is mapped to this pool")
        return self._groups.observe(pool_id, mapping.group, self._clock.now())

    def _remember(self, key: str, pool_id: str, status: ActionStatus, detail: str) -> ActionResult:
        return self._results.remember(ActionResult(key, pool_id, status, self._clock.now(), detail=detail))

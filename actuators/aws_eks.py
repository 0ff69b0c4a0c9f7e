"""EksNodegroupActuator: EKS managed node groups resized through their scaling config.

What a pool is made of, as the APIs tell it: the node group (``DescribeNodegroup``: status, ``scalingConfig``,
``health.issues``, the Auto Scaling group it runs in) and its updates (``ListUpdates`` / ``DescribeUpdate``), and
the instances of that Auto Scaling group (see ``actuators.aws_groups``): ``desiredSize`` is what was asked for, an
``InService`` instance is a ready node.

Growing is ``UpdateNodegroupConfig`` with the new ``desiredSize``, carrying a ``clientRequestToken`` derived from
the idempotency key, so AWS itself refuses to apply one request twice. The update is not waited for (the agent must
not block a tick): while EKS reports it ``InProgress`` it is the pool's ``in_flight_operation``, read from EKS's own
update list (``ListUpdates``, followed page by page: at most 100 ids a page, in no stated order), so a restarted
agent sees it too and never starts a second one. While the agent's own update is in progress (its removal of failed
nodes at the start of a tick), a change is REJECTED as waiting for it, not failed, for up to ``_OWN_UPDATE_WAIT``;
and a resize that removes failed nodes and grows sends one update with the final ``desiredSize``, never two. The
list holds every update the node group ever had (thousands after a year of scale-ups), so it is read only while
``DescribeNodegroup`` says the node group is ``UPDATING``, which it is while an update is in progress, and only
until the update in progress is found: this agent's own latest update is asked about first, so the pages are
followed only for one it did not start (or started before a restart).

The node group's ``scalingConfig`` bounds (``minSize`` <= ``desiredSize`` <= ``maxSize``, which EKS enforces with
``InvalidParameterException`` and mirrors into its Auto Scaling group's ``MinSize``/``MaxSize``) are the operator's
and are never moved: a target above ``maxSize`` grows to ``maxSize`` (refused with CapacityUnavailable naming the
bound when already there), one below ``minSize`` shrinks to ``minSize``, and the result says which bound held how
many units; a drained node the group cannot lose stays (see ``actuators.aws_groups``).

Shrinking and ``delete_nodes`` terminate chosen instances by id in the node group's Auto Scaling group with the
desired capacity lowered (what cluster-autoscaler does to managed node groups), so no termination policy picks
victims; EKS reflects the group's desired capacity in the node group's ``desiredSize``. A node group over several
Availability Zones may still be rebalanced after a termination, its group terminating an instance of its own choosing
(aws/containers-roadmap issue 1453): EKS has no setting to stop it, so ``rebalance_warnings`` (checked at start) says
when the group's ``AZRebalance`` process is not suspended.

Launches that fail for capacity show after the call, in the group's scaling activities or as a node group health
issue (``AsgInstanceLaunchFailures``, ``InstanceLimitExceeded``): while the failure is current, the nodes asked for
and missing (but for the replacements of instances still terminating) are failed units, removed by the next resize,
and growing again is refused with CapacityUnavailable, as for Auto Scaling groups. Launches that fail for another
reason (a failed activity whose message names no capacity, or an issue that stops launches:
``InsufficientFreeAddresses``, ``Ec2LaunchTemplateNotFound``, ...) leave failed units carrying AWS's message,
removed the same way with no refusal: the executor tells of them and backs the pool off once they keep failing
(``agent.executor_failures``). Failed units carry AWS's message for capacity too, read as such
(``PoolState.failed_for_capacity``, ``failed_for_quota``), so the stockout alert quotes it. A
health issue carries no time (``Issue`` is code, message, resource ids), and EKS may keep listing one after the
group launches again, so an issue counts only while the group's own scaling activities do not show a newer launch
that did not fail; while it is listed and nothing launched, it counts however long ago this agent first saw it (a
launch template gone, a quota reached stay so until a person acts), and a scale-up is refused for
``CAPACITY_MEMORY`` from when this agent first saw it (after a restart, from then). It is
not read at all while the group's activities place a recent failure in some of its zones, others launching: an issue
names no zone (EKS lists ``AsgInstanceLaunchFailures`` for a one-zone stockout too), and the group launches the nodes
in the other zones (see ``actuators.aws_groups``).

An adapter built ``drained`` (the daemon's: every node group's nodes are drained before they go) never shrinks by a
resize: one below the node group's target as read now, once its failed launches are removed, is REJECTED as "pool
changed since the plan" (see ``actuators.aws_groups``).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from actuators.aws_activities import CAPACITY_MEMORY
from actuators.aws_errors import blocks_launches, capacity_failure, capacity_unavailable, quota_failure
from actuators.aws_group_view import GroupView
from actuators.aws_groups import AutoScalingGroups, call
from actuators.idempotency import KeyedResults
from actuators.plan_changes import changed_since_plan
from actuators.pool_reads import PoolReads
from actuators.write_window import write_timeout
from config.aws import NodegroupMapping
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
_SETTLED = ("Successful", "Failed", "Cancelled")  # Update.status values other than InProgress
_NOT_YET = ("CREATING",)  # Nodegroup.status values that pass by themselves
_UPDATING = "UPDATING"  # the Nodegroup.status while an update is in progress: only then is one looked for
# How long the agent's own update in progress (a desired size) keeps a later change waiting quietly (a few ticks);
# past it, it is told as any update in progress that keeps a change from being sent.
_OWN_UPDATE_WAIT = timedelta(minutes=5)


@dataclass(frozen=True)
class _Observed:
    status: str
    scaling: dict[str, int]
    group: GroupView
    update: str | None  # the update still in progress, if any
    failure: str  # why nodes asked for cannot be launched, "" if nothing says they cannot
    failure_at: datetime | None = None  # when that was reported (a health issue: when first seen)
    failing: bool = False  # the failure is current: the nodes missing now are the ones it failed to launch
    for_capacity: bool = True  # the failure names a capacity shortage or a quota: a stockout, not failed units

    @property
    def failed(self) -> int:
        """Nodes asked for that cannot be launched, counted from the group's instances as the Auto Scaling adapter
        counts them (``aws_group_view.group_members``: any the group lists in it, ready or not), so a removal of
        failed nodes never lowers the desired size below the instances listed."""
        missing = self.scaling["desiredSize"] - len(self.group.instances) - self.group.replacing
        return max(0, missing) if self.failing else 0

    @property
    def stockout(self) -> bool:
        return bool(self.failure) and self.for_capacity

    @property
    def for_quota(self) -> bool:
        """The failure names a quota reached (see ``GroupView.for_quota``)."""
        return self.stockout and quota_failure(self.failure)

    @property
    def failed_messages(self) -> tuple[str, ...]:
        """AWS's reason for each failed unit, capacity or not (see ``GroupView.failed_messages``)."""
        return (self.failure,) * self.failed

    @property
    def target(self) -> int:
        return self.scaling["desiredSize"] - self.failed


class EksNodegroupActuator:
    """``eks`` is a boto3 EKS client; ``groups`` reads and changes the node groups' Auto Scaling groups. Updates go
    through ``writes``: given a write's time limit in seconds, an EKS client whose one attempt ends within it
    (``actuators.aws_wiring.bounded_clients``); without it, through ``eks``. ``drained``: the node groups' nodes are
    removed by a drainer through ``delete_nodes``, never by a resize."""

    def __init__(
        self,
        eks: Any,
        groups: AutoScalingGroups,
        cluster: str,
        mappings: Sequence[NodegroupMapping],
        clock: Clock,
        writes: Callable[[float], Any] | None = None,
        drained: bool = False,
    ) -> None:
        self._eks = eks
        self._drained = drained
        self._eks_writes = writes or (lambda _timeout: eks)
        self._groups = groups
        self._cluster = cluster
        self._mappings = {m.pool: m for m in mappings}
        self._clock = clock
        self._results = KeyedResults()
        self._settled_updates: set[str] = set()
        self._started: dict[str, str] = {}  # pool -> the id of the latest update this agent started on it
        self._started_at: dict[str, datetime] = {}  # pool -> when it started it
        self._issues_seen: dict[tuple[str, str], datetime] = {}  # (pool, "code: message") -> first seen
        self._reads = PoolReads()

    def list_pools(self) -> Sequence[PoolState]:
        """Each node group read with its own calls: one whose read fails is left out (``unread_pools``)."""
        now = self._clock.now()
        return self._reads.each(self._mappings, lambda pool_id: self._state(pool_id, now))

    def unread_pools(self) -> Mapping[str, ActuatorError]:
        return self._reads.unread

    def _state(self, pool_id: str, now: datetime) -> PoolState:
        seen = self._observe(pool_id)
        recreating = min(seen.group.recreating, max(0, seen.target - seen.group.ready))
        return PoolState(
            pool_id,
            now,
            seen.group.ready,
            seen.target,
            in_flight_operation=seen.update,
            failed_units=seen.failed,
            failed_messages=seen.failed_messages,
            failed_for_capacity=seen.stockout,
            failed_for_quota=seen.for_quota,
            recreating_units=recreating,
            refreshing_units=min(seen.group.refreshing, max(0, seen.target - seen.group.ready - recreating)),
        )

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        if (known := self._results.get(key)) is not None:
            return known
        seen = self._observe(pool_id)
        if seen.status in _NOT_YET:
            raise TransientActuatorError(pool_id, f"node group is {seen.status}")
        if seen.status not in ("ACTIVE", "UPDATING", "DEGRADED"):
            raise PermanentActuatorError(pool_id, f"node group {self._nodegroup(pool_id)!r} is {seen.status}")
        if to_units == seen.target and not seen.failed:
            return self._remember(key, pool_id, ActionStatus.DONE, "already at target")
        if seen.update is not None:
            if (own := self._own_update(pool_id, seen.update)) is not None:  # nothing done: the key may ask again
                return ActionResult(key, pool_id, ActionStatus.REJECTED, self._clock.now(), detail=own)
            raise TransientActuatorError(pool_id, f"update {seen.update} is still in progress on this node group")
        removed = ""
        asked = seen.scaling["desiredSize"]
        floor = max(seen.target, seen.group.min_size)  # where removing the failed nodes would leave the desired size
        if seen.failed and not seen.stockout and min(to_units, seen.group.max_size) > floor:
            # One update to the final size: an update removing the failed nodes first would still be in progress when
            # the growth is sent, and EKS refuses another update meanwhile (ResourceInUseException).
            removed = f"in place of {asked - floor} nodes that could not be launched ({seen.failure})"
            seen = replace(seen, scaling={**seen.scaling, "desiredSize": floor})
        elif seen.failed:
            seen, dropped, update = self._drop_failed(pool_id, seen, key)
            if to_units > seen.target and seen.stockout:
                raise capacity_unavailable(
                    pool_id, f"{seen.failed + dropped} nodes could not be launched: {seen.failure}"
                )
            gone = f"removed {dropped} nodes that could not be launched (update {update})"
            if to_units == seen.target:
                detail = gone
                if seen.failed:
                    detail += f"; {seen.group.held_at_min(seen.failed)}: the group keeps retrying their launch"
                status = ActionStatus.STARTED if dropped else ActionStatus.REJECTED
                return self._remember(key, pool_id, status, detail)
            removed = gone if dropped else ""
        if self._drained and to_units < seen.target:
            detail = changed_since_plan(seen.target, to_units, "node", removed)
            log.warning("pool %s: %s (key %s)", pool_id, detail, key)
            return self._remember(key, pool_id, ActionStatus.REJECTED, detail)
        if to_units > seen.target:
            detail = self._grow(pool_id, seen, to_units, key, asked, removed)
        else:
            change = self._groups.shrink(pool_id, seen.group, to_units)
            if not change.acted:
                log.warning("pool %s: %s (key %s)", pool_id, change.detail, key)
                return self._remember(key, pool_id, ActionStatus.REJECTED, change.detail)
            detail = change.detail
        log.info("pool %s: %s (key %s)", pool_id, detail, key)
        return self._remember(key, pool_id, ActionStatus.STARTED, detail)

    def _grow(self, pool_id: str, seen: _Observed, to_units: int, key: str, asked: int, removed: str) -> str:
        """Send the update growing the node group toward ``to_units`` (its desired size ``asked`` before any failed
        nodes were taken out of ``seen``, which ``removed`` says); what it did."""
        failed_at = seen.failure_at
        if seen.stockout and failed_at is not None and self._clock.now() - failed_at < CAPACITY_MEMORY:
            raise capacity_unavailable(pool_id, f"the latest launch failed: {seen.failure}")
        desired = seen.scaling["desiredSize"]
        goal = min(to_units, seen.group.max_size)
        if goal <= desired and seen.failed:  # a minimum size keeps them asked for: they fail to launch
            raise TransientActuatorError(
                pool_id, seen.group.failing_at_min(to_units, desired, seen.failed, seen.failure)
            )
        if goal <= desired:
            held = seen.group.held_at_max(to_units - seen.target)
            raise CapacityUnavailable(pool_id, f"target {to_units} nodes: {held}")
        update = self._update(pool_id, goal, key)
        detail = f"desired size {asked} -> {goal} (update {update})" + (f", {removed}" if removed else "")
        if goal < to_units:
            detail += f"; {seen.group.held_at_max(to_units - goal)}"
            log.warning("pool %s: %s", pool_id, detail)
        return detail

    def delete_nodes(self, pool_id: str, nodes: Sequence[str], key: str) -> ActionResult:
        """Terminate exactly these nodes' instances, lowering the node group's desired size by as many (never
        below ``minSize``: see ``AutoScalingGroups.remove_nodes``)."""
        if (known := self._results.get(key)) is not None:
            return known
        detail = self._groups.remove_nodes(pool_id, self._observe(pool_id).group, nodes)
        log.info("pool %s: %s (key %s)", pool_id, detail, key)
        return self._remember(key, pool_id, ActionStatus.STARTED, detail)

    def kept_units(self, pool_id: str, units: Sequence[str], draining: Sequence[str] = ()) -> str:
        """Why ``delete_nodes`` could not remove these nodes now (the node group at its minimum size once the nodes
        ``draining`` are removed), "" when it could: their drain is not started
        (``actuators.kubernetes_drain.KeepsUnits``)."""
        return self._groups.kept_at_min(pool_id, self._observe(pool_id).group, units, draining)

    def rebalance_warnings(self) -> list[str]:
        """One warning per mapped node group whose Auto Scaling group spans several Availability Zones with
        ``AZRebalance`` not suspended, or that cannot be read to tell."""
        warnings = []
        for pool_id, mapping in self._mappings.items():
            where = {"clusterName": self._cluster, "nodegroupName": mapping.nodegroup}
            try:
                found = call(pool_id, self._eks.describe_nodegroup, **where)["nodegroup"]
                owner = f"EKS node group {mapping.nodegroup!r}"
                for group in found.get("resources", {}).get("autoScalingGroups", []):
                    if warning := self._groups.rebalance_warning(pool_id, group["name"], owner):
                        warnings.append(warning)
            except ActuatorError as exc:
                warnings.append(f"pool {pool_id}: cannot tell whether AZRebalance is suspended: {exc}")
        return warnings

    # -- internals -----------------------------------------------------------------------------------------
    def _observe(self, pool_id: str) -> _Observed:
        nodegroup = self._nodegroup(pool_id)
        where = {"clusterName": self._cluster, "nodegroupName": nodegroup}
        found = call(pool_id, self._eks.describe_nodegroup, **where)["nodegroup"]
        groups = [g["name"] for g in found.get("resources", {}).get("autoScalingGroups", [])]
        if len(groups) != 1:
            raise PermanentActuatorError(pool_id, f"node group {nodegroup!r} runs in {len(groups)} Auto Scaling groups")
        scaling = {k: int(v) for k, v in found.get("scalingConfig", {}).items()}
        group = self._groups.observe(pool_id, groups[0], self._clock.now())
        group = replace(  # EKS mirrors these into the group; the node group's own are the ones it enforces
            group,
            min_size=max(group.min_size, scaling.get("minSize", 0)),
            max_size=min(group.max_size, scaling.get("maxSize", group.max_size)),
            owner=f"EKS node group {nodegroup!r}",
        )
        failure, failure_at, failing, for_capacity = group.failure, group.failure_at, group.failing, group.for_capacity
        if not failure and not group.zone_failure:  # a failure the activities place in some zones is not the pool's
            issues = found.get("health", {}).get("issues", [])
            failure, failure_at, failing = self._health_failure(pool_id, issues, group)
            for_capacity = not failure or bool(capacity_failure(failure))
        status = str(found.get("status", ""))
        update = self._running_update(pool_id, nodegroup) if status == _UPDATING else None
        return _Observed(status, scaling, group, update, failure, failure_at, failing, for_capacity)

    def _health_failure(
        self, pool_id: str, issues: Sequence[dict[str, Any]], group: GroupView
    ) -> tuple[str, datetime | None, bool]:
        """The launch failure a health issue reports (a capacity shortage, or an issue that stops launches:
        ``actuators.aws_errors.blocks_launches``), and when this agent first saw it, while EKS lists the issue and the
        group shows no launch that did not fail (its newest launch activity), however long ago it was first seen: a
        launch template gone or a quota reached stays so until a person acts; and whether it is current, its nodes
        missing now failed units: no other activity of the group (a termination, whose instance the group replaces)
        started since ``CAPACITY_MEMORY`` before the agent first saw the issue, which carries no time of its own."""
        now = self._clock.now()
        listed = [(str(i.get("code")), f"{i.get('code')}: {i.get('message')}") for i in issues]
        named = [text for code, text in listed if capacity_failure(text) or blocks_launches(code)]
        for seen_key in [k for k in self._issues_seen if k[0] == pool_id and k[1] not in named]:
            del self._issues_seen[seen_key]  # cleared: if it comes back, it is a new failure
        recent = [(text, self._issues_seen.setdefault((pool_id, text), now)) for text in named]
        if not recent or group.launched_since:
            return "", None, False
        text, first = recent[0]
        return text, first, group.changed_at is None or group.changed_at <= first - CAPACITY_MEMORY

    def _running_update(self, pool_id: str, nodegroup: str) -> str | None:
        """The node group's update still in progress (asked only while the node group is ``UPDATING``): this
        agent's own latest update if it still is, else the first one in progress on EKS's own update list, whose
        pages are followed until it is found (settled updates are remembered, so each is described once)."""
        where = {"name": self._cluster, "nodegroupName": nodegroup}
        own = self._started.get(pool_id)
        if own is not None and own not in self._settled_updates and self._in_progress(pool_id, own, where):
            return own
        token: str | None = None
        while True:
            page = call(pool_id, self._eks.list_updates, **where, **({"nextToken": token} if token else {}))
            for update_id in page.get("updateIds", []):
                if update_id not in self._settled_updates and self._in_progress(pool_id, update_id, where):
                    return str(update_id)
            token = page.get("nextToken")
            if not token:
                return None

    def _in_progress(self, pool_id: str, update_id: str, where: Mapping[str, str]) -> bool:
        """Whether the update is still in progress; a settled one is remembered and never asked about again."""
        update = call(pool_id, self._eks.describe_update, updateId=update_id, **where)["update"]
        if update.get("status") in _SETTLED:
            self._settled_updates.add(update_id)
            return False
        return True

    def _drop_failed(self, pool_id: str, seen: _Observed, key: str) -> tuple[_Observed, int, str | None]:
        """Lower the desired size to what exists, but not below ``minSize``; the node group as it is then, how many
        failed units went, and the update that did it (None when ``minSize`` kept them all)."""
        before = seen.scaling["desiredSize"]
        desired = max(seen.target, seen.group.min_size)
        update = self._update(pool_id, desired, f"{key}->drop-failed") if desired < before else None
        log.warning(
            "pool %s: %d nodes could not be launched (%s); desired size %d -> %d (update %s)%s",
            pool_id,
            seen.failed,
            seen.failure,
            before,
            desired,
            update,
            f" ({seen.group.held_at_min(desired - seen.target)})" if desired > seen.target else "",
        )
        after = replace(seen, scaling={**seen.scaling, "desiredSize": desired})
        return after, max(0, before - desired), update

    def _update(self, pool_id: str, desired: int, key: str) -> str:
        """``UpdateNodegroupConfig`` of the desired size only: the bounds stay the operator's."""
        token = hashlib.sha256(f"{pool_id}\n{key}\n{desired}".encode()).hexdigest()[:32]
        update = call(  # sent only if the leadership left covers its time limit: the reads took their time
            pool_id,
            self._eks_writes(write_timeout(pool_id)).update_nodegroup_config,
            clusterName=self._cluster,
            nodegroupName=self._nodegroup(pool_id),
            scalingConfig={"desiredSize": desired},
            clientRequestToken=token,
        )["update"]
        self._started[pool_id] = str(update["id"])
        self._started_at[pool_id] = self._clock.now()
        return str(update["id"])

    def _own_update(self, pool_id: str, update: str) -> str | None:
        """Why a change waits for ``update``, in progress, when it is this agent's own started less than
        ``_OWN_UPDATE_WAIT`` ago (its removal of failed nodes at the start of the tick, before the plan's scale-up):
        units in flight, not a failure; None otherwise (someone else's update, or the agent's own stuck)."""
        started = self._started_at.get(pool_id)
        if update != self._started.get(pool_id) or started is None or self._clock.now() - started >= _OWN_UPDATE_WAIT:
            return None
        return (
            f"this agent's update {update} of the node group, started at {started.isoformat()}, is still in "
            "progress and EKS takes no other meanwhile: the change waits for it, and the next tick plans again"
        )

    def _nodegroup(self, pool_id: str) -> str:
        mapping = self._mappings.get(pool_id)
        if mapping is None:
            raise PermanentActuatorError(pool_id, "no EKS managed node group is mapped to this pool")
        return mapping.nodegroup

    def _remember(self, key: str, pool_id: str, status: ActionStatus, detail: str) -> ActionResult:
        return self._results.remember(ActionResult(key, pool_id, status, self._clock.now(), detail=detail))

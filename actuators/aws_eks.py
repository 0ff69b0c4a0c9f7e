"""EksNodegroupActuator: EKS managed node groups resized through their scaling config.

What a pool is made of, as the APIs tell it: the node group (``DescribeNodegroup``: status, ``scalingConfig``,
``health.issues``, the Auto Scaling group it runs in) and its updates (``ListUpdates`` / ``DescribeUpdate``), and
the instances of that Auto Scaling group (see ``actuators.aws_groups``): ``desiredSize`` is what was asked for, an
``InService`` instance is a ready node.

Growing is ``UpdateNodegroupConfig`` with the new ``desiredSize`` (``maxSize`` raised to it when needed), carrying a
``clientRequestToken`` derived from the idempotency key, so AWS itself refuses to apply one request twice. The
update is not waited for (the agent must not block a tick): while EKS reports it ``InProgress`` it is the pool's
``in_flight_operation``, read from EKS's own update list, so a restarted agent sees it too and never starts a
second one. Shrinking and ``delete_nodes`` terminate chosen instances by id in the node group's Auto Scaling group
with the desired capacity lowered (what cluster-autoscaler does to managed node groups), so neither EKS nor the
group picks victims; EKS reflects the group's desired capacity in the node group's ``desiredSize``.

Launches that fail for capacity show after the call, in the group's scaling activities or as a node group health
issue (``AsgInstanceLaunchFailures``, ``InstanceLimitExceeded``): the nodes asked for and missing are failed units,
removed by the next resize, and growing again is refused with CapacityUnavailable, as for Auto Scaling groups.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from actuators.aws_errors import capacity_failure, capacity_unavailable
from actuators.aws_groups import CAPACITY_MEMORY, AutoScalingGroups, GroupView, call
from actuators.idempotency import KeyedResults
from config.aws import NodegroupMapping
from models import ActionResult, ActionStatus, PermanentActuatorError, PoolState, TransientActuatorError
from models.clock import Clock

log = logging.getLogger(__name__)
_SETTLED = ("Successful", "Failed", "Cancelled")  # Update.status values other than InProgress
_NOT_YET = ("CREATING",)  # Nodegroup.status values that pass by themselves


@dataclass(frozen=True)
class _Observed:
    status: str
    scaling: dict[str, int]
    group: GroupView
    update: str | None  # the update still in progress, if any
    failure: str  # why nodes asked for cannot be launched, "" if nothing says they cannot

    @property
    def failed(self) -> int:
        return max(0, self.scaling["desiredSize"] - len(self.group.instances)) if self.failure else 0

    @property
    def target(self) -> int:
        return self.scaling["desiredSize"] - self.failed


class EksNodegroupActuator:
    """``eks`` is a boto3 EKS client; ``groups`` reads and changes the node groups' Auto Scaling groups."""

    def __init__(
        self, eks: Any, groups: AutoScalingGroups, cluster: str, mappings: Sequence[NodegroupMapping], clock: Clock
    ) -> None:
        self._eks = eks
        self._groups = groups
        self._cluster = cluster
        self._mappings = {m.pool: m for m in mappings}
        self._clock = clock
        self._results = KeyedResults()
        self._settled_updates: set[str] = set()

    def list_pools(self) -> Sequence[PoolState]:
        now = self._clock.now()
        states = []
        for pool_id in self._mappings:
            seen = self._observe(pool_id)
            ready = seen.group.ready
            states.append(
                PoolState(pool_id, now, ready, seen.target, in_flight_operation=seen.update, failed_units=seen.failed)
            )
        return states

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
            raise TransientActuatorError(pool_id, f"update {seen.update} is still in progress on this node group")
        if seen.failed:
            update = self._update(pool_id, seen, seen.target, f"{key}->drop-failed")
            log.warning(
                "pool %s: %d nodes could not be launched (%s); desired size %d -> %d (update %s)",
                pool_id,
                seen.failed,
                seen.failure,
                seen.scaling["desiredSize"],
                seen.target,
                update,
            )
            if to_units > seen.target:
                raise capacity_unavailable(pool_id, f"{seen.failed} nodes could not be launched: {seen.failure}")
            if to_units == seen.target:
                detail = f"removed {seen.failed} nodes that could not be launched (update {update})"
                return self._remember(key, pool_id, ActionStatus.STARTED, detail)
        if to_units > seen.target:
            failed_at = seen.group.failure_at
            if failed_at is not None and self._clock.now() - failed_at < CAPACITY_MEMORY:
                raise capacity_unavailable(pool_id, f"the latest launch failed: {seen.group.failure}")
            update = self._update(pool_id, seen, to_units, key)
            detail = f"desired size {seen.scaling['desiredSize']} -> {to_units} (update {update})"
        else:
            detail = self._groups.shrink(pool_id, seen.group, to_units)
        log.info("pool %s: %s (key %s)", pool_id, detail, key)
        return self._remember(key, pool_id, ActionStatus.STARTED, detail)

    def delete_nodes(self, pool_id: str, nodes: Sequence[str], key: str) -> ActionResult:
        """Terminate exactly these nodes' instances, lowering the node group's desired size by as many."""
        if (known := self._results.get(key)) is not None:
            return known
        detail = self._groups.remove_nodes(pool_id, self._observe(pool_id).group, nodes)
        log.info("pool %s: %s (key %s)", pool_id, detail, key)
        return self._remember(key, pool_id, ActionStatus.STARTED, detail)

    # -- internals -----------------------------------------------------------------------------------------
    def _observe(self, pool_id: str) -> _Observed:
        nodegroup = self._nodegroup(pool_id)
        where = {"clusterName": self._cluster, "nodegroupName": nodegroup}
        found = call(pool_id, self._eks.describe_nodegroup, **where)["nodegroup"]
        groups = [g["name"] for g in found.get("resources", {}).get("autoScalingGroups", [])]
        if len(groups) != 1:
            raise PermanentActuatorError(pool_id, f"node group {nodegroup!r} runs in {len(groups)} Auto Scaling groups")
        group = self._groups.observe(pool_id, groups[0])
        scaling = {k: int(v) for k, v in found.get("scalingConfig", {}).items()}
        issues = found.get("health", {}).get("issues", [])
        failure = group.failure or next(
            (
                f"{issue.get('code')}: {issue.get('message')}"
                for issue in issues
                if capacity_failure(f"{issue.get('code')} {issue.get('message')}")
            ),
            "",
        )
        return _Observed(
            str(found.get("status", "")), scaling, group, self._running_update(pool_id, nodegroup), failure
        )

    def _running_update(self, pool_id: str, nodegroup: str) -> str | None:
        """The node group's update still in progress, from EKS's own update list (settled ones are remembered)."""
        where = {"name": self._cluster, "nodegroupName": nodegroup}
        listed = call(pool_id, self._eks.list_updates, **where).get("updateIds", [])
        for update_id in listed:
            if update_id in self._settled_updates:
                continue
            update = call(pool_id, self._eks.describe_update, updateId=update_id, **where)["update"]
            if update.get("status") in _SETTLED:
                self._settled_updates.add(update_id)
            else:
                return str(update_id)
        return None

    def _update(self, pool_id: str, seen: _Observed, desired: int, key: str) -> str:
        scaling = {
            "minSize": min(seen.scaling.get("minSize", 0), desired),
            "maxSize": max(seen.scaling.get("maxSize", 1), desired, 1),
            "desiredSize": desired,
        }
        token = hashlib.sha256(f"{pool_id}\n{key}\n{desired}".encode()).hexdigest()[:32]
        update = call(
            pool_id,
            self._eks.update_nodegroup_config,
            clusterName=self._cluster,
            nodegroupName=self._nodegroup(pool_id),
            scalingConfig=scaling,
            clientRequestToken=token,
        )["update"]
        return str(update["id"])

    def _nodegroup(self, pool_id: str) -> str:
        mapping = self._mappings.get(pool_id)
        if mapping is None:
            raise PermanentActuatorError(pool_id, "no EKS managed node group is mapped to this pool")
        return mapping.nodegroup

    def _remember(self, key: str, pool_id: str, status: ActionStatus, detail: str) -> ActionResult:
        return self._results.remember(ActionResult(key, pool_id, status, self._clock.now(), detail=detail))

"""GkeNodePoolActuator: GKE node pools resized by node count (GPU pools, single-host TPU pools).

What a pool is made of, as the APIs tell it: GKE's node pool (status, autoscaling, running operations) and the
Compute Engine managed instance groups behind it (``instanceGroupUrls``): the target size is the groups'
``targetSize``, a node is ready when its instance has no current action.

A zone out of capacity may accept a resize and fail the creates afterwards. An instance still being created whose
last attempt failed with a stockout (as cluster-autoscaler reads it), or while the pool's latest operation ended
with a stockout error, is a failed unit: reported in ``failed_units`` and left out of ``target_units``, so the
planner does not wait for it. The next resize of the pool deletes those instances by name (the group's target goes
back to what exists; a pool under ``move-bounds`` gets its bounds moved there too), and a resize that asked for
more is refused with CapacityUnavailable, which backs the pool off and sends the demand to the next eligible pool.

Growing uses GKE's ``setSize``; the operation is not waited for (the agent must not block a tick): it shows as the
pool's ``in_flight_operation`` until done, read from GKE's own operation list, so a restarted agent sees it too
and never starts a second one. Shrinking never lets the instance group pick victims: instances still being
created go first, then the newest ready ones, deleted by name with ``deleteInstances`` (what cluster-autoscaler
does on GCE). ``delete_nodes`` removes exactly the nodes a drain emptied. A pool with GKE autoscaling on is
refused unless its mapping says ``move-bounds``, in which case the autoscaler's bounds are set to the target.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from actuators.idempotency import KeyedResults
from actuators.vendor_errors import GOOGLE_ERRORS, capacity_failure, from_google, from_operation_error
from config.cloud import NodePoolMapping
from models import (
    ActionResult,
    ActionStatus,
    CapacityUnavailable,
    PermanentActuatorError,
    PoolState,
    TransientActuatorError,
)
from models.clock import Clock

log = logging.getLogger(__name__)
_MIG_URL = re.compile(r"projects/([^/]+)/zones/([^/]+)/instanceGroupManagers/([^/]+)$")
_NOT_CREATED = ("CREATING", "CREATING_WITHOUT_RETRIES", "RECREATING")  # ManagedInstance.currentAction values


@dataclass(frozen=True)
class _Instance:
    name: str
    mig: tuple[str, str, str]  # project, zone, instance group manager
    ready: bool
    failure: str  # why it could not be created (a stockout), "" when nothing says it cannot be
    deleting: bool = False


@dataclass(frozen=True)
class _Observed:
    autoscaling: bool
    asked: int  # the groups' targetSize, failed instances included
    instances: tuple[_Instance, ...]
    operation: str | None

    @property
    def ready(self) -> int:
        return sum(1 for i in self.instances if i.ready)

    @property
    def failed(self) -> tuple[_Instance, ...]:
        return tuple(i for i in self.instances if i.failure)

    @property
    def target(self) -> int:
        """Ready and still coming: what was asked for minus what cannot be created."""
        return self.asked - len(self.failed)


class GkeNodePoolActuator:
    """``gke`` is a ``container_v1.ClusterManagerClient``; ``migs`` an ``compute_v1.InstanceGroupManagersClient``."""

    def __init__(
        self, gke: Any, migs: Any, cluster_path: str, mappings: Sequence[NodePoolMapping], clock: Clock
    ) -> None:
        self._gke = gke
        self._migs = migs
        self._cluster = cluster_path
        self._location = cluster_path.rsplit("/clusters/", 1)[0]
        self._mappings = {m.pool: m for m in mappings}
        self._clock = clock
        self._results = KeyedResults()

    def list_pools(self) -> Sequence[PoolState]:
        now = self._clock.now()
        states = []
        for pool_id in self._mappings:
            seen = self._observe(pool_id)
            states.append(
                PoolState(
                    pool_id,
                    now,
                    seen.ready,
                    seen.target,
                    in_flight_operation=seen.operation,
                    failed_units=len(seen.failed),
                )
            )
        return states

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        if (known := self._results.get(key)) is not None:
            return known
        seen = self._observe(pool_id)
        mapping = self._mappings[pool_id]
        if seen.autoscaling and mapping.gke_autoscaling == "refuse":
            raise PermanentActuatorError(
                pool_id,
                f"GKE autoscaling is on for node pool {mapping.node_pool!r}; turn it off, or set "
                "gke_autoscaling: move-bounds in its cloud mapping to let the agent move its bounds",
            )
        if to_units == seen.target and not seen.failed:
            return self._results.remember(self._result(key, pool_id, ActionStatus.DONE, "already at target"))
        if seen.operation is not None:
            raise TransientActuatorError(pool_id, f"operation {seen.operation} is still running on this pool")
        if seen.failed:
            self._drop_failed(pool_id, seen, to_units)
            if to_units > seen.target:
                raise CapacityUnavailable(
                    pool_id, f"{len(seen.failed)} instances could not be created: {seen.failed[0].failure}"
                )
            if to_units == seen.target:
                detail = f"removed {len(seen.failed)} instances that could not be created"
                return self._results.remember(self._result(key, pool_id, ActionStatus.STARTED, detail))
        if seen.autoscaling:
            op = self._set_bounds(pool_id, to_units)
        elif to_units > seen.target:
            request = {"name": self._pool_path(pool_id), "node_count": to_units}
            op = self._call(pool_id, self._gke.set_node_pool_size, request=request)
        else:
            pending = [i for i in seen.instances if not i.ready and not i.deleting and not i.failure]
            victims = pending + [i for i in reversed(seen.instances) if i.ready]
            return self._delete(pool_id, victims[: seen.target - to_units], key)
        return self._track(pool_id, op, key, f"target {to_units} nodes")

    def delete_nodes(self, pool_id: str, nodes: Sequence[str], key: str) -> ActionResult:
        """Remove exactly these nodes (GKE node name = instance name), shrinking the pool by as many. Nodes whose
        instances are already being deleted are not asked for again (a drain repeated after a restart)."""
        if (known := self._results.get(key)) is not None:
            return known
        seen = self._observe(pool_id)
        by_name = {i.name: i for i in seen.instances}
        missing = [n for n in nodes if n not in by_name]
        if missing:
            raise PermanentActuatorError(pool_id, f"nodes {missing} are not instances of this pool")
        victims = [by_name[n] for n in nodes if not by_name[n].deleting]
        if not victims:
            detail = f"nodes {', '.join(nodes)} are already being deleted"
            return self._results.remember(self._result(key, pool_id, ActionStatus.STARTED, detail))
        return self._delete(pool_id, victims, key)

    # -- internals -----------------------------------------------------------------------------------------
    def _observe(self, pool_id: str) -> _Observed:
        if pool_id not in self._mappings:
            raise PermanentActuatorError(pool_id, "no GKE node pool is mapped to this pool")
        pool = self._call(pool_id, self._gke.get_node_pool, name=self._pool_path(pool_id))
        operation, failure = self._operations(pool_id)
        instances: list[_Instance] = []
        target = 0
        for url in pool.instance_group_urls:
            found = _MIG_URL.search(url)
            if found is None:
                raise PermanentActuatorError(pool_id, f"unexpected instance group URL {url}")
            mig = (found[1], found[2], found[3])
            where = {"project": mig[0], "zone": mig[1], "instance_group_manager": mig[2]}
            target += int(self._call(pool_id, self._migs.get, **where).target_size)
            for managed in self._call(pool_id, self._migs.list_managed_instances, **where):
                instances.append(_instance(managed, mig, failure))
        autoscaling = bool(pool.autoscaling and pool.autoscaling.enabled)
        return _Observed(autoscaling, target, tuple(instances), operation)

    def _operations(self, pool_id: str) -> tuple[str | None, str]:
        """The operation still running on the pool, if any, and the stockout its latest operation ended with
        ("" if it ended without one, or none ended)."""
        suffix = f"/nodePools/{self._mappings[pool_id].node_pool}"
        listed = self._call(pool_id, self._gke.list_operations, parent=self._location)
        ops = [op for op in listed.operations if op.target_link.endswith(suffix)]
        running = next((str(op.name) for op in ops if op.status.name != "DONE"), None)
        latest = max(ops, key=lambda op: str(op.start_time), default=None)
        if running is not None or latest is None or not latest.error or not latest.error.message:
            return running, ""
        return None, capacity_failure([("", str(latest.error.message))])

    def _drop_failed(self, pool_id: str, seen: _Observed, to_units: int) -> None:
        """Delete the instances that could not be created, so the groups' target is what exists again; under
        ``move-bounds`` also move GKE's autoscaler bounds there, or it would ask for them again."""
        self._delete_instances(pool_id, seen.failed)
        log.warning(
            "pool %s: %d instances could not be created (%s); removed them (target %d -> %d)",
            pool_id,
            len(seen.failed),
            seen.failed[0].failure,
            seen.asked,
            seen.target,
        )
        if seen.autoscaling and to_units >= seen.target:
            self._set_bounds(pool_id, seen.target)

    def _set_bounds(self, pool_id: str, nodes: int) -> Any:
        bounds = {"enabled": True, "total_min_node_count": nodes, "total_max_node_count": nodes}
        request: dict[str, Any] = {"name": self._pool_path(pool_id), "autoscaling": bounds}
        return self._call(pool_id, self._gke.set_node_pool_autoscaling, request=request)

    def _delete(self, pool_id: str, victims: Sequence[_Instance], key: str) -> ActionResult:
        self._delete_instances(pool_id, victims)
        listed = ", ".join(i.name for i in victims)
        log.info("pool %s: deleting instances %s (key %s)", pool_id, listed, key)
        return self._results.remember(
            self._result(key, pool_id, ActionStatus.STARTED, f"deleting {len(victims)} nodes: {listed}")
        )

    def _delete_instances(self, pool_id: str, victims: Sequence[_Instance]) -> None:
        by_mig: dict[tuple[str, str, str], list[str]] = {}
        for inst in victims:
            by_mig.setdefault(inst.mig, []).append(inst.name)
        for (project, zone, mig), names in by_mig.items():
            urls = [f"projects/{project}/zones/{zone}/instances/{n}" for n in names]
            self._call(
                pool_id,
                self._migs.delete_instances_unary,
                project=project,
                zone=zone,
                instance_group_manager=mig,
                instance_group_managers_delete_instances_request_resource={"instances": urls},
            )

    def _track(self, pool_id: str, op: Any, key: str, what: str) -> ActionResult:
        """Look at the new operation once: errors GKE finds at once surface now, the rest on later ticks."""
        op = self._call(pool_id, self._gke.get_operation, name=f"{self._location}/operations/{op.name}")
        if op.status.name == "DONE" and op.error and op.error.message:
            raise from_operation_error(pool_id, op.error.code, op.error.message)
        status = ActionStatus.DONE if op.status.name == "DONE" else ActionStatus.STARTED
        log.info("pool %s: %s, operation %s %s (key %s)", pool_id, what, op.name, op.status.name, key)
        return self._results.remember(self._result(key, pool_id, status, f"{what} (operation {op.name})"))

    def _pool_path(self, pool_id: str) -> str:
        return f"{self._cluster}/nodePools/{self._mappings[pool_id].node_pool}"

    def _result(self, key: str, pool_id: str, status: ActionStatus, detail: str) -> ActionResult:
        return ActionResult(key, pool_id, status, self._clock.now(), detail=detail)

    @staticmethod
    def _call(pool_id: str, method: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except GOOGLE_ERRORS as exc:
            raise from_google(pool_id, exc) from exc


def _instance(managed: Any, mig: tuple[str, str, str], pool_failure: str) -> _Instance:
    """One managed instance; ``pool_failure`` is the stockout the pool's latest operation ended with, if any."""
    errors = managed.last_attempt.errors.errors if managed.last_attempt and managed.last_attempt.errors else []
    name = managed.instance.rsplit("/", 1)[-1] if managed.instance else managed.name
    action = managed.current_action
    failure = ""
    if action in _NOT_CREATED:
        failure = capacity_failure([(str(e.code), str(e.message)) for e in errors]) or pool_failure
    return _Instance(name, mig, action == "NONE", failure, deleting=action == "DELETING")

"""GkeNodePoolActuator: GKE node pools resized by node count (GPU pools, single-host TPU pools).

What a pool is made of, as the APIs tell it: GKE's node pool (status, autoscaling, running operations) and the
Compute Engine managed instance groups behind it (``instanceGroupUrls``): the target size is the groups'
``targetSize``, a node is ready when its instance has no current action, and an instance still being created
whose last attempt failed with a stockout is how a zone out of capacity shows (as cluster-autoscaler reads it).

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
from actuators.vendor_errors import GOOGLE_ERRORS, from_google, from_operation_error, is_capacity_message
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


@dataclass(frozen=True)
class _Instance:
    name: str
    mig: tuple[str, str, str]  # project, zone, instance group manager
    ready: bool
    stockout: str
    deleting: bool = False


@dataclass(frozen=True)
class _Observed:
    autoscaling: bool
    target: int
    instances: tuple[_Instance, ...]
    operation: str | None

    @property
    def ready(self) -> int:
        return sum(1 for i in self.instances if i.ready)


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
            states.append(PoolState(pool_id, now, seen.ready, seen.target, in_flight_operation=seen.operation))
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
        if to_units == seen.target:
            return self._results.remember(self._result(key, pool_id, ActionStatus.DONE, "already at target"))
        if seen.operation is not None:
            raise TransientActuatorError(pool_id, f"operation {seen.operation} is still running on this pool")
        if to_units > seen.target:
            stockouts = [i.stockout for i in seen.instances if i.stockout]
            if stockouts:
                raise CapacityUnavailable(pool_id, f"instances cannot be created: {stockouts[0]}")
        if seen.autoscaling:
            bounds = {"enabled": True, "total_min_node_count": to_units, "total_max_node_count": to_units}
            request: dict[str, Any] = {"name": self._pool_path(pool_id), "autoscaling": bounds}
            op = self._call(pool_id, self._gke.set_node_pool_autoscaling, request=request)
        elif to_units > seen.target:
            request = {"name": self._pool_path(pool_id), "node_count": to_units}
            op = self._call(pool_id, self._gke.set_node_pool_size, request=request)
        else:
            pending = [i for i in seen.instances if not i.ready and not i.deleting]
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
                instances.append(_instance(managed, mig))
        autoscaling = bool(pool.autoscaling and pool.autoscaling.enabled)
        return _Observed(autoscaling, target, tuple(instances), self._running_operation(pool_id))

    def _running_operation(self, pool_id: str) -> str | None:
        suffix = f"/nodePools/{self._mappings[pool_id].node_pool}"
        listed = self._call(pool_id, self._gke.list_operations, parent=self._location)
        for op in listed.operations:
            if op.status.name != "DONE" and op.target_link.endswith(suffix):
                return str(op.name)
        return None

    def _delete(self, pool_id: str, victims: Sequence[_Instance], key: str) -> ActionResult:
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
        listed = ", ".join(i.name for i in victims)
        log.info("pool %s: deleting instances %s (key %s)", pool_id, listed, key)
        return self._results.remember(
            self._result(key, pool_id, ActionStatus.STARTED, f"deleting {len(victims)} nodes: {listed}")
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


def _instance(managed: Any, mig: tuple[str, str, str]) -> _Instance:
    errors = managed.last_attempt.errors.errors if managed.last_attempt and managed.last_attempt.errors else []
    stockout = next((f"{e.code}: {e.message}" for e in errors if is_capacity_message(f"{e.code} {e.message}")), "")
    name = managed.instance.rsplit("/", 1)[-1] if managed.instance else managed.name
    action = managed.current_action
    return _Instance(name, mig, action == "NONE", stockout if action != "NONE" else "", deleting=action == "DELETING")

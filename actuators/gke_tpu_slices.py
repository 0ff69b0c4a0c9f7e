"""GkeTpuSliceActuator: groups of identical multi-host TPU slices on GKE, each slice its own node pool.

A slice cannot be resized: it is created whole (machine type, ``placementPolicy.tpuTopology``, node count = chips /
chips per host) and deleted whole. Slice ``n`` of group ``g`` is node pool ``g-n``, so the cloud's node pool list is the
state: RUNNING/RECONCILING slices are ready, PROVISIONING ones are in flight, ERROR ones are failed (deleted on the next
resize), STOPPING ones are leaving. A RUNNING_WITH_ERROR slice is "partially usable": GKE reports so a node pool whose
instance groups could not create every instance ("Not all instances running in IGM ...
[ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS] ...", terraform-provider-google#3304), and keeps reporting it after the
group's retries created them. Its hosts are counted from its instance groups (``migs``,
``actuators.slice_host_counts``): with every host running it is ready (maybe running work: never deleted as failed);
with hosts missing it cannot run a multi-host job and is in flight (asked for, paid, not ready; the instance groups keep
retrying), and a stockout that keeps them from being created refuses a scale-up with CapacityUnavailable, as a failed
slice's does. Short for its group's wait with a stockout or quota named (``actuators.short_slices``; a slice never whole
waits from its instance groups' creation, which a restart does not lose), it is failed for want of capacity: deleted by
the next resize, the group backed off. A host being recreated (a repair) is short for a stockout only if its own last
attempt says so, never for the stale message GKE keeps on the node pool. Without ``migs`` its hosts cannot be counted
and it is taken as ready. A read made for a change (a resize, a drained slice's deletion) that fails for good fails the
change as a transient error: a group that cannot be read is held, never blocked. A create repeated after a restart meets
409 ALREADY_EXISTS on the same name and is no second slice. Operations are started, looked at once, and not waited for
(``actuators.slice_writes``).

A slice that was whole and fell short (hosts RECREATING: a repair, or a host lost) waits from the agent's first read
that found it so, which the agent keeps in its planner memory (``short_slices``: the loop saves what it knows and a
restarted agent or a new leader hands it back within an unbroken watch where the slice's hosts show no other
episode), because nothing in the cloud tells when it fell short. A managed instance (``listManagedInstances``)
carries no time (its ``lastAttempt`` holds errors only), and a host the zone has no room to recreate has no Compute
instance (its ``id`` and ``instanceStatus`` are empty), so no ``creationTimestamp``; its instance group's is the
slice's creation. The lost host's Node is deleted with its VM, and a multi-host slice is recovered whole (Cloud TPU,
"Failure recovery of TPU instances"), so often no node of the slice is left to carry a mark; Kubernetes Events last
an hour (kube-apiserver ``--event-ttl``), less than a wait. ``instanceGroupManagers.listErrors`` times each failed
attempt but tells no episode apart: a host's earliest error listed may be from an earlier repair it came back from,
which would fail a slice early.
What does tell a recreate apart is the ids of the instances that exist: each recreated instance is a new one with a
new id, so the record keeps with the time the ids of the hosts the slice had when first seen short (``HostCount.ids``,
those every read since still found) and a successor keeps the time only while none of the slice's hosts is new
(``short_slices.same_shortfall``). A host restarted in place keeps its id, and nothing the instance groups answer tells
a restart, so the record holds within an unbroken watch only. A memory saved by a release that did not keep the ids
holds by the watch alone; with none at all the wait starts at the first read again.

GKE may also leave a node pool in ERROR while its nodes run (it stays so after its instance groups' retries created
them: k8s-config-connector#321, terraform-provider-google#10121). So an ERROR slice is failed only once the cluster's
nodes are read (``read_hosts_from``, the group's slice drainer): one with a node registered that runs accelerator work
is never deleted undrained by the next resize, and its hosts are counted as a RUNNING_WITH_ERROR slice's are. With
every host running (or without ``migs``) it is counted ready, the unit it is, left to its drain. With hosts missing it
cannot run its multi-host job, whose pod keeps it busy (a hung job, for ever), so it is never idle and never drained:
it is broken (``UnitPhase.BROKEN``), counted neither ready nor in the target, so the planner buys a slice in its
place, never deleted while busy, and reported in ``PoolState.broken_units`` with the hosts it lacks, for the agent to
tell a person, who decides whether to delete it (once nothing runs on it, it is failed and deleted). What GKE says of
a slice is its ``statusMessage`` ("Deprecated. Use conditions instead") with its ``conditions`` (code such as
GCE_STOCKOUT or GCE_QUOTA_EXCEEDED, canonical code, message): a stockout told in either backs the group off. A failed
slice GKE says nothing of is said to lack the hosts it lacks (a broken slice whose job was stopped: no stockout unless
its instances name one); one with every host, or whose hosts cannot be counted, has no message, and the agent counts
it a stockout, as a failed unit no one says anything of.

A ready slice none of whose hosts is a node of the cluster runs and serves nothing, though it is paid for: it is in
flight for its group's grace (``nodes_graces``: the pool's lead time, at least ``NODES_GRACE``), then failed, deleted
by the next resize with nothing to drain and no back-off (``actuators.slices_without_nodes``). Such a slice, and one
short of hosts only being recreated (RECREATING, none CREATING), ran: a repair, reported in ``recreating_units``.

A slice goes whole, and only once drained: the group's ``KubernetesSliceDrainer`` (``actuators.slice_drain``)
finds its ready slices here (``ready_slices``) and, once every node of an idle slice is empty, deletes exactly that
slice (``delete_nodes``). The daemon releases ready slices only that way, never by a smaller resize, which would
take the highest-index ready slices, busy or idle: its adapter is built ``drained``, and a resize below the group's
target as read now, once the slices failed in that read are deleted, means the group changed since the plan (an
ERROR slice counted failed then has a job on it now) and is rejected with nothing else deleted. An adapter without a
drainer shrinks as the unit groups do (``actuators.unit_groups.change_for``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence, Set
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from actuators.idempotency import KeyedResults
from actuators.node_pool_messages import _message
from actuators.plan_changes import changed_since_plan
from actuators.pool_reads import PoolReads
from actuators.short_slices import ShortSlices, first_asked
from actuators.slice_host_counts import SliceHostCounter
from actuators.slice_writes import SliceWrites
from actuators.slices_without_nodes import SlicesWithoutNodes
from actuators.unit_groups import Unit, UnitPhase, group_state, members, resize_group
from actuators.vendor_errors import call_google
from config.cloud import TpuSliceGroupMapping
from config.schema import Settings
from models import (
    ActionResult,
    ActionStatus,
    ActuatorError,
    PermanentActuatorError,
    PoolState,
    TransientActuatorError,
)
from models.clock import Clock

log = logging.getLogger(__name__)
# How long a ready slice may have no node in the cluster before it is failed, at least: longer than a host recreated by
# a repair takes to register again. A new slice is no such slice: GKE's create of a node pool ends once its nodes
# registered (it fails with "only 0 nodes out of N have registered" otherwise: terraform-google-kubernetes-engine#649).
NODES_GRACE = timedelta(minutes=10)


def nodes_graces(settings: Settings) -> dict[str, timedelta]:
    """How long a ready slice of each group may have no node in the cluster before it is failed: its pool's lead time,
    at least ``NODES_GRACE``. A multi-host slice is recovered whole: "Multi-host TPU slices require all instances in the
    slice to be recovered or rescheduled together" (Cloud TPU, "Failure recovery of TPU instances"), so its hosts come
    back in about the time a new slice takes to come up, the lead time; failed sooner, a slice still being recovered is
    deleted and asked for again, to come up a lead time later still."""
    if settings.cloud is None:
        return {}
    lead = {p.pool_id: p.lead_time for p in settings.pool_specs()}
    groups = [m.pool for m in settings.cloud.tpu_slice_groups if m.pool in lead]
    return {pool: max(NODES_GRACE, lead[pool]) for pool in groups}


_PHASES = {
    "RUNNING": UnitPhase.READY,
    "RECONCILING": UnitPhase.READY,
    "PROVISIONING": UnitPhase.IN_FLIGHT,
    "STOPPING": UnitPhase.LEAVING,
    "ERROR": UnitPhase.FAILED,
    # "created and is partially usable ... some functionality may be impaired" (container_v1 NodePool.Status): ready
    # once its hosts are counted all running (``_impaired``); it may be running work, so it is never deleted
    # undrained as a failed slice would be.
    "RUNNING_WITH_ERROR": UnitPhase.READY,
}


class SliceHosts(Protocol):
    """What the cluster's nodes say of slices (the group's ``KubernetesSliceDrainer``)."""

    def busy_slices(self, pool_id: str, slices: Sequence[str]) -> Set[str]:
        """Of these slices, those with a node registered in the cluster on which a pod runs accelerator work."""
        ...

    def slices_without_nodes(self, pool_id: str, slices: Sequence[str]) -> Set[str]:
        """Of these slices, those with no node registered in the cluster, less those being drained whose nodes left
        during the drain (the drain deletes them: they count as the ready slices they were when it started)."""
        ...


class GkeTpuSliceActuator:
    """``gke`` is a ``container_v1.ClusterManagerClient``; ``migs`` a ``compute_v1.InstanceGroupManagersClient``,
    which counts the hosts of a slice GKE reports RUNNING_WITH_ERROR. ``drained``: the groups' ready slices are
    deleted by a drainer through ``delete_nodes``, never by a resize. ``graces``: how long a ready slice of each group
    may have no node in the cluster before it is failed (``nodes_graces``; ``NODES_GRACE`` for a group it leaves
    out). ``waits``: how long a slice of each group may be short of hosts for want of capacity before it is failed
    (``actuators.short_slices.short_waits``)."""

    def __init__(
        self,
        gke: Any,
        cluster_path: str,
        mappings: Sequence[TpuSliceGroupMapping],
        clock: Clock,
        migs: Any = None,
        drained: bool = False,
        graces: Mapping[str, timedelta] | None = None,
        waits: Mapping[str, timedelta] | None = None,
    ) -> None:
        self._gke = gke
        self._short = ShortSlices(waits, [m.pool for m in mappings])
        self._asked: dict[tuple[str, str], datetime] = {}  # (pool, slice never whole) -> first asked for, this read
        self._hosts: dict[tuple[str, str], frozenset[str]] = {}  # (pool, short slice) -> its hosts' ids, this read
        self._recreating: set[tuple[str, str]] = set()  # (pool, slice in flight that ran: being repaired), this read
        self._without_nodes = SlicesWithoutNodes(graces or {}, NODES_GRACE, self._log_once)
        self._drained = drained
        self._migs = migs
        self._counter = SliceHostCounter(migs, self._log_once)
        self._cluster = cluster_path
        self._writes = SliceWrites(gke, cluster_path)
        self._mappings = {m.pool: m for m in mappings}
        self._clock = clock
        self._results = KeyedResults()
        self._logged: set[tuple[str, str]] = set()  # (slice, what was said of it) for slices with an error: once each
        self._reads = PoolReads()
        self._nodes: SliceHosts | None = None

    @property
    def short_slices(self) -> ShortSlices:
        """Since when each slice has been seen short of hosts: the record the agent keeps across restarts with its
        planner memory (``ShortSlices.known``) and hands back to a new adapter (``ShortSlices.recall``)."""
        return self._short

    def read_hosts_from(self, nodes: SliceHosts) -> None:
        """Ask ``nodes`` before counting an ERROR slice failed: one with a node at work is counted ready instead.
        Until then (an actuator without the cluster's nodes) every ERROR slice is failed."""
        self._nodes = nodes

    def list_pools(self) -> Sequence[PoolState]:
        """One list of the cluster's node pools reads every group: when it fails, no group is read
        (``unread_pools``)."""
        now = self._clock.now()
        try:
            pools = self._node_pools(next(iter(self._mappings), ""))
        except ActuatorError as exc:
            return self._reads.none(self._mappings, exc)
        return self._reads.each(self._mappings, lambda pool_id: self._state(pool_id, now, pools))

    def unread_pools(self) -> Mapping[str, ActuatorError]:
        return self._reads.unread

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        if (known := self._results.get(key)) is not None:
            return known
        mapping = self._mapping(pool_id)
        target, change = resize_group(
            pool_id,
            mapping.group,
            self._read_for_change(pool_id, mapping),
            to_units,
            create=lambda name: self._writes.create(pool_id, mapping, name),
            delete=lambda name: self._writes.delete(pool_id, name),
            unit_of_group="a slice of group",
            drained=self._drained,
        )
        if self._drained and to_units < target:
            return self._results.remember(self._changed(key, pool_id, target, to_units, change.delete))
        if change.is_empty:
            return self._results.remember(self._result(key, pool_id, ActionStatus.DONE, "already at target"))
        log.info("pool %s: slices %s -> %s: %s (key %s)", pool_id, target, to_units, change.describe(), key)
        detail = f"target {to_units} slices: {change.describe()}"
        return self._results.remember(self._result(key, pool_id, ActionStatus.STARTED, detail))

    def ready_slices(self, pool_id: str) -> Sequence[str]:
        """The names of the group's ready slices (their node pools), by index."""
        mapping = self._mapping(pool_id)
        return [u.name for u in self._slices(pool_id, mapping, self._node_pools(pool_id)) if u.phase is UnitPhase.READY]

    def delete_nodes(self, pool_id: str, nodes: Sequence[str], key: str) -> ActionResult:
        """Delete exactly these slices (a drained slice is the unit of a ``KubernetesSliceDrainer``). A slice already
        being deleted or gone is not asked for again (a drain repeated after a restart)."""
        if (known := self._results.get(key)) is not None:
            return known
        mapping = self._mapping(pool_id)
        strangers = [n for n in nodes if not members(mapping.group, [(n, UnitPhase.READY, "")])]
        if strangers:
            raise PermanentActuatorError(pool_id, f"{strangers} are not slices of group {mapping.group!r}")
        present = {u.name: u for u in self._read_for_change(pool_id, mapping)}
        victims = [n for n in nodes if n in present and present[n].phase is not UnitPhase.LEAVING]
        for name in victims:
            self._writes.delete(pool_id, name)
        if victims:
            log.info("pool %s: deleting drained slices %s (key %s)", pool_id, ", ".join(victims), key)
        detail = f"deleting slice {', '.join(victims)}" if victims else f"{', '.join(nodes)} already being deleted"
        return self._results.remember(self._result(key, pool_id, ActionStatus.STARTED, detail))

    # -- internals -----------------------------------------------------------------------------------------
    def _changed(self, key: str, pool_id: str, target: int, to_units: int, failed: Sequence[str]) -> ActionResult:
        """A drained group asked for fewer slices than it holds now: the plan was made on an older read (a failed
        slice has work on it since). Its slices go only through their drains, so only the failed ones were deleted."""
        removed = f"deleting failed slices {', '.join(failed)}" if failed else ""
        detail = changed_since_plan(target, to_units, "slice", removed, verb="deleted")
        log.warning("pool %s: %s (key %s)", pool_id, detail, key)
        return self._result(key, pool_id, ActionStatus.REJECTED, detail)

    def _mapping(self, pool_id: str) -> TpuSliceGroupMapping:
        mapping = self._mappings.get(pool_id)
        if mapping is None:
            raise PermanentActuatorError(pool_id, "no TPU slice group is mapped to this pool")
        return mapping

    def _state(self, pool_id: str, now: datetime, node_pools: Sequence[Any]) -> PoolState:
        units = self._slices(pool_id, self._mappings[pool_id], node_pools)
        broken = tuple((u.name, u.message) for u in units if u.phase is UnitPhase.BROKEN)
        again = sum(1 for u in units if u.phase is UnitPhase.IN_FLIGHT and (pool_id, u.name) in self._recreating)
        return replace(group_state(pool_id, now, units), broken_units=broken, recreating_units=again)

    def _read_for_change(self, pool_id: str, mapping: TpuSliceGroupMapping) -> list[Unit]:
        """The group's slices, read for a change (a resize, a drained slice's deletion): a read that fails for good
        fails the change with a transient error, nothing sent. A group that cannot be read is held, not blocked
        (``unread_pools``), so a read must not block it from inside a change either."""
        try:
            return self._slices(pool_id, mapping, self._node_pools(pool_id))
        except PermanentActuatorError as exc:
            reason = f"the slice group could not be read for the change, nothing sent: {exc.reason}"
            raise TransientActuatorError(pool_id, reason) from exc

    def _node_pools(self, pool_id: str) -> list[Any]:
        return list(call_google(pool_id, self._gke.list_node_pools, parent=self._cluster).node_pools)

    def _slices(self, pool_id: str, mapping: TpuSliceGroupMapping, node_pools: Sequence[Any]) -> list[Unit]:
        self._recreating = {k for k in self._recreating if k[0] != pool_id}  # this read's, below
        mine = {u.name for u in members(mapping.group, ((p.name, UnitPhase.READY, "") for p in node_pools))}
        by_name = {str(p.name): p for p in node_pools}
        units = self._given_up(
            pool_id, [self._unit(pool_id, mapping, p) for p in node_pools if p.name in mine], by_name
        )
        failed = [name for name, phase, _ in units if phase is UnitPhase.FAILED]
        busy = self._nodes.busy_slices(pool_id, failed) if self._nodes is not None and failed else set()
        seen = []
        for name, phase, message in units:
            if name in busy:
                seen.append(self._at_work(pool_id, mapping, by_name[name], message))
            elif phase is UnitPhase.FAILED and not message:
                seen.append((name, phase, self._short_of(pool_id, mapping, by_name[name])))
            else:
                seen.append((name, phase, message))
        return members(mapping.group, self._with_nodes(pool_id, seen, by_name))

    def _given_up(
        self, pool_id: str, units: Sequence[tuple[str, UnitPhase, str]], by_name: Mapping[str, Any]
    ) -> list[tuple[str, UnitPhase, str]]:
        """The slices, one short of hosts (RUNNING_WITH_ERROR, in flight) for its group's wait with a stockout or quota
        named failed for want of capacity (``ShortSlices``); with work on it, it is then broken (``_at_work``)."""
        short = {
            n: m for n, p, m in units if p is UnitPhase.IN_FLIGHT and by_name[n].status.name == "RUNNING_WITH_ERROR"
        }
        asked = {n: t for n in short if (t := self._asked.pop((pool_id, n), None)) is not None}
        hosts = {n: ids for n in short if (ids := self._hosts.pop((pool_id, n), None)) is not None}
        self._asked = {k: t for k, t in self._asked.items() if k[0] != pool_id}
        self._hosts = {k: ids for k, ids in self._hosts.items() if k[0] != pool_id}
        failed = self._short.given_up(pool_id, short, self._clock.now(), asked, hosts)
        for name in failed:
            self._log_once(
                name, "has been short of hosts for its group's wait: failed, deleted by the next resize", short[name]
            )
        return [(n, UnitPhase.FAILED, failed[n]) if n in failed else (n, p, m) for n, p, m in units]

    def _with_nodes(
        self, pool_id: str, seen: Sequence[tuple[str, UnitPhase, str]], by_name: Mapping[str, Any]
    ) -> list[tuple[str, UnitPhase, str]]:
        """The slices, a ready one none of whose hosts is a node of the cluster counted in flight, then failed
        (``SlicesWithoutNodes``). Without the cluster's nodes (``read_hosts_from``) every ready slice is counted
        ready."""
        ready = [name for name, phase, _ in seen if phase is UnitPhase.READY]
        absent = self._nodes.slices_without_nodes(pool_id, ready) if self._nodes is not None and ready else set()
        out = self._without_nodes.counted(pool_id, seen, by_name, absent, self._clock.now())
        # a slice GKE reports ready whose nodes are gone ran (GKE's create ends once its nodes registered): recovered
        self._recreating |= {(pool_id, n) for n, p, _ in out if p is UnitPhase.IN_FLIGHT and n in ready}
        return out

    def _short_of(self, pool_id: str, mapping: TpuSliceGroupMapping, node_pool: Any) -> str:
        """What can be said of a failed slice GKE says nothing of: the hosts it lacks, if it lacks any (a broken slice
        whose job was stopped), with the stockout behind them if its instances name one; else "" (nothing known)."""
        if self._migs is None:
            return ""
        running, expected, failure, lacking, *_ = self._counter.count(pool_id, node_pool, "", mapping.hosts_per_slice)
        if running >= expected:
            return ""
        return f"in ERROR with {running} of {expected} hosts running; missing: {lacking}" + (
            f" ({failure})" if failure else ""
        )

    def _unit(self, pool_id: str, mapping: TpuSliceGroupMapping, node_pool: Any) -> tuple[str, UnitPhase, str]:
        """(name, phase, message) of one slice."""
        name, status, message = str(node_pool.name), node_pool.status.name, _message(node_pool)
        if status == "RUNNING_WITH_ERROR":
            return self._impaired(pool_id, mapping, node_pool, message)
        return name, _PHASES.get(status, UnitPhase.IN_FLIGHT), message

    def _impaired(
        self, pool_id: str, mapping: TpuSliceGroupMapping, node_pool: Any, message: str
    ) -> tuple[str, UnitPhase, str]:
        """A RUNNING_WITH_ERROR slice is ready when all its hosts run; with hosts missing it is in flight, its
        message saying how many run and, when its instances or GKE's message name one, the stockout behind it."""
        name = str(node_pool.name)
        if self._migs is None:
            self._log_once(name, "runs with an error, counted as ready", message)
            return name, UnitPhase.READY, message
        running, expected, failure, _, creating, _, ids, recreated = self._counter.count(
            pool_id, node_pool, message, mapping.hosts_per_slice
        )
        if running >= expected:
            self._log_once(name, "runs with an error, counted as ready", message)
            return name, UnitPhase.READY, message
        if creating and (asked := first_asked(pool_id, self._counter.groups(pool_id, creating))) is not None:
            self._asked[(pool_id, name)] = asked  # never whole: its wait counts from then (``_given_up``)
        self._hosts[(pool_id, name)] = ids  # does a record read back speak of this shortfall? (``_given_up``)
        if recreated and not creating:  # hosts of a slice that was whole, being repaired: no scale-up's
            self._recreating.add((pool_id, name))
        missing = f"{running} of {expected} hosts running" + (f": {failure}" if failure else "")
        self._log_once(name, "has hosts missing, counted as in flight, not ready", missing)
        return name, UnitPhase.IN_FLIGHT, missing

    def _at_work(
        self, pool_id: str, mapping: TpuSliceGroupMapping, node_pool: Any, message: str
    ) -> tuple[str, UnitPhase, str]:
        """An ERROR slice with a node at work (or one short of hosts for its group's wait) is ready when all its hosts
        run (or they cannot be counted); with hosts missing it is broken, its message saying which."""
        name = str(node_pool.name)
        if self._migs is not None:
            running, expected, failure, lacking, *_ = self._counter.count(
                pool_id, node_pool, message, mapping.hosts_per_slice
            )
            if running < expected:
                status = node_pool.status.name
                why = f"in {status} with work on it and {running} of {expected} hosts running; missing: {lacking}"
                why += f" ({failure})" if failure else ""
                self._log_once(name, "is broken: counted neither ready nor asked for, never deleted while busy", why)
                return name, UnitPhase.BROKEN, why
        self._log_once(name, "is in ERROR with a node at work: counted as ready, left to its drain", message)
        return name, UnitPhase.READY, message

    def _log_once(self, name: str, what: str, message: str) -> None:
        if (name, f"{what}: {message}") not in self._logged:
            self._logged.add((name, f"{what}: {message}"))
            log.warning("slice %s %s: %s", name, what, message or "-")

    def _result(self, key: str, pool_id: str, status: ActionStatus, detail: str) -> ActionResult:
        return ActionResult(key, pool_id, status, self._clock.now(), detail=detail)

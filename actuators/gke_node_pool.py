"""GkeNodePoolActuator: GKE node pools resized by node count (GPU pools, single-host TPU pools), zone by zone.

What a pool is made of, as the APIs tell it: GKE's node pool (status, autoscaling, running operations) and one
Compute Engine managed instance group per zone behind it (``instanceGroupUrls``): a zone's target size is its
group's ``targetSize``, a node is ready when its instance has no current action. GKE's ``setSize`` sets the size of
*every* zone (its ``nodeCount`` is per zone), and starts a GKE operation that waits for the creates: in a stockout it
runs until GKE gives up ("Not all instances running in IGM after 35m0s"), and GKE refuses every other change to the
pool meanwhile. So the adapter never sends it: it decides whole nodes per zone and resizes each zone's group through
Compute (an operation of Compute's, done once the creates are scheduled), the way cluster-autoscaler resizes each
group as a node group; a zone's stockout is acted on at the next resize, not after GKE's operation.

Growing spreads the new nodes over the zones that have room (``zone_placement``). GKE's autoscaling bounds
(``maxNodeCount`` per zone, ``totalMaxNodeCount``) bind GKE's autoscaler only, never a resize: with autoscaling off
they are not read (GKE may keep the last ones; the Terraform provider reads them only when ``enabled``), and under
``move-bounds`` the agent sets them to the nodes it placed. A zone out of accelerators is backed off for
``zone_backoff``: its share goes to the pool's other zones, and only when no zone can take any node is the resize
refused with CapacityUnavailable, which backs the pool off and sends the demand to the next eligible pool. A quota
used up is not a zone's (Compute's quotas are regional or global): creates failed for one back every zone off, and a
refusal for zones out for it says it is a quota (``CapacityUnavailable.quota``), as the first alert did.

A zone out of capacity may accept a resize and fail the creates afterwards. An instance still being created whose
last attempt failed with a stockout (as cluster-autoscaler reads it), or while the pool's latest operation ended
with a stockout error in its zone (less than ``zone_backoff`` ago), is a failed unit: reported in
``failed_units`` and left out of ``target_units``, so the planner does not wait for it; so is one whose last attempt
failed for a reason of its own (a subnet out of addresses), carrying it. The next resize of the pool deletes those
instances by name (the group's target goes back to what exists; a pool under ``move-bounds`` gets its bounds moved
there too) and backs the zones out of capacity off. So it does a zone whose instances failed for an error confined
to the zone (a reservation of the zone used up: ``node_pool_zones.is_zonal_error``) while another zone takes its
share; an error every zone meets (a region's subnet out of addresses, a permission) backs no zone off.

Resizes are not waited for (the agent must not block a tick). A GKE operation on the pool (an autoscaling change) shows
as the pool's ``in_flight_operation`` until done, read from GKE's own operation list, so a restarted agent sees it too
and never starts a second one; one the agent did not start (an upgrade of its nodes, an operator's resize) holds the
pool's resizes until it ends. One on the cluster itself (``targetLink`` ``.../clusters/C``: a control plane upgrade GKE
starts on its own schedule, an ``UPDATE_CLUSTER``) holds nothing of a pool without GKE autoscaling: its zones' groups
are resized through Compute, which GKE does not police (cluster-autoscaler resizes them during such operations too);
it holds a ``move-bounds`` pool's scale-ups, whose bounds GKE refuses to move until it ends. Operations on another node
pool (the agent's own TPU slice creates and deletes, ``targetLink`` ``.../nodePools/NP``) hold nothing here.
``delete_nodes`` removes exactly the nodes a drain emptied. A pool
whose nodes a drainer removes (``drained``, every node pool of the daemon) never shrinks by a resize: a resize below the
pool's target as read now, once its failed instances are deleted, means the pool changed since the plan (a failed
instance came up after all), and is rejected with nothing else removed, so no ready node goes without its drain. Without
a drainer, shrinking never lets the instance group pick victims: instances still being created go first, then the newest
ready ones of the fullest zone, deleted by name with ``deleteInstances`` (what cluster-autoscaler does on GCE). A pool
with GKE autoscaling on is refused unless its mapping says ``move-bounds``, its drains too (``kept_units`` refuses one
before anything is cordoned, ``delete_nodes`` one that reaches the deletion); under ``move-bounds`` the autoscaler's
total bounds are set to the target (0-1 at zero nodes: ``actuators.gke_autoscaler_bounds``), and follow the pool down
once a drain's nodes are deleted (a resize to the pool's size moves bounds left off it; a failure to move them after a
deletion is only ever transient); a scale-up resizes each zone's group first, as without autoscaling, and then sets the
bounds to the nodes the groups were given, leaving them where they were when none could be placed (raised to a refused
target, they would let GKE's autoscaler buy the nodes later while the demand went to the next pool).
GKE's autoscaler does not grow a pool to a raised minimum: it adds nodes only for pods that cannot be scheduled
(cluster-autoscaler FAQ, "My cluster is below minimum / above maximum number of nodes, but CA did not fix that!
Why?"), so bounds alone bought nothing ahead of the queue.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from actuators.gke_autoscaler_bounds import (
    GkeAutoscalerBounds,
    bounds_at,
    check_bounds_can_move,
    refuse_autoscaling,
)
from actuators.gke_node_pool_reads import GkeNodePoolReads
from actuators.idempotency import KeyedResults
from actuators.node_pool_zones import Instance, Observed
from actuators.plan_changes import changed_since_plan
from actuators.vendor_errors import call_google, from_operation_error, is_capacity_message, is_quota_message
from actuators.write_window import write_refused, write_timeout
from actuators.zone_placement import shrink_order, spread
from config.cloud import NodePoolMapping
from models import (
    ActionResult,
    ActionStatus,
    CapacityUnavailable,
    PermanentActuatorError,
    TransientActuatorError,
)
from models.clock import Clock

log = logging.getLogger(__name__)


class GkeNodePoolActuator(GkeNodePoolReads):
    """``gke`` is a ``container_v1.ClusterManagerClient``; ``migs`` an ``compute_v1.InstanceGroupManagersClient``.
    ``drained``: the pools' nodes are removed by a drainer through ``delete_nodes``, never by a resize. What it reads
    of the pools, and ``list_pools``, are ``GkeNodePoolReads``'."""

    def __init__(
        self,
        gke: Any,
        migs: Any,
        cluster_path: str,
        mappings: Sequence[NodePoolMapping],
        clock: Clock,
        zone_backoff: timedelta = timedelta(minutes=30),
        drained: bool = False,
    ) -> None:
        super().__init__(gke, migs, cluster_path, mappings, clock, zone_backoff)
        self._drained = drained
        self._results = KeyedResults()
        self._bounds = GkeAutoscalerBounds(gke, self._pool_path)

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        if (known := self._results.get(key)) is not None:
            return known
        seen = self._observe(pool_id, changing=True)
        refuse_autoscaling(pool_id, self._mappings[pool_id], seen.autoscaling)
        if to_units == seen.target and not seen.failed:
            if not seen.autoscaling or seen.bounds == bounds_at(to_units):
                return self._results.remember(self._result(key, pool_id, ActionStatus.DONE, "already at target"))
            check_bounds_can_move(pool_id, seen, to_units)  # left off the pool's size, e.g. by a failed move
            moved = self._bounds.follow(pool_id, seen, to_units)
            log.info("pool %s: %s (key %s)", pool_id, moved, key)
            return self._results.remember(self._result(key, pool_id, ActionStatus.STARTED, moved))
        if seen.operation is not None:
            raise TransientActuatorError(pool_id, f"operation {seen.operation} is still running on this pool")
        why = removed = ""
        if seen.failed:
            # Under move-bounds too, the zones out of capacity are backed off here and ``_grow`` places their share
            # in the others, moving the bounds to what was placed (refused, and left where the pool is, only when no
            # zone takes a node).
            dropped = len(seen.failed)
            why = f"{dropped} instances could not be created: {seen.failed_reason}"
            self._drop_failed(pool_id, seen)
            seen = seen.without_failed()
            removed = f"removed {dropped} instances that could not be created"
            if to_units == seen.target:
                # Under move-bounds the bounds follow, or GKE's autoscaler would ask for the instances again.
                moved = self._bounds.follow(pool_id, seen, to_units, sent=removed)
                detail = "; ".join(filter(None, [removed, moved]))
                return self._results.remember(self._result(key, pool_id, ActionStatus.STARTED, detail))
        if self._drained and to_units < seen.target:
            return self._results.remember(self._changed(key, pool_id, seen, to_units, removed))
        if seen.autoscaling and to_units <= seen.target:
            op = self._bounds.set(pool_id, to_units)
            return self._track(pool_id, op, key, f"target {to_units} nodes")
        if to_units > seen.target:
            if seen.autoscaling and seen.cluster_operation is not None:
                # Grown without them, the bounds would stay at the pool's old size: GKE's autoscaler would take the
                # new nodes back as unneeded before any pod came for them.
                raise TransientActuatorError(
                    pool_id,
                    f"the cluster is running incompatible operation {seen.cluster_operation} (one GKE started, e.g. an "
                    "upgrade): GKE refuses to move the autoscaler bounds of a move-bounds pool until it ends, so its "
                    "instance groups are not grown either; the scale-up is tried again on a later tick",
                )
            return self._grow(pool_id, seen, to_units, key, why)
        return self._shrink(pool_id, seen, to_units, key)

    def delete_nodes(self, pool_id: str, nodes: Sequence[str], key: str) -> ActionResult:
        """Remove exactly these nodes (GKE node name = instance name), shrinking the pool by as many. Nodes whose
        instances are already being deleted are not asked for again (a drain repeated after a restart), nor are
        nodes gone from every instance group of the pool: their instances were deleted already (a drain taken over
        after its deleteInstances landed; the Node object outlives its VM for a while). A node that is an instance
        of another node pool's group is refused: deleting it here would be a mistake."""
        if (known := self._results.get(key)) is not None:
            return known
        seen = self._observe(pool_id, changing=True)
        refuse_autoscaling(pool_id, self._mappings[pool_id], seen.autoscaling)
        by_name = {i.name: i for i in seen.instances}
        gone = [n for n in nodes if n not in by_name]
        if gone and (elsewhere := self._members_elsewhere(pool_id, gone)):
            held = ", ".join(f"{n} (node pool {p})" for n, p in elsewhere.items())
            raise PermanentActuatorError(pool_id, f"nodes {held} are instances of another node pool, not of this one")
        note = f"{', '.join(gone)} gone from its instance group (deleted already)" if gone else ""
        victims = [by_name[n] for n in nodes if n in by_name and not by_name[n].deleting]
        if not victims:
            leaving = [n for n in nodes if n in by_name]
            detail = "; ".join(
                ([f"nodes {', '.join(leaving)} are already being deleted"] if leaving else [])
                + ([note] if note else [])
            )
            moved = self._bounds.follow(pool_id, seen, seen.target, sent=_DELETING)
            detail = "; ".join(filter(None, [detail, moved]))
            status = ActionStatus.STARTED if leaving else ActionStatus.DONE
            log.info("pool %s: %s (key %s)", pool_id, detail, key)
            return self._results.remember(self._result(key, pool_id, status, detail))
        check_bounds_can_move(pool_id, seen, seen.target - len(victims))
        return self._delete(pool_id, victims, key, note, follow=seen)

    def removal_state(self, pool_id: str, unit: str) -> Literal["deleting", "gone", "kept"]:
        """What Compute does with the node ``unit`` (GKE node name = instance name), asked by a drain whose removal
        may have gone out and failed after it (``actuators.drain_endings.TellsRemovals``): "deleting" while its
        instance is being deleted (or abandoned) by its group, "gone" once it is in none of the pool's groups, "kept"
        while it is there and not being deleted (the deletion failed, or never reached it). One read of the pool; a
        failed read is transient."""
        seen = self._observe(pool_id, changing=True)
        found = next((i for i in seen.instances if i.name == unit), None)
        if found is None:
            return "gone"
        return "deleting" if found.deleting else "kept"

    def kept_units(self, pool_id: str, units: Sequence[str], draining: Sequence[str] = ()) -> str:
        """Asked before a drain starts (``actuators.drain_units.KeepsUnits``), with one read of the node pool: a pool
        with GKE autoscaling on under ``refuse`` is not touched, its drains included, so the drain is refused with
        the error ``resize`` and ``delete_nodes`` raise before anything is cordoned. "" otherwise: whether the nodes
        can go is checked when they are deleted."""
        if pool_id not in self._mappings:
            raise PermanentActuatorError(pool_id, "no GKE node pool is mapped to this pool")
        pool = self._read(pool_id, True, self._gke.get_node_pool, name=self._pool_path(pool_id))
        refuse_autoscaling(pool_id, self._mappings[pool_id], bool(pool.autoscaling and pool.autoscaling.enabled))
        return ""

    # -- internals -----------------------------------------------------------------------------------------
    def _grow(self, pool_id: str, seen: Observed, to_units: int, key: str, why: str) -> ActionResult:
        """Spread the new nodes over the zones not backed off, resizing each zone's group (a Compute call, which
        starts no GKE operation); a zone that refuses for capacity is backed off and its share goes to the others.
        Refused only when no node could be placed. Under ``move-bounds``, GKE's autoscaler bounds are then moved to
        what was placed, never to more: left above the pool, they would let GKE's autoscaler buy what was refused."""
        now = self._clock.now()
        targets = {z.name: z.target for z in seen.zones}
        migs = {z.name: z.mig for z in seen.zones}
        open_zones = [z for z in targets if self._zones_out.get((pool_id, z), now) <= now]
        refusals: list[str] = []
        quota = False  # a refusal read as a quota used up, which does not clear by itself
        while open_zones:
            want = spread(targets, open_zones, to_units - sum(targets.values()))
            refused = None
            for zone in (z for z in open_zones if want[z] != targets[z]):
                try:
                    self._resize_group(pool_id, migs[zone], want[zone])
                except CapacityUnavailable as exc:
                    self._back_off(pool_id, zone, now, str(exc))
                    refusals.append(f"zone {zone}: {exc}")
                    quota = quota or exc.quota
                    refused = zone
                    break
                targets[zone] = want[zone]
            if refused is None:
                break
            open_zones.remove(refused)
        total = sum(targets.values())
        per_zone = ", ".join(f"{z} {n}" for z, n in targets.items())
        # The autoscaler adds nodes only for pods that cannot be scheduled, never for its minimum: the groups are
        # resized, and its bounds follow what they were given.
        sent = f"its instance groups were resized to {per_zone}" if total > seen.target else ""
        sent = sent or ("the instances that could not be created are being deleted" if why else "")
        moved = self._bounds.follow(pool_id, seen, total, sent=sent)
        if total == seen.target:
            out_for = [pz for pz, reason in self._out_for.items() if pz[0] == pool_id and is_quota_message(reason)]
            quota = quota or any(self._zones_out[pz] > now for pz in out_for)
            raise CapacityUnavailable(pool_id, self._no_room(pool_id, seen, why, refusals, now), quota=quota)
        detail = f"target {total} nodes ({per_zone})" + _short(to_units, total)
        detail = "; ".join(filter(None, [detail, moved]))
        log.info("pool %s: %s (key %s)", pool_id, detail, key)
        return self._results.remember(self._result(key, pool_id, ActionStatus.STARTED, detail))

    def _changed(self, key: str, pool_id: str, seen: Observed, to_units: int, removed: str) -> ActionResult:
        """A drained pool asked for fewer nodes than it holds now: the plan was made on an older read (a failed
        instance came up since). Its nodes go only through their drains, so nothing else is removed."""
        detail = changed_since_plan(seen.target, to_units, "node", removed)
        log.warning("pool %s: %s (key %s)", pool_id, detail, key)
        return self._result(key, pool_id, ActionStatus.REJECTED, detail)

    def _no_room(self, pool_id: str, seen: Observed, why: str, refusals: Sequence[str], now: datetime) -> str:
        out = {z: t for (p, z), t in sorted(self._zones_out.items()) if p == pool_id and t > now}
        said = {z: self._out_for.get((pool_id, z), "") for z in out}
        quota = {z: r for z, r in said.items() if is_quota_message(r)}
        errors = {z: r for z, r in said.items() if r and not is_capacity_message(r)}
        reasons = [why] if why else []
        reasons += list(refusals)
        if stocked_out := [f"{z} until {t:%H:%M}Z" for z, t in out.items() if z not in quota and z not in errors]:
            reasons.append("zones out of capacity: " + ", ".join(stocked_out))
        if errors:
            zones = ", ".join(f"{z} until {out[z]:%H:%M}Z" for z in errors)
            reasons.append(f"zones out after units failed there for a reason of the zone: {zones} ({_first(errors)})")
        if quota:
            zones = ", ".join(f"{z} until {out[z]:%H:%M}Z" for z in quota)
            reasons.append(f"zones out for a quota used up: {zones} ({_first(quota)})")
        if seen.missing:
            reasons.append("zones whose instance group was not found: " + ", ".join(z for z, _ in seen.missing))
        return "; ".join(reasons) or "no zone can take a node"

    def _shrink(self, pool_id: str, seen: Observed, to_units: int, key: str) -> ActionResult:
        """Instances still being created go first, then the newest ready ones of the fullest zones."""
        pending = [i for i in seen.instances if not i.ready and not i.deleting and not i.failed_for]
        victims = pending[: seen.target - to_units]
        targets = {z.name: z.target - sum(1 for v in victims if v.mig == z.mig) for z in seen.zones}
        ready = {z.name: [i for i in z.instances if i.ready] for z in seen.zones}
        for zone in shrink_order(targets, {z: len(r) for z, r in ready.items()}, seen.target - to_units - len(victims)):
            victims.append(ready[zone].pop())
        return self._delete(pool_id, victims, key)

    def _resize_group(self, pool_id: str, mig: tuple[str, str, str], size: int) -> None:
        """One zone's instance group to ``size``. The Compute operation is done once the creates are scheduled;
        creates that fail later show on the instances' last attempt."""
        project, zone, name = mig
        where = {"project": project, "zone": zone, "instance_group_manager": name}
        # Checked before each zone's write: the earlier ones took their time too.
        op = call_google(
            pool_id, self._migs.resize_unary, **where, size=size, timeout=write_timeout(pool_id), retry=None
        )
        errors = op.error.errors if op.error else []
        if errors:
            write_refused()  # Compute's answer to this zone's resize: the error says for it
            raise from_operation_error(pool_id, 8, "; ".join(f"{e.code}: {e.message}" for e in errors))

    def _back_off(self, pool_id: str, zone: str, now: datetime, reason: str) -> None:
        until = now + self._zone_backoff
        self._zones_out[(pool_id, zone)] = until
        self._out_for[(pool_id, zone)] = reason  # said when a scale-up is refused for the zone still out
        what = "has no capacity" if is_capacity_message(reason) else "failed to create units for a reason of the zone"
        log.warning("pool %s: zone %s %s, left out of scale-ups until %s: %s", pool_id, zone, what, until, reason)

    def _drop_failed(self, pool_id: str, seen: Observed) -> None:
        """Delete the instances that could not be created, so the groups' target is what exists again, and back
        off the zones out of capacity, and those whose instances failed for an error confined to the zone while
        another zone takes their share (``_zones_for_errors``: a reservation of the zone used up), not those whose
        instances failed for a reason every zone meets (a region's subnet out of addresses). Under ``move-bounds``
        the caller moves GKE's autoscaler bounds, once it knows where the pool ends up."""
        now = self._clock.now()
        for zone, error in self._zones_for_errors(pool_id, seen).items():
            self._back_off(pool_id, zone, now, error)
        out = {z.name: f for z in seen.zones if (f := next((i.failure for i in z.failed if i.failure), ""))}
        for zone, failure in out.items():
            self._back_off(pool_id, zone, now, failure)
        # Compute's quotas are regional or global, never a zone's: every zone of the pool (all in its cluster's
        # region) meets the one its creates failed for, so none takes their share.
        if quota := next((f for f in out.values() if is_quota_message(f)), ""):
            for zone in (z.name for z in seen.zones if z.name not in out):
                self._back_off(pool_id, zone, now, quota)
        self._delete_instances(pool_id, seen.failed)
        log.warning(
            "pool %s: %d instances could not be created (%s); removed them (target %d -> %d)",
            pool_id,
            len(seen.failed),
            seen.failed_reason,
            seen.asked,
            seen.target,
        )

    def _delete(
        self, pool_id: str, victims: Sequence[Instance], key: str, note: str = "", follow: Observed | None = None
    ) -> ActionResult:
        """Delete ``victims``; with ``follow`` (the pool as read before), GKE's autoscaler bounds follow the pool."""
        self._delete_instances(pool_id, victims)
        moved = (
            "" if follow is None else self._bounds.follow(pool_id, follow, follow.target - len(victims), sent=_DELETING)
        )
        listed = ", ".join(i.name for i in victims)
        log.info("pool %s: deleting instances %s (key %s)", pool_id, listed, key)
        detail = "; ".join(filter(None, [f"deleting {len(victims)} nodes: {listed}", note, moved]))
        return self._results.remember(self._result(key, pool_id, ActionStatus.STARTED, detail))

    def _delete_instances(self, pool_id: str, victims: Sequence[Instance]) -> None:
        by_mig: dict[tuple[str, str, str], list[str]] = {}
        for inst in victims:
            by_mig.setdefault(inst.mig, []).append(inst.name)
        for (project, zone, mig), names in by_mig.items():
            urls = [f"projects/{project}/zones/{zone}/instances/{n}" for n in names]
            call_google(
                pool_id,
                self._migs.delete_instances_unary,
                project=project,
                zone=zone,
                instance_group_manager=mig,
                instance_group_managers_delete_instances_request_resource={"instances": urls},
                timeout=write_timeout(pool_id),
                retry=None,
            )

    def _track(self, pool_id: str, op: Any, key: str, what: str) -> ActionResult:
        op = self._checked(pool_id, op)
        status = ActionStatus.DONE if op.status.name == "DONE" else ActionStatus.STARTED
        log.info("pool %s: %s, operation %s %s (key %s)", pool_id, what, op.name, op.status.name, key)
        return self._results.remember(self._result(key, pool_id, status, f"{what} (operation {op.name})"))

    def _checked(self, pool_id: str, op: Any) -> Any:
        """The new operation, looked at once: errors GKE finds at once surface now, the rest on later ticks. GKE
        accepted the write that started it: a look that fails says the change may be carried out (``_for_change``).
        An operation read done with an error is GKE's answer to that write (409 aborted, 429 too many operations: the
        bounds unchanged): the write is no longer counted accepted, the error says for it (``write_refused``)."""
        name, sent = f"{self._location}/operations/{op.name}", f"operation {op.name} was started"
        op = self._read(pool_id, True, self._gke.get_operation, sent=sent, name=name)
        if op.status.name == "DONE" and op.error and op.error.message:
            write_refused()
            raise from_operation_error(pool_id, op.error.code, op.error.message)
        return op

    def _result(self, key: str, pool_id: str, status: ActionStatus, detail: str) -> ActionResult:
        return ActionResult(key, pool_id, status, self._clock.now(), detail=detail)


_DELETING = "its nodes are being deleted"  # what went out before GKE's autoscaler bounds follow a deletion


def _first(reasons: dict[str, str]) -> str:
    return next(iter(dict.fromkeys(reasons.values())))


def _short(wanted: int, placed: int) -> str:
    return f"; {wanted - placed} more found no zone with room" if placed < wanted else ""

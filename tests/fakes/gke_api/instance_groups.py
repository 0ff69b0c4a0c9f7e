"""The Compute Engine managed instance groups behind the fake GKE node pools: their REST calls (get,
listManagedInstances, resize, deleteInstances, each answered with a zonal operation), instances coming up as far as
their zone has room (a stockout's words on the ones that cannot), and groups lost under a node pool."""

from __future__ import annotations

import itertools
import threading

from tests.fakes.gke_api.resources import (
    _COMPUTE,
    _NOT_CREATED,
    STOCKOUT_MESSAGE,
    Instance,
    Mig,
    NodePool,
    Stockout,
    zone_stockout_message,
)
from tests.fakes.google_api import GoogleApiError, Obj


class InstanceGroups:
    """The groups of every node pool; ``FakeGkeApi`` holds the pools and the zones out of resources."""

    project: str
    pools: dict[str, NodePool]
    stockouts: dict[str, Stockout]  # by zone
    lost_groups: set[tuple[str, str]]  # (zone, name) of groups deleted under a node pool
    _ids: itertools.count[int]
    _lock: threading.RLock

    def set_instance_status(self, name: str, status: str) -> None:
        """Compute reports ``status`` as the ``instanceStatus`` of each instance of pool ``name`` still being created,
        e.g. RUNNING for one whose VM runs while the group's action is still CREATING and its last attempt keeps an
        earlier error, with the VM's id; "" leaves both out: no VM (REFERENCE.md)."""
        with self._lock:
            for inst in (i for m in self.pools[name].migs for i in m.instances if i.action in _NOT_CREATED):
                inst.status = status

    def lose_group(self, name: str, zone: str) -> None:
        """The instance group of pool ``name`` in ``zone`` is deleted, its instances with it, while the node pool
        still lists its URL in ``instanceGroupUrls``: reading the group answers 404 (terraform-provider-google issues
        4314 and 17024)."""
        with self._lock:
            mig = next(m for m in self.pools[name].migs if m.zone == zone)
            mig.instances, mig.target_size = [], 0
            self.lost_groups.add((zone, mig.name))

    def _create_instances(self, mig: Mig) -> list[Instance]:
        """Instances being created come up, as far as the zone has room; returns those that could not (only in a
        zone stocked out in mode "operation")."""
        out = self.stockouts.get(mig.zone)
        late = out if out is not None and out.mode == "operation" else None
        creating = [i for i in mig.instances if i.action == "CREATING"]
        for inst in creating:
            if late is None or late.room > 0:
                inst.action, inst.error = "NONE", ""
                if late is not None:
                    late.room -= 1
            elif "instances" in late.shown_on:
                inst.error = late.message or zone_stockout_message(mig.zone, self.project)
                inst.error_code = late.code
        return [i for i in creating if i.action == "CREATING"]

    def _igm_message(self, mig: Mig, stuck: list[Instance]) -> str:
        """GKE's words for a zone's group that could not create all its instances."""
        running = sum(1 for i in mig.instances if i.action == "NONE")
        return (
            f"Google Compute Engine: Not all instances running in IGM after 35m0s. Expected {mig.target_size}, "
            f"running {running}, transitioning {len(stuck)}. Current errors: "
            f"[ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS]: {self._instance_failure(mig, stuck[0])}"
        )

    def _instance_failure(self, mig: Mig, inst: Instance) -> str:
        return (
            f"Instance '{inst.name}' creation failed: The zone 'projects/{self.project}/zones/{mig.zone}' does not "
            "have enough resources available to fulfill the request. '(resource type:compute)'."
        )

    def _refuses(self, zone: str) -> bool:
        out = self.stockouts.get(zone)
        return out is not None and out.mode == "http"

    def _resize_mig(self, mig: Mig, want: int) -> None:
        """One zone's group to ``want`` instances; shrinking drops creating instances first, then the newest."""
        live = [i for i in mig.instances if i.action != "DELETING"]
        while len(live) < want:
            inst = Instance(f"{_base_instance_name(mig)}-{next(self._ids):04d}")
            mig.instances.append(inst)
            live.append(inst)
        surplus = len(live) - want
        for inst in sorted(live, key=lambda i: (i.action != "CREATING", -live.index(i)))[:surplus]:
            inst.action = "DELETING"
        mig.target_size = want

    def _compute(self, method: str, zone: str, name: str, verb: str, query: dict[str, str], body: Obj) -> Obj:
        mig = next((m for p in self.pools.values() for m in p.migs if m.name == name and m.zone == zone), None)
        if mig is None or (zone, name) in self.lost_groups:
            where = f"projects/{self.project}/zones/{zone}/instanceGroupManagers/{name}"
            raise GoogleApiError(404, f"The resource '{where}' was not found", reason="notFound")
        if method == "GET" and not verb:
            stable = all(i.action == "NONE" for i in mig.instances)
            group = {"name": mig.name, "zone": zone, "targetSize": mig.target_size, "status": {"isStable": stable}}
            return group | {"baseInstanceName": _base_instance_name(mig), "creationTimestamp": mig.created}
        if verb == "listManagedInstances":
            start, size = int(query.get("pageToken") or 0), int(query.get("maxResults") or 500)
            page = mig.instances[start : start + size]
            out: Obj = {"managedInstances": [self._instance_json(mig, i) for i in page]}
            if start + size < len(mig.instances):
                out["nextPageToken"] = str(start + size)
            return out
        if method == "POST" and verb == "resize":
            if "size" not in query:
                raise GoogleApiError(400, "Required field 'size' not specified")
            size = int(query["size"])
            if size < 0:
                raise GoogleApiError(
                    400, f"Invalid value for field 'size': '{size}'. Must be greater than or equal to 0."
                )
            if size > mig.target_size and self._refuses(zone):
                message = f"Instance group {name} cannot grow in zone {zone}: {STOCKOUT_MESSAGE}"
                raise GoogleApiError(503, message, reason="insufficientCapacity")
            self._resize_mig(mig, size)
            return self._zonal_operation("resize", zone, name)
        if verb == "deleteInstances":
            wanted = {u.rsplit("/", 1)[1] for u in body.get("instances", [])}
            found = [i for i in mig.instances if i.name in wanted and i.action != "DELETING"]
            if len(found) != len(wanted):
                raise GoogleApiError(
                    400, f"Some instances are not members of {name}: {sorted(wanted)}", reason="invalid"
                )
            for inst in found:
                inst.action = "DELETING"
            mig.target_size -= len(found)
            return self._zonal_operation("deleteInstances", zone, name)
        raise GoogleApiError(400, f"unsupported call {method} {verb} on an instance group manager")

    def _zonal_operation(self, kind: str, zone: str, mig: str) -> Obj:
        """A Compute zonal Operation: DONE once the group has scheduled the actions, not when they are carried out."""
        target = f"{_COMPUTE}/projects/{self.project}/zones/{zone}/instanceGroupManagers/{mig}"
        zone_url = f"{_COMPUTE}/projects/{self.project}/zones/{zone}"
        serial = next(self._ids)
        out: Obj = {"kind": "compute#operation", "name": f"operation-{serial}-{kind}", "operationType": kind}
        return out | {"status": "DONE", "progress": 100, "targetLink": target, "zone": zone_url}

    def _instance_json(self, mig: Mig, inst: Instance) -> Obj:
        out: Obj = {
            "instance": f"{_COMPUTE}/projects/{self.project}/zones/{mig.zone}/instances/{inst.name}",
            "name": inst.name,
            "currentAction": inst.action,
        }
        if inst.id:  # "empty when the instance does not exist"; a uint64, sent as a string
            out["id"] = inst.id
        if inst.instance_status:  # empty too without a VM, left out as proto3 JSON does
            out["instanceStatus"] = inst.instance_status
        if inst.error:
            out["lastAttempt"] = {"errors": {"errors": [{"code": inst.error_code, "message": inst.error}]}}
        return out


def _base_instance_name(mig: Mig) -> str:
    """The prefix of the names of a group's instances: GKE's group ``gke-C-NP-<hash>-grp`` names them
    ``gke-C-NP-<hash>-<suffix>`` (the fake's suffix is a serial number of four digits, Compute's four random
    characters)."""
    return mig.name.removesuffix("-grp")

"""The hosts of a GKE TPU slice, counted from the Compute Engine managed instance groups behind its node pool
(``SliceHostCounter``): how many run, how many the slice needs, what keeps the others from running, which are
missing, which instance groups hold a host still being created for the first time, and the Compute instance ids of the
hosts that exist (``ids``: an instance recreated is a new one, with a new id; one the zone has no room for has none;
one being recreated is named apart, ``short_slices.recreating``, since its old VM keeps its old id while it stops).

GKE reports a slice whose instance groups could not create every instance RUNNING_WITH_ERROR, and may leave one in
ERROR while its nodes run (``actuators.gke_tpu_slices``): only the instances say whether every host is there. An
instance group the node pool lists that Compute does not find (404: GKE may still list a group that is gone) holds
none of the slice's hosts: the slice is short of them, with a warning naming the group, instead of the whole group of
slices unread.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from actuators.node_pool_zones import instance_from
from actuators.short_slices import recreating
from actuators.vendor_errors import GOOGLE_ERRORS, capacity_failure, from_google, is_not_found
from models import PermanentActuatorError

_MIG_URL = re.compile(r"projects/([^/]+)/zones/([^/]+)/instanceGroupManagers/([^/]+)$")
Mig = tuple[str, str, str]  # (project, zone, instance group manager)


class HostCount(NamedTuple):
    """A slice's hosts as its instance groups tell them."""

    running: int
    expected: int
    failure: str  # why the others do not run: a stockout or quota, "" when nothing says so
    lacking: str  # which hosts are missing
    creating: list[Mig]  # the instance groups with a host being created for the first time
    groups: list[Mig]  # every instance group the node pool lists
    # the Compute instance ids of its hosts that exist (not being deleted), a host being recreated named apart
    # (``short_slices.recreating``: its VM, old or new, is never a host left)
    ids: frozenset[str] = frozenset()
    recreating: int = 0  # hosts its instance groups are recreating (RECREATING: a repair of a host that ran)


class SliceHostCounter:
    """``migs`` is a ``compute_v1.InstanceGroupManagersClient``; ``log_once(slice, what, message)`` warns once of
    each thing said of a slice (the slice actuator's own warnings)."""

    def __init__(self, migs: Any, log_once: Callable[[str, str, str], None]) -> None:
        self._migs = migs
        self._log_once = log_once

    def count(self, pool_id: str, node_pool: Any, message: str, hosts: int) -> HostCount:
        """The hosts of a slice, from the instances of its instance groups: those not running by name, then how many
        its instance groups do not hold at all. ``message`` is what GKE says of the node pool (a stockout it names
        applies to hosts being created for the first time); ``hosts`` how many the slice needs."""
        pool_failure = capacity_failure([("", message)])
        instances = []
        ids = set()  # of the instances that exist: "empty when the instance does not exist"
        gone = []
        groups = []
        for url in node_pool.instance_group_urls:
            found = _MIG_URL.search(url)
            if found is None:
                raise PermanentActuatorError(pool_id, f"unexpected instance group URL {url}")
            mig = (found[1], found[2], found[3])
            groups.append(mig)
            where = {"project": mig[0], "zone": mig[1], "instance_group_manager": mig[2]}
            try:
                for managed in self._migs.list_managed_instances(**where):
                    instances.append(instance_from(managed, mig, pool_failure))
                    if managed.id and not instances[-1].deleting:
                        recreated = managed.current_action == "RECREATING"  # its old VM maybe, still being deleted
                        ids.add(recreating(str(managed.id)) if recreated else str(managed.id))
            except GOOGLE_ERRORS as exc:
                if not is_not_found(exc):
                    raise from_google(pool_id, exc) from exc
                gone.append(f"instance group {mig[2]} of zone {mig[1]} not found (404)")
                what = "has an instance group that was not found (404), its hosts there counted as not running"
                self._log_once(str(node_pool.name), what, f"{mig[2]} of zone {mig[1]}")
        kept = [i for i in instances if not i.deleting]
        running = sum(1 for i in kept if i.ready)
        failure = next((i.failure for i in kept if i.failure), "")
        lacking = [i.name for i in kept if not i.ready]
        if len(kept) < hosts:
            lacking.append(
                f"{hosts - len(kept)} not in its instance groups" + (f" ({'; '.join(gone)})" if gone else "")
            )
        creating = sorted({i.mig for i in kept if i.first_creation})
        recreated = sum(1 for i in kept if i.recreating and not i.ready)
        return HostCount(
            running, max(hosts, len(kept)), failure, ", ".join(lacking), creating, groups, frozenset(ids), recreated
        )

    def groups(self, pool_id: str, migs: Sequence[Mig]) -> list[Any]:
        """The instance groups (project, zone, name) that Compute finds (one gone since it was listed is left out)."""
        found = []
        for project, zone, name in migs:
            try:
                found.append(self._migs.get(project=project, zone=zone, instance_group_manager=name))
            except GOOGLE_ERRORS as exc:
                if not is_not_found(exc):
                    raise from_google(pool_id, exc) from exc
        return found

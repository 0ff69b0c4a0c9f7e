"""GkeNodePoolReads: what ``GkeNodePoolActuator`` reads of its GKE node pools, and the state it keeps of them.

A pool is read from GKE (the node pool: its autoscaling and instance group URLs; the location's operations, for the one
still running on the pool and the stockout its latest one ended with) and from Compute Engine (each zone's managed
instance group and its instances), into ``Observed`` (``actuators.node_pool_zones``). ``list_pools`` reads each pool
with its own calls and leaves out a pool whose read fails (``unread_pools``), and gives each failed unit's cause as the
provider told it (``failed_messages``, quotas first, then stockouts; a quota read as one: ``failed_for_quota``; per
zone, whether one failed for capacity or for an error confined to the zone: ``ZoneState.failed_for_capacity``,
``failed_in_zone``); a zone whose group is not found (404) is left out of the pool, not counted. A read made for a
change fails the change with a transient error (``_read``). Also kept here: the zones backed off after a stockout, a
quota or an error confined to the zone (``_zones_out``, why in ``_out_for``, shown on each ``ZoneState``; which zones an
error backs off: ``_zones_for_errors``) and the lookup of a node another node pool's group holds
(``_members_elsewhere``). The actuator is a ``GkeNodePoolReads`` that also writes; no write is made here.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from actuators.node_pool_zones import Observed, Zone, instance_from
from actuators.pool_reads import PoolReads
from actuators.vendor_errors import (
    GOOGLE_ERRORS,
    call_google,
    capacity_failure,
    from_google,
    is_not_found,
    is_quota_message,
)
from config.cloud import NodePoolMapping
from models import ActuatorError, PermanentActuatorError, PoolState, TransientActuatorError, ZoneState
from models.clock import Clock

log = logging.getLogger("actuators.gke_node_pool")  # the actuator's logger: its reads log as they did

_MIG_URL = re.compile(r"projects/([^/]+)/zones/([^/]+)/instanceGroupManagers/([^/]+)$")


class GkeNodePoolReads:
    """The read side of ``GkeNodePoolActuator``: ``gke`` is a ``container_v1.ClusterManagerClient``; ``migs`` an
    ``compute_v1.InstanceGroupManagersClient``; ``zone_backoff``: how long a zone out of capacity is left out."""

    def __init__(
        self,
        gke: Any,
        migs: Any,
        cluster_path: str,
        mappings: Sequence[NodePoolMapping],
        clock: Clock,
        zone_backoff: timedelta,
    ) -> None:
        self._gke = gke
        self._migs = migs
        self._cluster = cluster_path
        self._location = cluster_path.rsplit("/clusters/", 1)[0]
        self._mappings = {m.pool: m for m in mappings}
        self._clock = clock
        self._zone_backoff = zone_backoff
        self._zones_out: dict[tuple[str, str], datetime] = {}  # (pool, zone) -> left out of scale-ups until
        self._out_for: dict[tuple[str, str], str] = {}  # (pool, zone) -> why it is left out (a stockout, a quota, ...)
        self._reads = PoolReads()

    def list_pools(self) -> Sequence[PoolState]:
        """Each pool read with its own calls: a pool whose read fails is left out (``unread_pools``)."""
        now = self._clock.now()
        return self._reads.each(self._mappings, lambda pool_id: self._state(pool_id, now))

    def unread_pools(self) -> Mapping[str, ActuatorError]:
        return self._reads.unread

    # -- internals -----------------------------------------------------------------------------------------
    def _state(self, pool_id: str, now: datetime) -> PoolState:
        seen = self._observe(pool_id)
        # Each failed unit's cause as Compute or GKE told it; capacity where it names a stockout or a quota. Quoted
        # in this order: a quota used up (what the operator must have raised), a stockout, then a unit's own reason.
        failures = tuple(i.failure for i in seen.failed if i.failure)
        quoted = sorted(seen.failed, key=lambda i: 0 if is_quota_message(i.failure) else 1 if i.failure else 2)
        in_zone = self._zones_for_errors(pool_id, seen)
        return PoolState(
            pool_id,
            now,
            seen.ready,
            seen.target,
            in_flight_operation=seen.operation,
            failed_units=len(seen.failed),
            failed_messages=tuple(i.failed_for for i in quoted),
            failed_for_capacity=bool(failures),
            failed_for_quota=any(is_quota_message(f) for f in failures),
            zones=tuple(self._zone_state(pool_id, z, z.name in in_zone) for z in seen.zones),
            missing_zones=tuple((zone, _not_found(group)) for zone, group in seen.missing),
            recreating_units=seen.recreating,
        )

    def _observe(self, pool_id: str, changing: bool = False) -> Observed:
        """The pool as its APIs tell it now. A zone whose instance group is not found (404: GKE may still list a
        group that is gone) is left out with a warning, its nodes not counted, instead of failing the whole read;
        ``changing``: read for a change (see ``_read``)."""
        if pool_id not in self._mappings:
            raise PermanentActuatorError(pool_id, "no GKE node pool is mapped to this pool")
        pool = self._read(pool_id, changing, self._gke.get_node_pool, name=self._pool_path(pool_id))
        operation, failure, upgrading = self._operations(pool_id, changing)
        zones: list[Zone] = []
        missing: list[tuple[str, str]] = []
        for mig in (_mig(pool_id, url) for url in pool.instance_group_urls):
            if (group := self._group(pool_id, changing, mig)) is None:
                missing.append((mig[1], mig[2]))
                continue
            asked = int(group[0].target_size)
            zones.append(Zone(mig, asked, tuple(instance_from(managed, mig, failure) for managed in group[1])))
        if missing and not zones:
            error = PermanentActuatorError(pool_id, f"none of the instance groups of node pool {pool.name} was found")
            raise self._for_change(error) if changing else error
        autoscaling = bool(pool.autoscaling and pool.autoscaling.enabled)
        bounds = (
            (pool.autoscaling.total_min_node_count, pool.autoscaling.total_max_node_count) if autoscaling else (0, 0)
        )
        return Observed(autoscaling, tuple(zones), operation, tuple(missing), bounds, cluster_operation=upgrading)

    def _group(self, pool_id: str, changing: bool, mig: tuple[str, str, str]) -> tuple[Any, list[Any]] | None:
        """One zone's instance group and its instances, or None if the group is not found (404)."""
        try:
            return self._migs.get(**_where(mig)), list(self._migs.list_managed_instances(**_where(mig)))
        except GOOGLE_ERRORS as exc:
            if not is_not_found(exc):
                error = from_google(pool_id, exc)
                raise (self._for_change(error) if changing else error) from exc
        log.warning(
            "pool %s: the instance group %s of zone %s was not found (404); the zone is left out, its nodes not "
            "counted, until the node pool no longer lists it or the group is back",
            pool_id, mig[2], mig[1],
        )  # fmt: skip
        return None

    def _read(self, pool_id: str, changing: bool, method: Any, sent: str = "", **kwargs: Any) -> Any:
        """A read's answer. A read made for a change (``resize``, ``delete_nodes``, the look at the operation it
        started) that fails for good fails the change with a transient error: a read blocks nothing (a pool that
        cannot be read is held), so it must not block the pool from inside a change either. ``sent``: what the
        change sent before this read, in words (see ``_for_change``)."""
        try:
            return call_google(pool_id, method, **kwargs)
        except ActuatorError as exc:
            if not changing:
                raise
            raise self._for_change(exc, sent) from exc

    @staticmethod
    def _for_change(exc: ActuatorError, sent: str = "") -> ActuatorError:
        """A read's error as the error of the change it was made for: a permanent one is transient there. A read made
        once a write of the change was accepted (``sent``, what went out, in words: "operation X started") fails
        whatever it met (a rate limit, a token not had, 403, 404) with a transient error that says the change may be
        carried out (``maybe_applied``): the cloud has it, and nothing read since says it refused it."""
        if sent:
            return TransientActuatorError(
                exc.pool_id, f"{sent}, but it could not be read afterwards: {exc.reason}", maybe_applied=True
            )
        if not isinstance(exc, PermanentActuatorError):
            return exc
        return TransientActuatorError(
            exc.pool_id, f"the pool could not be read for the change, nothing sent: {exc.reason}"
        )

    def _operations(self, pool_id: str, changing: bool = False) -> tuple[str | None, str, str | None]:
        """The operation still running on the pool, if any, the stockout its latest operation ended with ("" if it
        ended without one, none ended, or it ended more than ``zone_backoff`` ago), and the operation still running on
        the cluster itself, if any (an upgrade GKE started: ``targetLink`` ``.../clusters/C``; it holds the scale-ups
        of ``move-bounds`` pools only). Another node pool's operations (``.../clusters/C/nodePools/NP``, e.g. a TPU
        slice's ``CREATE_NODE_POOL``, as GKE names it: cluster-autoscaler's GCE client tests quote one) are neither.

        The list covers every cluster of the location, so an operation is the pool's only when its ``targetLink``
        (``https://container.googleapis.com/v1/projects/P/locations/L/clusters/C/nodePools/NP``) names this
        cluster too. A failure is not remembered for ever: the instances being created long after it were asked
        for by a later resize of an instance group (which starts no GKE operation), not by that operation."""
        suffix = f"/clusters/{self._cluster.rsplit('/', 1)[1]}/nodePools/{self._mappings[pool_id].node_pool}"
        listed = self._read(pool_id, changing, self._gke.list_operations, parent=self._location)
        ops = [op for op in listed.operations if op.target_link.endswith(suffix)]
        running = next((str(op.name) for op in ops if op.status.name != "DONE"), None)
        cluster = f"/clusters/{self._cluster.rsplit('/', 1)[1]}"
        on_cluster = (op for op in listed.operations if op.target_link.endswith(cluster) and op.status.name != "DONE")
        upgrading = next((str(op.name) for op in on_cluster), None)
        latest = max(ops, key=lambda op: str(op.start_time), default=None)
        if running is not None or latest is None or not latest.error or not latest.error.message:
            return running, "", upgrading
        ended = _timestamp(str(latest.end_time))
        if ended is not None and self._clock.now() - ended >= self._zone_backoff:
            return None, "", upgrading
        return None, capacity_failure([("", str(latest.error.message))]), upgrading

    def _zone_state(self, pool_id: str, zone: Zone, in_zone: bool) -> ZoneState:
        until = self._zones_out.get((pool_id, zone.name))
        until = until if until is not None and until > self._clock.now() else None
        capacity = any(i.failure for i in zone.failed)  # what _drop_failed backs the zone off for, with ``in_zone``
        failed = len(zone.failed)
        return ZoneState(zone.name, zone.ready, zone.target, failed, until, capacity, failed_in_zone=in_zone)

    def _zones_for_errors(self, pool_id: str, seen: Observed) -> dict[str, str]:
        """The zones to back off for units failed there for an error confined to the zone (``Observed.zonal_errors``:
        a reservation of the zone used up), each with the error; none unless another zone of the pool, with no unit
        failed and not backed off, takes their share. An error met in every zone is the pool's: its units are removed
        and asked for again, and the pool backs off once they have kept failing for its lead time."""
        now = self._clock.now()
        spare = any(not z.failed and self._zones_out.get((pool_id, z.name), now) <= now for z in seen.zones)
        return seen.zonal_errors() if spare else {}

    def _members_elsewhere(self, pool_id: str, names: Sequence[str]) -> dict[str, str]:
        """Which of ``names`` (in none of this pool's groups) are instances of another node pool of the cluster, and
        of which. A group's instances are named ``<baseInstanceName>-<suffix>`` (Compute's ``baseInstanceName``), so
        only the groups whose base name starts a node's name are listed, as cluster-autoscaler finds the group of an
        instance it does not know (``findMigWithMatchingBasename``)."""
        mine = self._mappings[pool_id].node_pool
        found: dict[str, str] = {}
        listed = self._read(pool_id, True, self._gke.list_node_pools, parent=self._cluster)
        for other in (p for p in listed.node_pools if p.name != mine):
            for mig in (_mig(pool_id, url) for url in other.instance_group_urls):
                try:
                    base = self._migs.get(**_where(mig)).base_instance_name
                    if not any(n.startswith(f"{base}-") for n in names if n not in found):
                        continue
                    managed = list(self._migs.list_managed_instances(**_where(mig)))
                except GOOGLE_ERRORS as exc:
                    if is_not_found(exc):
                        continue  # a group gone has no instances
                    raise self._for_change(from_google(pool_id, exc)) from exc
                members = {instance_from(m, mig, "").name for m in managed}
                found |= {n: str(other.name) for n in names if n in members}
        return found

    def _pool_path(self, pool_id: str) -> str:
        return f"{self._cluster}/nodePools/{self._mappings[pool_id].node_pool}"


def _mig(pool_id: str, url: str) -> tuple[str, str, str]:
    """Project, zone and name of the instance group an ``instanceGroupUrls`` entry names."""
    found = _MIG_URL.search(url)
    if found is None:
        raise PermanentActuatorError(pool_id, f"unexpected instance group URL {url}")
    return found[1], found[2], found[3]


def _where(mig: tuple[str, str, str]) -> dict[str, str]:
    return {"project": mig[0], "zone": mig[1], "instance_group_manager": mig[2]}


def _not_found(group: str) -> str:
    """What is wrong with a zone whose instance group the node pool lists and Compute does not find."""
    return (
        f"instance group {group} was not found (404): the zone is left out, its nodes not counted and none added "
        "there, until the node pool no longer lists it or the group is back"
    )


def _timestamp(text: str) -> datetime | None:
    """An operation's RFC 3339 time (GKE writes nanoseconds, which ``fromisoformat`` truncates); None if unset."""
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None

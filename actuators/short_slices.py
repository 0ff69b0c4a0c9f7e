"""TPU slices short of hosts for want of capacity: how long a slice group waits for a slice's missing hosts
(``short_waits``) and since when each slice has been seen short (``ShortSlices``).

A slice GKE reports RUNNING_WITH_ERROR with hosts missing is in flight: paid for (its hosts that run are billed),
serving nothing (a multi-host job needs every host), its instance groups retrying the hosts a stockout or an
exhausted quota kept them from creating. Waited for without end, it stays so for as long as the zone stays out: it is
in the group's target, so no scale-up is sent and no stockout refuses one, the group is never backed off and its
demand never goes to the next eligible pool. So a slice waits for its hosts as a queued resource waits for resources
(``actuators.cloud_tpu.queued_resource_waits``): its pool's lead time times ``alerts.stalled_after_lead_times``, from
the first read that found it short, or, for a slice that was never whole, from when its hosts were first asked for
(``first_asked``: the creation time Compute keeps of its instance groups, so a restart does not start the wait
again). Still short then, with a stockout or quota named, it is failed for want of capacity
("insufficient capacity: ..."): the next resize deletes it and refuses a scale-up of the group with
CapacityUnavailable, and the agent backs the group off and asks the next eligible pool. One whose missing hosts
nothing names a stockout or quota of (hosts being recreated by a repair) is waited for. A slice seen with all its hosts
is forgotten, its wait starting again if it falls short later.

Nothing in the cloud tells when a slice that was whole fell short (its hosts recreated by a repair the zone has no room
for: ``actuators.gke_tpu_slices``), so the first reads are handed out (``known``: per group, slice -> since, a read
that found it short since, ``seen``, and the Compute instance ids of its hosts that existed then, ``hosts``) for the
agent to keep with its planner memory, and taken back (``recall``) once, from the memory a restarted agent or a new
leader reads first: its wait goes on from its predecessor's first read instead of starting again, but only where the
slice's hosts prove it is the same shortfall (``same_shortfall``). A time alone cannot: a slice recovered and short
again while no agent watched it, even for a few minutes (a rollout), would inherit the first episode's time and be
deleted early in its new wait; a slice deleted and created again under the same name would inherit the old one's. A
multi-host slice is recovered whole, every instance recreated with a new id, and a host the zone has no room for has
no instance, so the record's time is kept when the hosts the slice has at this adapter's next read of its group are
some of those it had when last seen short, none created since, however long no agent watched (an agent down longer
than a watch, or crash-looping, keeps the wait), and dropped otherwise, the slice's wait starting again, never
shortened. A record is taken back for its earlier times only (a read of this adapter's own, earlier, stays) and not for
a slice this adapter's own reads found not short since their first (seen whole since, or new; its own record handed back
after it led before included). What it says of a slice not short at the next read of its group is forgotten with it. The
wait of a slice never whole counts from its instance groups' creation (``asked``), whatever a record says. ``seen`` is
refreshed once it is older than a quarter of the group's wait (not at every read: a steady shortage does not rewrite the
state ConfigMap at every tick) for the release before, which reads it. Without a record, or with one naming no host
(a memory of an earlier release), the wait starts at this adapter's first read that finds the slice short, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from actuators.vendor_errors import is_capacity_message
from config.schema import Settings
from models.durations import format_duration

log = logging.getLogger(__name__)
SHORT_WAIT = timedelta(hours=1)  # for an actuator built without waits (the daemon always passes them)


def short_waits(settings: Settings) -> dict[str, timedelta]:
    """How long a slice of each group may be short of hosts for want of capacity before it is failed: its pool's lead
    time times ``alerts.stalled_after_lead_times``, what the stalled-scale-up alert already calls stuck (as
    ``queued_resource_waits`` gives a queued resource)."""
    if settings.cloud is None:
        return {}
    lead = {p.pool_id: p.lead_time for p in settings.pool_specs()}
    factor = settings.alerts.stalled_after_lead_times
    return {m.pool: lead[m.pool] * factor for m in settings.cloud.tpu_slice_groups if m.pool in lead}


class ShortSince(NamedTuple):
    """Of a slice short of hosts: the first read that found it short (``since``), a read that found it short since,
    refreshed once older than a quarter of its group's wait (``seen``), and the Compute instance ids of its hosts
    that existed at the latest read that found it short (``hosts``: empty in a record of a release before)."""

    since: datetime
    seen: datetime
    hosts: frozenset[str] = frozenset()


Record = Mapping[str, Mapping[str, tuple[datetime, datetime, frozenset[str]]]]


class ShortSlices:
    """Since when each slice has been seen short of hosts. ``waits``: ``short_waits``; ``SHORT_WAIT`` for a group it
    leaves out. ``pools``: the groups a record taken back may speak of (None: any)."""

    def __init__(self, waits: Mapping[str, timedelta] | None = None, pools: Iterable[str] | None = None) -> None:
        self._waits = dict(waits or {})
        self._pools = None if pools is None else frozenset(pools)
        self._since: dict[tuple[str, str], ShortSince] = {}  # (pool, slice) -> first read short, seen since, hosts
        self._first_read: dict[str, datetime] = {}  # pool -> this adapter's first read of the group
        # (pool, slice) -> an entry read back, until the next read of its group finds whether the slice's hosts make
        # it the same shortfall
        self._recalled: dict[tuple[str, str], ShortSince] = {}

    def known(self) -> dict[str, dict[str, tuple[datetime, datetime, frozenset[str]]]]:
        """Since when each slice has been seen short, per group (pool -> slice -> since, seen, hosts): the slices short
        at the latest read of each group, and those taken back that no read of their group has checked yet (a read
        that failed does not drop them from the memory saved)."""
        record: dict[str, dict[str, tuple[datetime, datetime, frozenset[str]]]] = {}
        for (pool, name), short in sorted({**self._recalled, **self._since}.items()):  # taken back, not yet checked
            record.setdefault(pool, {})[name] = short
        return record

    def recall(self, record: Record) -> None:
        """Take back a record ``known`` gave (to this adapter or another, before a restart or a change of leader),
        once, at the first tick that reads the memory. An entry is left out, its slice's wait starting again, when
        this adapter's own reads have found the slice not short since their first (a slice whole again or new) or
        when it names no host of the slice (a release that did not keep them); any other is checked at the next read
        of its group (``given_up``): the slice's wait counts from the earlier time only while the hosts it has then
        show it is still the same shortfall."""
        for pool, slices in record.items():
            if self._pools is not None and pool not in self._pools:
                continue  # a group this adapter does not read: it would never be forgotten
            first = self._first_read.get(pool)
            for name, (since, seen, hosts) in slices.items():
                own = self._since.get((pool, name))
                if first is not None and (own is None or own.since > first):
                    continue  # read not short by this adapter since: the record's time is of an episode before
                if not hosts:
                    log.info(
                        "pool %s: slice %s was short of hosts since %s in the planner memory, which names none of its "
                        "hosts (saved by an earlier release): its wait starts again",
                        pool,
                        name,
                        since.isoformat(),
                    )
                    continue
                self._recalled[(pool, name)] = ShortSince(since, seen, frozenset(hosts))

    def _refresh(self, pool_id: str) -> timedelta:
        """How old ``seen`` may grow before a read that finds the slice short refreshes it."""
        return self._waits.get(pool_id, SHORT_WAIT) / 4

    def given_up(
        self,
        pool_id: str,
        short: Mapping[str, str],
        now: datetime,
        asked: Mapping[str, datetime] | None = None,
        hosts: Mapping[str, frozenset[str]] | None = None,
    ) -> dict[str, str]:
        """Of a group's slices short of hosts in this read (name -> what is said of its hosts), those short for the
        group's wait or longer with a stockout or quota named, each with the message it is failed with. ``asked``:
        when the hosts of a slice that was never whole were first asked for (``first_asked``); its wait counts from
        then. ``hosts``: the Compute instance ids of each short slice's hosts that exist (``HostCount.ids``); an entry
        read back keeps its time only where they prove the same shortfall (``same_shortfall``). The group's other
        slices are forgotten."""
        self._since = {k: t for k, t in self._since.items() if k[0] != pool_id or k[1] in short}
        recalled = {k[1]: t for k, t in self._recalled.items() if k[0] == pool_id}
        self._recalled = {k: t for k, t in self._recalled.items() if k[0] != pool_id}
        self._first_read.setdefault(pool_id, now)
        wait, refresh = self._waits.get(pool_id, SHORT_WAIT), self._refresh(pool_id)
        out = {}
        for name, said in short.items():
            now_hosts = frozenset((hosts or {}).get(name, ()))
            own = self._since.get((pool_id, name))
            known = own or ShortSince(now, now)
            if (old := recalled.get(name)) is not None and old.since < known.since:
                if same_shortfall(old.hosts, now_hosts):
                    known = ShortSince(old.since, old.seen if own is None else max(old.seen, own.seen))
                else:
                    log.info(
                        "pool %s: slice %s was short of hosts since %s in the planner memory, but its hosts are not "
                        "the ones it had then (it was recovered or created again since): its wait starts again",
                        pool_id,
                        name,
                        old.since.isoformat(),
                    )
            if asked and name in asked:  # never whole: its instance groups' creation, not a record of an older slice
                known = known._replace(since=asked[name])
            if now - known.seen > refresh:
                known = known._replace(seen=now)
            self._since[(pool_id, name)] = known._replace(hosts=now_hosts)
            if now - known.since >= wait and is_capacity_message(said):
                waited = f"short of hosts for {format_duration(now - known.since)}"
                out[name] = f"insufficient capacity: {waited} (the group waits {format_duration(wait)}): {said}"
        return out


def same_shortfall(before: frozenset[str], now: frozenset[str]) -> bool:
    """Whether a slice whose hosts were ``before`` (Compute instance ids) when last seen short, and are ``now``, has
    been short since without a recovery: some host of then still there, and none created since. A multi-host slice is
    recovered whole (every instance recreated, each with a new id), and a host the zone has no room for has no
    instance (no id), so a slice recovered whole and short again, or deleted and created again under the same name,
    has no host of then; one whose missing host came up (a new id) may have been whole. Nothing else proves it: a
    slice with no host left tells nothing."""
    return bool(now) and now <= before


def first_asked(pool_id: str, groups: Iterable[Any]) -> datetime | None:
    """When the hosts of a slice that was never whole were first asked for: the earliest ``creationTimestamp`` of its
    instance groups (``compute_v1.InstanceGroupManager``) with a host still being created for the first time. GKE
    creates a node pool's instance groups with it and a slice is never resized, so a host CREATING has never run
    since then. None when no group tells a valid time, for the wait to count from the first read that found it
    short."""
    times = []
    for group in groups:
        try:
            created = datetime.fromisoformat(str(group.creation_timestamp))
        except ValueError:
            created = None
        if created is None or created.tzinfo is None:
            log.warning("pool %s: instance group %s has no valid creationTimestamp", pool_id, group.name)
            continue
        times.append(created)
    return min(times, default=None)

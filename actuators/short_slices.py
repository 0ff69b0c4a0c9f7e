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
for: ``actuators.gke_tpu_slices``), so the first reads are handed out (``known``: per group, slice -> since, and a read
that found it short since, ``seen``) for the agent to keep with its planner memory, and taken back (``recall``) once,
from the memory a restarted agent or a new leader reads first: its wait goes on from its predecessor's first read
instead of starting again. A record only holds while the slice was watched without a break: a slice repaired and short
again while no agent watched it (a gap between two agents, or saves refused meanwhile) would inherit the first episode's
time and be deleted a minute into its new wait. So ``seen`` is refreshed once it is older than a quarter of the group's
wait (not at every read: a steady shortage does not rewrite the state ConfigMap at every tick), and an entry whose
``seen`` is older, at this adapter's first read of its group, than an unbroken watch allows (``gap``: the lease duration
and the ticks around it, which the caller passes; plus that quarter) is left out: that slice's wait starts again, never
shortened. A record is taken back for its earlier times only (a read of this adapter's own, earlier, stays) and not for
a slice this adapter's own reads found not short since their first (seen whole since, or new; its own record handed back
after it led before included). What it says of a slice not short at the next read of its group is forgotten with it. The
wait of a slice never whole counts from its instance groups' creation (``asked``), whatever a record says, and a time
read back from before the creation of a slice that was whole (``created``, read once per slice taken back:
``inherited``) is dropped: a slice deleted and created again under the same name does not inherit the old one's wait.
Without a record (a memory of an earlier release) the wait starts at this adapter's first read that finds the slice
short, as before.
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
    """Of a slice short of hosts: the first read that found it short (``since``) and a read that found it short
    since, refreshed once older than a quarter of its group's wait (``seen``)."""

    since: datetime
    seen: datetime


class ShortSlices:
    """Since when each slice has been seen short of hosts. ``waits``: ``short_waits``; ``SHORT_WAIT`` for a group it
    leaves out. ``pools``: the groups a record taken back may speak of (None: any)."""

    def __init__(self, waits: Mapping[str, timedelta] | None = None, pools: Iterable[str] | None = None) -> None:
        self._waits = dict(waits or {})
        self._pools = None if pools is None else frozenset(pools)
        self._since: dict[tuple[str, str], ShortSince] = {}  # (pool, slice) -> first read short, and seen since
        self._first_read: dict[str, datetime] = {}  # pool -> this adapter's first read of the group
        # (pool, slice) -> this adapter's own entry before a record read back gave it an earlier time, until the
        # slice's creation is checked against it
        self._inherited: dict[tuple[str, str], ShortSince | None] = {}

    def known(self) -> dict[str, dict[str, tuple[datetime, datetime]]]:
        """Since when each slice has been seen short, per group (pool -> slice -> since, seen): the slices short at
        the latest read of each group."""
        record: dict[str, dict[str, tuple[datetime, datetime]]] = {}
        for (pool, name), short in sorted(self._since.items()):
            record.setdefault(pool, {})[name] = short
        return record

    def recall(
        self, record: Mapping[str, Mapping[str, tuple[datetime, datetime]]], now: datetime, gap: timedelta
    ) -> None:
        """Take back a record ``known`` gave (to this adapter or another, before a restart or a change of leader),
        once, at the first tick that reads the memory (``now``): a slice's wait counts from the earlier of its time
        there and this adapter's own first read, when the two make an unbroken watch. ``gap``: the longest an unbroken
        watch leaves between the last read of one leader and the first of the next (the lease duration and the ticks
        around it). An entry is left out, its slice's wait starting again, when it was last seen short longer before
        this adapter's first read of the group (``now`` if none yet) than ``gap`` and the refresh of ``seen`` allow,
        or when this adapter's own reads have found the slice not short since (a slice whole again or new): its time
        may be another episode's."""
        for pool, slices in record.items():
            if self._pools is not None and pool not in self._pools:
                continue  # a group this adapter does not read: it would never be forgotten
            first = self._first_read.get(pool)
            oldest = (now if first is None else first) - gap - self._refresh(pool)
            for name, (since, seen) in slices.items():
                short, key = ShortSince(since, seen), (pool, name)
                own = self._since.get(key)
                if first is not None and (own is None or own.since > first):
                    continue  # read not short by this adapter since: the record's time is of an episode before
                if short.seen < oldest:
                    log.info(
                        "pool %s: slice %s was last seen short of hosts at %s in the planner memory, longer before "
                        "this agent's first read than an unbroken watch allows (it may have been whole since): its "
                        "wait starts again",
                        pool,
                        name,
                        short.seen.isoformat(),
                    )
                    continue
                if own is None or short.since < own.since:
                    self._inherited[key] = own
                mine = own or short
                self._since[key] = ShortSince(min(short.since, mine.since), max(short.seen, mine.seen))

    def inherited(self, pool_id: str, name: str) -> bool:
        """Whether the slice's time comes from a record read back and is not yet checked against its creation."""
        return (pool_id, name) in self._inherited

    def _refresh(self, pool_id: str) -> timedelta:
        """How old ``seen`` may grow before a read that finds the slice short refreshes it."""
        return self._waits.get(pool_id, SHORT_WAIT) / 4

    def given_up(
        self,
        pool_id: str,
        short: Mapping[str, str],
        now: datetime,
        asked: Mapping[str, datetime] | None = None,
        created: Mapping[str, datetime] | None = None,
    ) -> dict[str, str]:
        """Of a group's slices short of hosts in this read (name -> what is said of its hosts), those short for the
        group's wait or longer with a stockout or quota named, each with the message it is failed with. ``asked``:
        when the hosts of a slice that was never whole were first asked for (``first_asked``); its wait counts from
        then. ``created``: when a slice whose time a record read back gave (``inherited``) was created (its instance
        groups'); a time before it is another slice's, dropped. The group's other slices are forgotten."""
        self._since = {k: t for k, t in self._since.items() if k[0] != pool_id or k[1] in short}
        self._inherited = {k: t for k, t in self._inherited.items() if k[0] != pool_id or k[1] in short}
        self._first_read.setdefault(pool_id, now)
        wait, refresh = self._waits.get(pool_id, SHORT_WAIT), self._refresh(pool_id)
        out = {}
        for name, hosts in short.items():
            known = self._since.get((pool_id, name), ShortSince(now, now))
            own = self._inherited.pop((pool_id, name), known)
            if created and name in created and known.since < created[name]:  # a record of the slice before it
                known = own or ShortSince(now, now)
            if asked and name in asked:  # never whole: its instance groups' creation, not a record of an older slice
                known = known._replace(since=asked[name])
            if now - known.seen > refresh:
                known = known._replace(seen=now)
            self._since[(pool_id, name)] = known
            if now - known.since >= wait and is_capacity_message(hosts):
                waited = f"short of hosts for {format_duration(now - known.since)}"
                out[name] = f"insufficient capacity: {waited} (the group waits {format_duration(wait)}): {hosts}"
        return out


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

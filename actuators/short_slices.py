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
that found it short since, ``seen``, and ``hosts``, below) for the agent to keep with its planner memory, and taken back
(``recall``) once, from the memory a restarted agent or a new leader reads first: its wait goes on from its
predecessor's first read instead of starting again. A record must never shorten a wait (a slice deleted early is lost
in a stockout), so it is taken back only where two checks find nothing of another episode:
- an unbroken watch: an entry whose ``seen`` is older, at this adapter's first read of its group, than the lease
  duration and the ticks around it (``gap``, which the caller passes) and a quarter of the group's wait allow is left
  out, its slice's wait starting again. ``seen`` is refreshed once it is older than that quarter (not at every read: a
  steady shortage does not rewrite the state ConfigMap at every tick). So an agent down longer than that, at every
  restart too, starts the wait again: the slice is kept longer, never lost.
- the hosts: ``hosts`` is the Compute instance ids of the hosts the slice had when first seen short that every read
  since still found (never one that came up since: a recovery's new VMs, booting when the agent stopped, may make the
  slice whole before it falls short again). A multi-host slice is recovered whole, each host recreated with a new id,
  and a host the zone has no room for has no instance, so the entry is taken back only if the slice's hosts at this
  adapter's next read of its group, and at its own first read that found the slice short, are some of those, none
  new, with at least one left where the entry names any (``same_shortfall``; a slice that never had one is so). A
  slice recovered and short again, or deleted and created again under the same name, has hosts the entry does not
  name, or none at all (recovered whole in a stockout: no host has a VM). A host being recreated (RECREATING,
  whatever its status) is never one the entry names (``recreating``): a recreate deletes the VM before it creates the
  new one, and the old VM may be listed with its old id, STOPPING, for up to 60 s after connection draining, where the
  surviving hosts of a recovery would read as left. An entry naming no host at all (``None``: saved by a release that
  did not keep them) holds by the watch alone, as that release did.
What neither check tells: a slice recovered by restarting its hosts in place (Cloud TPU may reschedule or restart them:
the same instances, the same ids), whole and short again within the watch, takes the earlier time, as before the ids
were kept; ``listManagedInstances`` carries no start time. Nor does a slice with no host VM when first seen short,
recovered whole and short of every host again within the watch: no read finds an id either time. Nor does a slice
whose lost hosts its instance groups created again (a group retries a create until it succeeds: the slice whole), lost
again while no agent read it, the other hosts untouched: the same ids either time, so within the watch (the lease,
two ticks and a quarter of the wait) it takes the earlier time too. A record is taken back for its earlier times
only (a read of this adapter's own, earlier, stays) and not for a slice this adapter's own reads found not short since
their first (seen whole since, or new; its own record handed back after it led before included). What it says of a
slice not short at the next read of its group is forgotten with it. The wait of a slice never whole counts from its
instance groups' creation (``asked``), whatever a record says. Without a record the wait starts at this adapter's
first read that finds the slice short.
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
    refreshed once older than a quarter of its group's wait (``seen``), and the Compute instance ids of the hosts it
    had at its first short read that every read since still found (``hosts``; None in a record of a release that did
    not keep them)."""

    since: datetime
    seen: datetime
    hosts: frozenset[str] | None = frozenset()


Record = Mapping[str, Mapping[str, tuple[datetime, datetime, frozenset[str] | None]]]


class ShortSlices:
    """Since when each slice has been seen short of hosts. ``waits``: ``short_waits``; ``SHORT_WAIT`` for a group it
    leaves out. ``pools``: the groups a record taken back may speak of (None: any)."""

    def __init__(self, waits: Mapping[str, timedelta] | None = None, pools: Iterable[str] | None = None) -> None:
        self._waits = dict(waits or {})
        self._pools = None if pools is None else frozenset(pools)
        self._since: dict[tuple[str, str], ShortSince] = {}  # (pool, slice) -> first read short, seen since, hosts
        self._first_read: dict[str, datetime] = {}  # pool -> this adapter's first read of the group
        # (pool, slice) -> the ids of its hosts at this adapter's first read that found it short, whole (``hosts`` is
        # intersected with every read since): a host new to a record read back then tells another episode, even once
        # a later read no longer finds it. Not saved: a record's own hosts say so for the next adapter.
        self._first_hosts: dict[tuple[str, str], frozenset[str]] = {}
        # (pool, slice) -> an entry read back within an unbroken watch, until the next read of its group finds whether
        # the slice's hosts make it the same shortfall
        self._recalled: dict[tuple[str, str], ShortSince] = {}

    def known(self) -> dict[str, dict[str, tuple[datetime, datetime, frozenset[str] | None]]]:
        """Since when each slice has been seen short, per group (pool -> slice -> since, seen, hosts): the slices short
        at the latest read of each group, and those taken back that no read of their group has checked yet (a read
        that failed does not drop them from the memory saved)."""
        record: dict[str, dict[str, tuple[datetime, datetime, frozenset[str] | None]]] = {}
        for (pool, name), short in sorted({**self._recalled, **self._since}.items()):  # taken back, not yet checked
            record.setdefault(pool, {})[name] = short
        return record

    def recall(self, record: Record, now: datetime, gap: timedelta) -> None:
        """Take back a record ``known`` gave (to this adapter or another, before a restart or a change of leader),
        once, at the first tick that reads the memory (``now``). ``gap``: the longest an unbroken watch leaves between
        the last read of one leader and the first of the next (the lease duration and the ticks around it). An entry
        is left out, its slice's wait starting again, when it was last seen short longer before this adapter's first
        read of the group (``now`` if none yet) than ``gap`` and the refresh of ``seen`` allow, or when this adapter's
        own reads have found the slice not short since their first (a slice whole again or new); any other is checked
        at the next read of its group (``given_up``): the slice's wait counts from the earlier time only if its hosts
        then show the same shortfall."""
        for pool, slices in record.items():
            if self._pools is not None and pool not in self._pools:
                continue  # a group this adapter does not read: it would never be forgotten
            first = self._first_read.get(pool)
            oldest = (now if first is None else first) - gap - self._refresh(pool)
            for name, (since, seen, hosts) in slices.items():
                own = self._since.get((pool, name))
                if first is not None and (own is None or own.since > first):
                    continue  # read not short by this adapter since: the record's time is of an episode before
                if seen < oldest:
                    log.info(
                        "pool %s: slice %s was last seen short of hosts at %s in the planner memory, longer before "
                        "this agent's first read than an unbroken watch allows (it may have been whole since): its "
                        "wait starts again",
                        pool,
                        name,
                        seen.isoformat(),
                    )
                    continue
                self._recalled[(pool, name)] = ShortSince(since, seen, None if hosts is None else frozenset(hosts))

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
        self._first_hosts = {k: h for k, h in self._first_hosts.items() if k in self._since}
        recalled = {k[1]: t for k, t in self._recalled.items() if k[0] == pool_id}
        self._recalled = {k: t for k, t in self._recalled.items() if k[0] != pool_id}
        self._first_read.setdefault(pool_id, now)
        wait, refresh = self._waits.get(pool_id, SHORT_WAIT), self._refresh(pool_id)
        out = {}
        for name, said in short.items():
            now_hosts = frozenset((hosts or {}).get(name, ()))
            own = self._since.get((pool_id, name))
            known = own or ShortSince(now, now, now_hosts)
            first_hosts = self._first_hosts.setdefault((pool_id, name), now_hosts)
            if (old := recalled.get(name)) is not None and old.since < known.since:
                known = self._taken_back(pool_id, name, old, own, now_hosts | first_hosts) or known
            if asked and name in asked:  # never whole: its instance groups' creation, not a record of an older slice
                known = known._replace(since=asked[name])
            if now - known.seen > refresh:
                known = known._replace(seen=now)
            # never a host that came up since it was first seen short: it may have been whole before falling short
            # again; nor one being recreated (``recreating``)
            self._since[(pool_id, name)] = known._replace(hosts=(known.hosts or frozenset()) & settled(now_hosts))
            if now - known.since >= wait and is_capacity_message(said):
                waited = f"short of hosts for {format_duration(now - known.since)}"
                out[name] = f"insufficient capacity: {waited} (the group waits {format_duration(wait)}): {said}"
        return out

    @staticmethod
    def _taken_back(
        pool_id: str, name: str, old: ShortSince, own: ShortSince | None, hosts: frozenset[str]
    ) -> ShortSince | None:
        """The entry read back as this adapter keeps it, when the slice's hosts (``hosts``: those now and those at
        this adapter's own first read that found it short, if earlier) show the same shortfall; None, with a line
        saying so, when they do not. The ids kept are the record's that this adapter's every read found."""
        seen = old.seen if own is None else max(old.seen, own.seen)
        mine = hosts if own is None or own.hosts is None else own.hosts
        if old.hosts is None:  # a release that kept no host: the unbroken watch alone, as that release
            return ShortSince(old.since, seen, mine)
        if same_shortfall(old.hosts, hosts):
            return ShortSince(old.since, seen, old.hosts & mine)
        if hosts - settled(hosts):
            why = "hosts of it are being recreated"
        elif hosts - old.hosts:
            why = "it has hosts that came up since"
        else:
            why = "none of the hosts it had then is left"
        log.info(
            "pool %s: slice %s was short of hosts since %s in the planner memory, but %s (it was recovered or created "
            "again since, and may have been whole): its wait starts again",
            pool_id,
            name,
            old.since.isoformat(),
            why,
        )
        return None


_RECREATING = "recreating "


def recreating(instance_id: str) -> str:
    """How a slice's hosts (``HostCount.ids``) name the VM of a host its instance group is recreating (RECREATING,
    whatever its instanceStatus): a recreate deletes the VM before it creates the new one, and the old VM, its id
    unchanged, may be listed STOPPING for a while (the deletion may wait up to 60 s after connection draining), the new
    one booting after it. Either way the host was touched since any record: never one a record names, so the record is
    not taken for the slice (``same_shortfall``), and never kept in one (``settled``)."""
    return _RECREATING + instance_id


def settled(hosts: frozenset[str]) -> frozenset[str]:
    """The ids of ``hosts`` that are not being recreated (``recreating``)."""
    return frozenset(h for h in hosts if not h.startswith(_RECREATING))


def same_shortfall(before: frozenset[str], now: frozenset[str]) -> bool:
    """Whether a slice whose hosts were ``before`` (Compute instance ids: those it had when first seen short that every
    read since found) may have been short since without a recovery: none of its hosts ``now`` created since, and some
    host left if ``before`` names any. A multi-host slice is recovered whole (every instance recreated, each with a new
    id), and a host the zone has no room for has no instance (no id), so a slice recovered and short again, or deleted
    and created again under the same name, has hosts not named before, or none at all when the zone had room for none
    of them: a slice that had hosts and has none now may have been recovered whole since, and its wait starts again.
    One that had none when first seen short and has none now tells nothing against it (recovered whole and short of
    every host again, it reads the same: the instance groups tell no such episode). A host being recreated
    (``recreating``) is never one ``before`` names: touched since, whatever its status, even its old VM still being
    deleted with its old id."""
    return now <= before and (bool(now) or not before)


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

"""The scale-ups the leader waits for, across a handover: what the planner memory keeps of them, what a new leader
takes back from it, and which units in flight it waits for that no saved scale-up explains.

The scale-ups waited for are kept in the planner memory the leader saves (``waited``, put there by the daemon after
each tick: ``PlannerMemory.scale_ups_waited``), so that a new leader (a restarted agent, or a replica that took the
Lease over) waits for the scale-ups its predecessor asked for from when they were asked (``restore``, at its first read
of the memory), and asks nothing of a pool whose target already is what it plans. The memory may be some ticks old and
another leader may have resized since: each saved scale-up is checked at the new leader's first read of its pool,
before it acts, as every wait is (``outstanding``): one whose pool's target is no longer at least its size, or that is
ready, is dropped; so a wait is never judged from earlier than it was asked, and one asked again since is waited for
from its new ask.

Nor is a saved scale-up trusted unless a leader watched its pool without a break up to the new leader's first tick: the
leader renews each one's ``judged_at`` at every tick that reads its pool and finds it still waited for (so the memory is
written once a tick while a scale-up waits), and a new leader trusts one judged within the lease duration, two ticks and
the misfire grace of its first tick that acts (the old leader's last tick, the Lease running out, and the new leader's
first tick, which may start up to the grace late); one of a pool it cannot read then is taken at its first read of the
pool, as a leader's own wait goes on over reads that fail. Older, nobody watched the pool meanwhile (no leader, or one
of an earlier release, in dry-run, or one that could not save): it may have been resized down and up again unseen, and
the ask it names may not be the one that applies. A judgement stamped later than the new leader's first tick (by more
than ``CLOCK_SKEW``: a replica whose clock ran ahead saved it) tells nothing of how long the pool went unwatched: it is
not trusted either, and a warning names the saved time and the pool once, at the first read of its pool; nor is a saved
ask taken from later than the read that takes it.

The units in flight (target above ready) that no trusted saved scale-up explains (its asked size) are waited for from
the new leader's first read of the pool (``unexplained``, marked ``inherited``): a scale-up whose ask never reached the
memory (the old leader died after asking and before its save, the ConfigMap writes failed meanwhile) or is not trusted,
someone else's resize. Later than they were asked, never earlier: a stall is told late at worst, never falsely, and is
never lost. The units the pool itself reports being recreated (``PoolState.recreating_units``: a GKE node pool's or
TPU slice's instances under RECREATING, an AWS group's health-check replacement: a repair of a unit that ran) are
not a scale-up and are never waited for, nor are those it reports refreshed in place (``PoolState.refreshing_units``:
an AWS instance whose root volume an instance refresh replaces, not ready for the refresh's run); an adapter that
cannot tell them (Cloud TPU queued resources) reports none, and a unit it repairs is then waited for like any unit in
flight. A memory that keeps no
scale-ups (None: saved by an earlier release, or none saved) explains none.

A dry-run agent adopts and restores none (``acts`` false): the units in flight are not its own but those of whatever
scales the pools (cluster-autoscaler); it carries the saved record through untouched (``waited``), so a leader that
enforces again finds what was saved (untrusted by then if the dry run lasted longer than an unbroken watch, its units in
flight waited for from its first read). A standby forgets its own (``stand_by``): the leader waits for them; and so
does a replica at the start of each term it leads, should it lead again with no standby tick in between, and takes
back what the memory saved.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from agent.alerts import outstanding
from agent.planning.memory import PendingScaleUp
from models import PoolState

log = logging.getLogger(__name__)

# how far ahead of a new leader's clock a saved judgement may be and still be read as a watch up to now: replicas'
# clocks kept by NTP differ by well under a second; more is a clock that runs ahead, not a watch
CLOCK_SKEW = timedelta(seconds=5)


class ScaleUpMemory:
    def __init__(self, pools: Collection[str], unbroken: timedelta) -> None:
        """``unbroken``: how long a saved scale-up's judgement stays trusted by the next leader (the lease duration,
        two ticks and the daemon's misfire grace)."""
        self.pools = frozenset(pools)
        self.unbroken = unbroken
        # whether the units in flight and the saved scale-ups are taken (dry-run: not)
        self.acts = True
        # the pools not read since this term began: each is taken over at the first tick that acts and reads it
        self._due = self.pools
        # the scale-ups the memory saved (None: none kept, every unit in flight is adopted)
        self._restored: tuple[PendingScaleUp, ...] | None = None
        # this term's first tick that acts: a saved scale-up is trusted if judged within an unbroken watch of it (a pool
        # this leader cannot read then is taken later, as any wait of a pool unread a while goes on)
        self._began: datetime | None = None

    def restore(self, saved: Sequence[PendingScaleUp] | None) -> None:
        """The scale-ups the planner memory saved (this leader's first read of it), each taken or dropped at the first
        tick that acts and reads its pool."""
        self._restored = None if saved is None else tuple(saved)

    def stand_by(self) -> None:
        """A new term as leader (or none): every pool is taken over again at its first read, from the memory."""
        self._due = self.pools
        self._restored = None
        self._began = None

    def waited(self, pending: Sequence[PendingScaleUp]) -> tuple[PendingScaleUp, ...] | None:
        """What the planner memory keeps: the scale-ups waited for (``pending``) and those saved for a pool not read
        since; a dry-run agent's, the record it restored, untouched (None: none kept)."""
        if not self.acts:
            return self._restored
        due = tuple(p for p in self._restored or () if p.pool_id in self._due)
        return (*due, *pending)

    def take_over(self, now: datetime, states: Mapping[str, PoolState]) -> list[PendingScaleUp]:
        """What a new leader waits for in the pools of ``states`` (read before it acts) it reads for the first time in
        its term: the trusted saved scale-ups still outstanding on them, and their units in flight no such scale-up
        explains, from now."""
        self._began = self._began or now
        due = {p: s for p, s in states.items() if p in self._due}
        self._due -= due.keys()
        if not self.acts:
            return []
        saved = [p for p in self._restored or () if p.pool_id in due]
        _warn_ahead(saved, self._began)
        trusted = [replace(p, requested_at=min(p.requested_at, now)) for p in saved if self._trusted(p, self._began)]
        kept = outstanding(trusted, due)
        return kept + unexplained(now, due, kept)

    def judged(self, scale_up: PendingScaleUp, now: datetime) -> PendingScaleUp:
        """``scale_up`` found still waited for by a tick that read its pool at ``now``."""
        return scale_up if scale_up.judged_at == now else replace(scale_up, judged_at=now)

    def _trusted(self, scale_up: PendingScaleUp, began: datetime) -> bool:
        return scale_up.judged_at is not None and -CLOCK_SKEW <= began - scale_up.judged_at <= self.unbroken


def _warn_ahead(saved: Sequence[PendingScaleUp], began: datetime) -> None:
    """A warning for each saved scale-up judged later than this term's first tick (``began``, beyond ``CLOCK_SKEW``),
    which is not trusted for it."""
    for scale_up in saved:
        if scale_up.judged_at is not None and scale_up.judged_at - began > CLOCK_SKEW:
            log.warning(
                "saved scale-up judged at %s, later than this leader's first tick at %s: a replica's clock runs ahead, "
                "so the saved ask is not trusted and its pool's units in flight are waited for from this read; "
                "synchronise the clocks of the nodes the agent's replicas run on (NTP) pool=%s asked=%s->%s",
                scale_up.judged_at.isoformat(),
                began.isoformat(),
                scale_up.pool_id,
                scale_up.from_units,
                scale_up.to_units,
            )


def unexplained(
    now: datetime, states: Mapping[str, PoolState], explained: Sequence[PendingScaleUp] = ()
) -> list[PendingScaleUp]:
    """The units in flight in ``states`` (the planner's: nodes being drained out of the targets) above the sizes
    ``explained`` asks its pool for and the units it has (ready, being recreated or refreshed in place: neither is
    waited for, as in ``outstanding``), waited for from ``now``: one scale-up per pool."""
    asked: dict[str, int] = {}
    for scale_up in explained:
        asked[scale_up.pool_id] = max(asked.get(scale_up.pool_id, 0), scale_up.to_units)
    found = []
    for pool_id, state in sorted(states.items()):
        since = max(state.ready_units + state.recreating_units + state.refreshing_units, asked.get(pool_id, 0))
        if since < state.target_units:
            found.append(PendingScaleUp(pool_id, now, since, state.target_units, inherited=True, judged_at=now))
    return found

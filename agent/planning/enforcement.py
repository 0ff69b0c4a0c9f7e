"""Enforcing budget caps on a plan. Pure: the planner calls ``enforce_budgets`` with its proposed targets.

Two duties:

1. **Trim.** A scale-up that would take any cap's projection above the cap is cut to what fits, in whole units,
   with a ``SkipReason.BUDGET`` skip naming the budget (``agent.planning.budget_trim``, which says in what order
   room is handed out, and how a scale-up whose hold reaches into the next period must fit its cap too).
2. **Shed.** When the projection exceeds a cap even without any scale-up (prices rose, a cap was lowered), the
   result names burst units to release, cheapest to lose first, across the budget's pools: units idle for the
   release window, then units idle now (for less), then busy ones; within each, on-demand before spot before
   reserved, then the dearest per chip. Fixed (on-prem) pools and units at a pool's minimum are never named, nor
   the units of a pool no release may touch (``held``: blocked after a permanent error, serving a class with no
   data, not read this tick): they still count in the projection, so what the cap needs is named in the pools
   that can be released. What those cannot cover is a ``Shortfall``, naming the held pools that keep their units.
   Releasing is the planner's job, through its safe release path; this only says what.

A monthly cap is held over what is left of the month. An hourly cap is held over what is left of the hour and
over the whole next hour, so it also caps the rate of spend.

A monthly cap with a ``commit_horizon`` counts the units held only that far ahead (within the period), in the
trim, the shed and the overspend check alike: a scale-up need only fit the money left over the horizon. Such a cap
is held by a **hard stop** instead of the guarantee that busy units are never released (``agent.planning.budget_trim``
says what it asks of a scale-up): when the money left no longer pays for the units held through the next two ticks
(the ledger bills a release one tick late), ``stops`` name the burst units to release now, cheapest to lose first,
busy ones included (``Shed.forced``): a spot unit idle for a minute goes before a busy on-demand one, and so does a
unit still provisioning (serving nothing yet) in a pool whose release takes those first (``provisioning``: a pool
shrunk by a size change of units in flight first, not by drains of its nodes, which would drain a busy node in its
place).

A budget pool missing from ``billed`` (its state could not be read this tick) is counted at the units it is known
to hold: the more of those the agent last read it at (``last_read``) and those the ledger last recorded it holding
(``BudgetSpend.last_units``): spend of a pool nobody observed is never assumed to be zero, nor to have jumped to its
maximum because one read failed. Its spend since that record is in the budget's spend already
(``BudgetSpend.unread_since``). A pool known by neither (``budget_caps.unknown_pools``) is counted at nothing in the
projection, the overspend check, the shed and the hard stop, which release nothing and alert nothing on a guess; but
the trim counts it at its ``max_units`` (``agent.planning.budget_trim`` says over how long), so a missing value never
lets the agent's own commitment run past a cap. A hard stop of a budget with such a pool waits: a forced release
evicts busy work on a projection that is partly a guess, so the stop waits for a tick that reads every pool of the
budget (a ``DeferredStop`` says so, and until when; the shed of idle units goes on), but for ``unread_stop_wait`` at
most, from the oldest of the unread pools' last records (a pool with none: from the tick the loop first found it
unread, or from ``now`` when the spend does not say). A pool that stays unreadable for longer (a permission revoked
for days) must not turn the stop off: the stop then runs on the budget's read pools, the unread pool held and counted
at its known units.

A monthly cap other agents share (``remote_pools``) counts what they keep reserved in its period
(``BudgetSpend.committed_elsewhere_usd``: their units to its end) in the projection of the overspend check and the
shed, whose alert says how much of it that is: this agent's pools alone may be well within the cap while the
budget's are not. Its snapshot (``budget_snapshots``: the projected-spend gauge, the threshold alerts, the summary)
projects the same way and says how much of it is theirs (``BudgetSnapshot.reserved_elsewhere_usd``). The trim
leaves it out, as a scale-up on a shared budget is reserved in the ledger against everyone's reservations
(``agent.budget_reserve``), which holds that share already; but a cap it breaks grants no scale-up, so that a plan
never both sheds and grows under one broken cap.

The caps and the units each pool is counted at are in ``agent.planning.budget_caps``, the trim in
``agent.planning.budget_trim``, the shed and the hard stop's release in ``agent.planning.budget_shed``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from agent.planning.budget import BudgetSpend, CapKind, Period, project
from agent.planning.budget_caps import EPS_USD, Cap, caps_at, units_now, unknown_pools
from agent.planning.budget_shed import Idleness, Shed, Shortfall, after_drains, shed_to_caps
from agent.planning.budget_trim import Trim, trim_scale_ups
from models import BudgetSnapshot, PoolSpec, Skip

__all__ = [
    "BudgetEnforcement",
    "DeferredStop",
    "Overspend",
    "budget_snapshots",
    "deferred_stops",
    "enforce_budgets",
    "find_overspends",
]


@dataclass(frozen=True)
class DeferredStop:
    """A hard stop not started this tick: the money left is ``usd`` short of paying for the next two ticks, but the
    budget's pools in ``unread`` could not be read (each with the units it is counted at: ``None`` for a pool nobody
    knows the units of, counted at nothing), since ``since`` (the oldest of their last records); the stop runs
    without them from ``until`` on."""

    budget: str
    cap: CapKind
    usd: float
    unread: tuple[tuple[str, int | None], ...]
    since: datetime
    until: datetime


@dataclass(frozen=True)
class Overspend:
    """A cap whose projection exceeds it with the units billed now, before anything is shed."""

    budget: str
    cap: CapKind
    period: Period
    cap_usd: float
    projected_usd: float
    until: datetime | None = None  # where the projection ends, when a commit horizon ends it before the period
    elsewhere_usd: float = 0.0  # of ``projected_usd``, what other agents sharing the budget keep reserved in it
    draining_units: int = 0  # the agent's nodes being drained in the budget's pools, counted one more tick

    @property
    def by(self) -> datetime:
        return self.until if self.until is not None else self.period.end


@dataclass(frozen=True)
class BudgetEnforcement:
    """Targets with scale-ups trimmed to the caps, the skips saying why, and what to shed if over a cap."""

    targets: dict[str, int]
    skips: tuple[Skip, ...] = ()
    trims: tuple[Trim, ...] = ()
    shed: tuple[Shed, ...] = ()
    overspends: tuple[Overspend, ...] = ()
    snapshots: tuple[BudgetSnapshot, ...] = field(default=())
    shortfalls: tuple[Shortfall, ...] = ()
    deferred: tuple[DeferredStop, ...] = ()


def enforce_budgets(
    now: datetime,
    spends: Sequence[BudgetSpend],
    pools: Mapping[str, PoolSpec],
    billed: Mapping[str, int],
    proposed: Mapping[str, int],
    idle: Mapping[str, int] | None = None,
    settle: timedelta = timedelta(minutes=1),
    release_after: timedelta = timedelta(0),
    idle_now: Mapping[str, int] | None = None,
    held: Collection[str] = (),
    provisioning: Mapping[str, int] | None = None,
    broken: Mapping[str, int] | None = None,
    last_read: Mapping[str, int] | None = None,
    draining: Mapping[str, int] | None = None,
) -> BudgetEnforcement:
    """Trim ``proposed`` scale-ups to every cap in ``spends`` and say what to shed where a cap is already broken.

    ``billed`` holds the units each pool bills now (``PoolState.billed_units``: ready, provisioning and broken,
    not those waiting unbilled), ``proposed`` the planner's absolute targets in the same units
    (``agent.planning.budget.billed_after``), ``idle`` the units observed idle for ``release_after`` (how long a
    unit must be idle before it may be released), ``idle_now`` those observed idle at all (``idle`` when not
    given), ``settle`` the loop's tick (how long a released unit keeps billing in the ledger), ``provisioning`` the
    units of ``billed`` still provisioning in the pools whose release takes those first (cheaper to lose than busy
    units; none when not given), ``broken`` the units of ``billed`` that no release can take (broken units, busy;
    none when not given), ``last_read`` the units the agent last read each pool at (``units_now``), ``draining`` those
    of ``broken`` that are nodes being drained (a shed counts them billing one more tick only). No release names a
    unit of a pool in ``held``, nor of a pool missing from ``billed`` (not read), and no hard stop is started for a
    budget with a pool not read.
    """
    caps = caps_at(now, spends, crossing=True)
    prices = {p: s.price_per_unit_hour_usd for p, s in pools.items()}
    base = units_now(spends, pools, billed, last_read)
    unknown = unknown_pools(spends, pools, billed, last_read)
    overspends = []
    for cap in caps:
        projected = project(cap.committed_usd, cap.period, now, sorted(cap.pools), base, prices, horizon=cap.horizon)
        cap.room_usd = cap.cap_usd - projected
        if cap.room_usd < -EPS_USD and not cap.crossing:
            overspends.append(_overspend(now, cap, projected))
        cap.unknown = tuple(sorted(cap.pools & unknown))  # kept out of the room of each scale-up (``trim_scale_ups``)

    targets = dict(proposed)
    holds = {p: spec.lead_time + release_after + settle for p, spec in pools.items()}
    # the ledger's reservations hold the other agents' share against scale-ups; but a cap it breaks has no room
    lent = [cap.elsewhere_usd if cap.room_usd >= -EPS_USD else 0.0 for cap in caps]
    for cap, usd in zip(caps, lent, strict=True):
        cap.room_usd += usd
    trims, skips = trim_scale_ups(now, caps, pools, base, targets, holds)
    for cap, usd in zip(caps, lent, strict=True):
        cap.room_usd -= usd
    idleness = Idleness(
        idle or {}, idle_now if idle_now is not None else idle or {}, provisioning or {}, broken or {}, draining or {}
    )
    unread = frozenset(p for p in pools if p not in billed)
    untouched = frozenset(held) | unread
    shed, short = shed_to_caps(now, caps, pools, base, targets, idleness, settle, untouched)
    stops, short_stop = shed_to_caps(now, caps, pools, base, targets, idleness, settle, untouched, unread, stop=True)
    deferred = _deferred(now, caps, pools, base, targets, settle, unread, unknown)
    final = dict(targets)
    for item in shed:
        final[item.pool_id] = final.get(item.pool_id, base[item.pool_id]) - item.units
    for item in stops:
        final[item.pool_id] = min(final.get(item.pool_id, base[item.pool_id]), base[item.pool_id] - item.units)
    shed = [*shed, *stops]
    snapshots = budget_snapshots(now, spends, pools, billed, final, settle, last_read, draining)
    shortfalls = (*short, *short_stop)
    return BudgetEnforcement(
        targets, tuple(skips), tuple(trims), tuple(shed), tuple(overspends), snapshots, shortfalls, deferred
    )


def budget_snapshots(
    now: datetime,
    spends: Sequence[BudgetSpend],
    pools: Mapping[str, PoolSpec],
    billed: Mapping[str, int],
    units: Mapping[str, int],
    settle: timedelta = timedelta(minutes=1),
    last_read: Mapping[str, int] | None = None,
    draining: Mapping[str, int] | None = None,
) -> tuple[BudgetSnapshot, ...]:
    """Each cap's spend so far and its projection to period end if the pools go from ``billed`` to ``units`` (a pool
    not read at the units it is known to hold, ``units_now``), the nodes of ``units`` being drained (``draining``, per
    pool) billing one more tick only, as the shed counts them (``after_drains``). A monthly cap other agents share
    projects from what they keep reserved in the period too (``Cap.committed_usd``), as the overspend check does, and
    says how much of it that is: the gauge, the threshold alerts and the summary then show the figure the cap is held
    to. Its own units are projected to the period's end, commit horizon or not, and so are the other agents' (reserved
    over the horizon only: ``Cap.elsewhere_to_period_end``), so the gauge crosses the cap when the pair's units do."""
    prices = {p: s.price_per_unit_hour_usd for p, s in pools.items()}
    base = units_now(spends, pools, billed, last_read)
    shared = {s.budget.name for s in spends if s.budget.remote_pools}
    snapshots = []
    for cap in caps_at(now, spends):
        if cap.lookahead:
            continue
        elsewhere = cap.elsewhere_to_period_end(now)
        after = after_drains({**base, **units}, draining or {})
        projected = project(cap.spent_usd + elsewhere, cap.period, now, sorted(cap.pools), after, prices, base, settle)
        snapshots.append(
            BudgetSnapshot(
                budget=cap.budget if cap.kind is CapKind.MONTH else f"{cap.budget}/{cap.kind}",
                period_start=cap.period.start,
                period_end=cap.period.end,
                spent_usd=cap.spent_usd,
                cap_usd=cap.cap_usd,
                projected_usd=projected,
                reserved_elsewhere_usd=elsewhere if cap.budget in shared else None,
            )
        )
    return tuple(snapshots)


def find_overspends(
    now: datetime,
    spends: Sequence[BudgetSpend],
    pools: Mapping[str, PoolSpec],
    billed: Mapping[str, int],
    last_read: Mapping[str, int] | None = None,
    draining: Mapping[str, int] | None = None,
    settle: timedelta = timedelta(minutes=1),
) -> list[Overspend]:
    """The caps whose projection with the units billed now exceeds them (what ``enforce_budgets`` sheds for), the
    nodes being drained that still go (``draining``, per pool: ``agent.planning.budgeting.draining_going_units``)
    billing one more tick (``settle``, the loop's tick) only, as the shed counts them: counted to the period's end,
    a release being drained was told as an overspend nothing could shed at each tick its drains ran."""
    prices = {p: s.price_per_unit_hour_usd for p, s in pools.items()}
    base = units_now(spends, pools, billed, last_read)
    going = draining or {}
    after = after_drains(base, going)
    out = []
    for cap in caps_at(now, spends):
        pools_ = sorted(cap.pools)
        projected = project(cap.committed_usd, cap.period, now, pools_, after, prices, base, settle, cap.horizon)
        if projected > cap.cap_usd + EPS_USD:
            out.append(_overspend(now, cap, projected, sum(going.get(p, 0) for p in pools_)))
    return out


def _overspend(now: datetime, cap: Cap, projected: float, draining: int = 0) -> Overspend:
    return Overspend(
        cap.budget, cap.kind, cap.period, cap.cap_usd, projected, cap.until(now), cap.elsewhere_usd, draining
    )


def deferred_stops(
    now: datetime,
    spends: Sequence[BudgetSpend],
    pools: Mapping[str, PoolSpec],
    billed: Mapping[str, int],
    settle: timedelta = timedelta(minutes=1),
    last_read: Mapping[str, int] | None = None,
) -> tuple[DeferredStop, ...]:
    """The hard stops waiting for a pool missing from ``billed`` (not read), with the units billed now kept: what
    ``enforce_budgets`` defers before the planner's own releases."""
    base = units_now(spends, pools, billed, last_read)
    unread = frozenset(p for p in pools if p not in billed)
    unknown = unknown_pools(spends, pools, billed, last_read)
    return _deferred(now, caps_at(now, spends), pools, base, {}, settle, unread, unknown)


def _deferred(
    now: datetime,
    caps: list[Cap],
    pools: Mapping[str, PoolSpec],
    base: Mapping[str, int],
    targets: Mapping[str, int],
    settle: timedelta,
    unread: frozenset[str],
    unknown: frozenset[str] = frozenset(),
) -> tuple[DeferredStop, ...]:
    """The hard stops not started because a pool of their budget was not read (and has not been for less than the
    budget's ``unread_stop_wait``): those whose projection over the next two ticks, with the units kept, is over the
    cap. A pool of ``unknown`` (``unknown_pools``) is named with ``None``: it is counted at nothing, not known to
    hold none."""
    prices = {p: s.price_per_unit_hour_usd for p, s in pools.items()}
    kept = {p: min(targets.get(p, base[p]), base[p]) for p in base}
    out = []
    for cap in caps:
        missing = sorted(cap.pools & unread)
        since = cap.unread_from(unread, now)
        if cap.crossing or cap.horizon is None or since is None or not cap.waits(unread, now):
            continue
        projected = project(cap.spent_usd, cap.period, now, sorted(cap.pools), kept, prices, base, settle, 2 * settle)
        if projected > cap.cap_usd + EPS_USD:
            counted = tuple((p, None if p in unknown else base[p]) for p in missing)
            out.append(
                DeferredStop(cap.budget, cap.kind, projected - cap.cap_usd, counted, since, since + cap.stop_wait)
            )
    return tuple(out)

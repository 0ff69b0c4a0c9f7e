"""Enforcing budget caps on a plan. Pure: the planner calls ``enforce_budgets`` with its proposed targets.

Two duties:

1. **Trim.** A scale-up (a proposed absolute target above the units billed now) that would take any cap's
   projection above the cap is cut to what fits, in whole units, with a ``SkipReason.BUDGET`` skip naming the
   budget. Room is handed out in fill order (on-prem, reserved, spot, on-demand; then price per chip), so the
   scale-ups the planner would fill first are the last to be trimmed. Releases proposed in the same tick are
   not counted as room: a release may still be refused, and the cap must hold either way.
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

A scale-up commits spend for at least its minimum hold: the pool's lead time, the idle window before a unit may
be released, and one tick. When that reaches past the end of the month period, the units are still there when
the next period opens, and the projection then runs them to the end of that period: such a scale-up must also
fit the next period's cap, with everything billed now counted over the whole of it. (Units bought earlier can
still be released before the period ends if they turn out idle; busy units never are, whatever a cap says.)

A monthly cap with a ``commit_horizon`` counts the units held only that far ahead (within the period), in the
trim, the shed and the overspend check alike: a scale-up need only fit the money left over the horizon. Such a cap
is held by a **hard stop** instead of the guarantee above: when the money left no longer pays for the units held
through the next two ticks (the ledger bills a release one tick late), ``stops`` name the burst units to release
now, cheapest to lose first, busy ones included (``Shed.forced``): a spot unit idle for a minute goes before a
busy on-demand one, and so does a unit still provisioning (serving nothing yet) in a pool whose release takes those
first (``provisioning``: a pool shrunk by a size change of units in flight first, not by drains of its nodes, which
would drain a busy node in its place).

A budget pool missing from ``billed`` (its state could not be read this tick) is counted at the units the ledger
last recorded it holding (``BudgetSpend.last_units``), and at its ``max_units`` only when the ledger has no record
of it: spend of a pool nobody observed is never assumed to be zero, nor to have jumped to its maximum because one
read failed. Its spend since that record is in the budget's spend already (``BudgetSpend.unread_since``). A hard
stop of a budget with such a pool waits: a forced release evicts busy work on a projection that is partly a guess,
so the stop waits for a tick that reads every pool of the budget (a ``DeferredStop`` says so, and until when; the
shed of idle units goes on), but for ``unread_stop_wait`` at most, from the oldest of the unread pools' last records
(a pool with none: from the tick the loop first found it unread, or from ``now`` when the spend does not say). A
pool that stays unreadable for longer (a permission revoked for days) must not turn the stop off: the stop then runs
on the budget's read pools, the unread pool held and counted at its last recorded units.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from agent.planning.budget import BudgetSpend, CapKind, Period, project
from models import BudgetSnapshot, CapacityTier, PoolKind, PoolSpec, Skip, SkipReason

_EPS_USD = 1e-6


@dataclass(frozen=True)
class Trim:
    """A scale-up cut short by a cap: the pool wanted ``wanted_units`` and may have ``allowed_units``."""

    pool_id: str
    billed_units: int
    wanted_units: int
    allowed_units: int
    budget: str
    cap: CapKind
    label: str = field(default="", compare=False)  # the binding cap, as the skip names it
    room_usd: float = field(default=0.0, compare=False)  # the cap's room left once the trimmed scale-up is counted


@dataclass(frozen=True)
class Shed:
    """Units of a pool to release to bring a projection back under its cap (``idle_units`` of them idle now)."""

    pool_id: str
    units: int
    idle_units: int
    budget: str
    cap: CapKind
    saves_usd: float
    forced: bool = False  # a hard stop: busy units go too (``commit_horizon``)
    provisioning_units: int = 0  # of ``units``, those still provisioning (serving nothing yet)


@dataclass(frozen=True)
class Shortfall:
    """A broken cap that releasing every unit it may name leaves ``usd`` over, while ``held`` (pools no release may
    touch) keep units that could have covered it. ``forced``: the hard stop's projection over the next two ticks."""

    budget: str
    cap: CapKind
    usd: float
    held: tuple[str, ...]
    forced: bool = False


@dataclass(frozen=True)
class DeferredStop:
    """A hard stop not started this tick: the money left is ``usd`` short of paying for the next two ticks, but the
    budget's pools in ``unread`` could not be read (each with the units it is counted at), since ``since`` (the
    oldest of their last records); the stop runs without them from ``until`` on."""

    budget: str
    cap: CapKind
    usd: float
    unread: tuple[tuple[str, int], ...]
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


@dataclass
class _Cap:
    budget: str
    kind: CapKind
    period: Period
    cap_usd: float
    spent_usd: float
    pools: frozenset[str]
    lookahead: bool = False
    crossing: bool = False  # the next month period: binds only scale-ups whose minimum hold reaches into it
    horizon: timedelta | None = None  # the budget's commit horizon (monthly caps): units counted only that far
    room_usd: float = 0.0
    unread_since: Mapping[str, datetime] = field(default_factory=dict)  # BudgetSpend.unread_since
    stop_wait: timedelta = timedelta(0)  # how long the hard stop waits for an unread pool (Budget.unread_stop_wait)

    def unread_from(self, unread: Collection[str], now: datetime) -> datetime | None:
        """Since when the hard stop has waited for the pools of this cap in ``unread`` (none: ``None``): the oldest
        of their last records, ``now`` for a pool the ledger has no record of."""
        missing = self.pools & frozenset(unread)
        return min((self.unread_since.get(p, now) for p in missing), default=None)

    def waits(self, unread: Collection[str], now: datetime) -> bool:
        """Whether this cap's hard stop still waits for a pool of it not read this tick."""
        since = self.unread_from(unread, now)
        return since is not None and now < since + self.stop_wait

    def until(self, now: datetime) -> datetime | None:
        """Where this cap's projection ends when its commit horizon ends it before the period does."""
        if self.horizon is None or now + self.horizon >= self.period.end:
            return None
        return now + self.horizon

    def hours_left(self, now: datetime) -> float:
        """Hours of this cap's period that the units held now are counted for."""
        return _hours(self.period.remaining(now, self.horizon))

    @property
    def label(self) -> str:
        label = f"budget {self.budget!r} ({self.kind} cap {self.cap_usd:,.2f} USD)"
        if self.crossing:
            label += (
                f" for the period opening {self.period.start:%Y-%m-%d %H:%M} UTC, which units bought now reach "
                f"(lead time + idle window + one tick)"
            )
        return label


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
) -> BudgetEnforcement:
    """Trim ``proposed`` scale-ups to every cap in ``spends`` and say what to shed where a cap is already broken.

    ``billed`` holds the units each pool bills now (``PoolState.billed_units``: ready, provisioning and broken,
    not those waiting unbilled), ``proposed`` the planner's absolute targets in the same units
    (``agent.planning.budget.billed_after``), ``idle`` the units observed idle for ``release_after`` (how long a
    unit must be idle before it may be released), ``idle_now`` those observed idle at all (``idle`` when not
    given), ``settle`` the loop's tick (how long a released unit keeps billing in the ledger), ``provisioning`` the
    units of ``billed`` still provisioning in the pools whose release takes those first (cheaper to lose than busy
    units; none when not given), ``broken`` the units of ``billed`` that no release can take (broken units, busy;
    none when not given). No release names a unit of a pool in ``held``, nor of a pool missing from ``billed`` (not
    read), and no hard stop is started for a budget with a pool not read.
    """
    caps = _caps(now, spends, crossing=True)
    prices = {p: s.price_per_unit_hour_usd for p, s in pools.items()}
    base = _units_now(spends, pools, billed)
    overspends = []
    for cap in caps:
        projected = project(cap.spent_usd, cap.period, now, sorted(cap.pools), base, prices, horizon=cap.horizon)
        cap.room_usd = cap.cap_usd - projected
        if cap.room_usd < -_EPS_USD and not cap.crossing:
            overspends.append(Overspend(cap.budget, cap.kind, cap.period, cap.cap_usd, projected, cap.until(now)))

    targets = dict(proposed)
    holds = {p: spec.lead_time + release_after + settle for p, spec in pools.items()}
    trims, skips = _trim(now, caps, pools, base, targets, holds)
    idleness = _Idleness(idle or {}, idle_now if idle_now is not None else idle or {}, provisioning or {}, broken or {})
    unread = frozenset(p for p in pools if p not in billed)
    untouched = frozenset(held) | unread
    shed, short = _shed(now, caps, pools, base, targets, idleness, settle, untouched)
    stops, short_stop = _shed(now, caps, pools, base, targets, idleness, settle, untouched, unread, stop=True)
    deferred = _deferred(now, caps, pools, base, targets, settle, unread)
    final = dict(targets)
    for item in shed:
        final[item.pool_id] = final.get(item.pool_id, base[item.pool_id]) - item.units
    for item in stops:
        final[item.pool_id] = min(final.get(item.pool_id, base[item.pool_id]), base[item.pool_id] - item.units)
    shed = [*shed, *stops]
    snapshots = budget_snapshots(now, spends, pools, billed, final, settle)
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
) -> tuple[BudgetSnapshot, ...]:
    """Each cap's spend so far and its projection to period end if the pools go from ``billed`` to ``units``."""
    prices = {p: s.price_per_unit_hour_usd for p, s in pools.items()}
    base = _units_now(spends, pools, billed)
    return tuple(
        BudgetSnapshot(
            budget=cap.budget if cap.kind is CapKind.MONTH else f"{cap.budget}/{cap.kind}",
            period_start=cap.period.start,
            period_end=cap.period.end,
            spent_usd=cap.spent_usd,
            cap_usd=cap.cap_usd,
            projected_usd=project(
                cap.spent_usd, cap.period, now, sorted(cap.pools), {**base, **units}, prices, base, settle
            ),
        )
        for cap in _caps(now, spends)
        if not cap.lookahead
    )


def find_overspends(
    now: datetime, spends: Sequence[BudgetSpend], pools: Mapping[str, PoolSpec], billed: Mapping[str, int]
) -> list[Overspend]:
    """The caps whose projection with the units billed now exceeds them (what ``enforce_budgets`` sheds for)."""
    prices = {p: s.price_per_unit_hour_usd for p, s in pools.items()}
    base = _units_now(spends, pools, billed)
    out = []
    for cap in _caps(now, spends):
        projected = project(cap.spent_usd, cap.period, now, sorted(cap.pools), base, prices, horizon=cap.horizon)
        if projected > cap.cap_usd + _EPS_USD:
            out.append(Overspend(cap.budget, cap.kind, cap.period, cap.cap_usd, projected, cap.until(now)))
    return out


def deferred_stops(
    now: datetime,
    spends: Sequence[BudgetSpend],
    pools: Mapping[str, PoolSpec],
    billed: Mapping[str, int],
    settle: timedelta = timedelta(minutes=1),
) -> tuple[DeferredStop, ...]:
    """The hard stops waiting for a pool missing from ``billed`` (not read), with the units billed now kept: what
    ``enforce_budgets`` defers before the planner's own releases."""
    base = _units_now(spends, pools, billed)
    unread = frozenset(p for p in pools if p not in billed)
    return _deferred(now, _caps(now, spends), pools, base, {}, settle, unread)


def _units_now(
    spends: Sequence[BudgetSpend], pools: Mapping[str, PoolSpec], billed: Mapping[str, int]
) -> dict[str, int]:
    """The units each pool is counted at: those billed now; for a pool not read, the units the ledger last recorded
    it holding; for a pool the ledger has no record of either, its ``max_units``."""
    recorded: dict[str, int] = {}
    for spend in spends:
        recorded.update(spend.last_units)
    return {p: billed[p] if p in billed else recorded.get(p, spec.max_units) for p, spec in pools.items()}


def _caps(now: datetime, spends: Sequence[BudgetSpend], crossing: bool = False) -> list[_Cap]:
    """Every cap at ``now``. An hourly cap is also held over the whole next hour (a rate): otherwise a scale-up
    late in an hour, cheap against the minutes left, would break the next hour the moment it starts. With
    ``crossing``, a monthly cap is also held over the next month period, for the scale-ups that reach it."""
    caps = []
    for spend in sorted(spends, key=lambda s: s.budget.name):
        name, pools = spend.budget.name, spend.budget.pools
        for kind, period, cap_usd in spend.budget.caps(now):
            horizon = spend.budget.commit_horizon if kind is CapKind.MONTH else None
            caps.append(
                _Cap(
                    name,
                    kind,
                    period,
                    cap_usd,
                    spend.spent(kind),
                    pools,
                    horizon=horizon,
                    unread_since=spend.unread_since,
                    stop_wait=spend.budget.unread_stop_wait,
                )
            )
            if kind is CapKind.HOUR:
                following = Period(period.end, period.end + (period.end - period.start))
                caps.append(_Cap(name, kind, following, cap_usd, 0.0, pools, lookahead=True))
            elif crossing:
                following = spend.budget.period(period.end)
                caps.append(
                    _Cap(name, kind, following, cap_usd, 0.0, pools, lookahead=True, crossing=True, horizon=horizon)
                )
    return caps


def _trim(
    now: datetime,
    caps: list[_Cap],
    pools: Mapping[str, PoolSpec],
    base: Mapping[str, int],
    targets: dict[str, int],
    holds: Mapping[str, timedelta],
) -> tuple[list[Trim], list[Skip]]:
    """Grant scale-ups in fill order while every cap over the pool keeps its projection within the cap. A next
    period's cap binds a pool's scale-up only when the pool's minimum hold (``holds``) reaches into it."""
    trims: list[Trim] = []
    skips: list[Skip] = []
    ups = sorted((p for p, t in targets.items() if p in pools and t > base[p]), key=lambda p: pools[p].fill_key)
    for pool_id in ups:
        wanted = targets[pool_id] - base[pool_id]
        allowed, binding = wanted, None
        binds = [c for c in caps if pool_id in c.pools and (not c.crossing or now + holds[pool_id] > c.period.start)]
        for cap in binds:
            per_unit = pools[pool_id].price_per_unit_hour_usd * cap.hours_left(now)
            if per_unit <= 0.0:
                continue
            fits = max(0, math.floor((cap.room_usd + _EPS_USD) / per_unit))
            if fits < allowed:
                allowed, binding = fits, cap
        for cap in binds:
            cap.room_usd -= allowed * pools[pool_id].price_per_unit_hour_usd * cap.hours_left(now)
        if binding is None:
            continue
        targets[pool_id] = base[pool_id] + allowed
        room = max(0.0, binding.room_usd)
        trims.append(
            Trim(
                pool_id,
                base[pool_id],
                base[pool_id] + wanted,
                targets[pool_id],
                binding.budget,
                binding.kind,
                binding.label,
                room,
            )
        )
        skips.append(
            Skip(
                pool_id,
                SkipReason.BUDGET,
                f"{binding.label} allows {allowed} of {wanted} more units "
                f"({base[pool_id]}->{targets[pool_id]} instead of ->{base[pool_id] + wanted}); "
                f"{room:,.2f} USD of room left to period end",
            )
        )
    return trims, skips


def _shed(
    now: datetime,
    caps: list[_Cap],
    pools: Mapping[str, PoolSpec],
    base: Mapping[str, int],
    targets: Mapping[str, int],
    idle: _Idleness,
    settle: timedelta,
    held: frozenset[str],
    unread: frozenset[str] = frozenset(),
    stop: bool = False,
) -> tuple[list[Shed], list[Shortfall]]:
    """Units to release, in cheapest-to-lose order, until no cap is broken (or nothing more can be shed), and the
    caps left broken where pools in ``held`` keep units that might have covered the rest.

    The planner's own releases in this tick count towards the shortfall; scale-ups were already trimmed to zero
    in every broken budget, because a broken cap has no room. With ``stop``, the hard stop of the caps that have a
    commit horizon: each is projected over the next two ticks only, and what it names is ``forced``.
    """
    prices = {p: s.price_per_unit_hour_usd for p, s in pools.items()}
    kept = {p: min(targets.get(p, base[p]), base[p]) for p in base}
    excess: dict[int, float] = {}
    horizons: dict[int, timedelta | None] = {}
    for i, cap in enumerate(caps):
        if cap.crossing:  # a next period is held at its opening, not before
            continue
        held_by_stop = cap.horizon is not None
        if (stop and not held_by_stop) or (not stop and cap.room_usd >= -_EPS_USD):
            continue
        if stop and cap.waits(unread, now):  # not started on a guess yet: ``_deferred``
            continue
        horizons[i] = 2 * settle if stop else cap.horizon
        projected = project(cap.spent_usd, cap.period, now, sorted(cap.pools), kept, prices, base, settle, horizons[i])
        if projected > cap.cap_usd + _EPS_USD:
            excess[i] = projected - cap.cap_usd
    shed: dict[str, Shed] = {}
    for (level, *_), pool_id, count in _candidates([caps[i] for i in excess], pools, base, kept, idle, held):
        saves = {
            i: prices[pool_id] * _hours(max(timedelta(0), caps[i].period.remaining(now, horizons[i]) - settle))
            for i in excess
            if pool_id in caps[i].pools
        }
        needed = [math.ceil((excess[i] - _EPS_USD) / v) for i, v in saves.items() if v > 0.0 and excess[i] > _EPS_USD]
        if not needed:
            continue
        n = min(count, max(needed))
        for i, value in saves.items():
            excess[i] -= n * value
        worst = next(i for i, v in saves.items() if v > 0.0)
        before = shed.get(pool_id)
        shed[pool_id] = Shed(
            pool_id,
            n + (before.units if before else 0),
            (n if level < _PROVISIONING else 0) + (before.idle_units if before else 0),
            caps[worst].budget,
            caps[worst].kind,
            n * max(saves.values()) + (before.saves_usd if before else 0.0),
            forced=stop,
            provisioning_units=(n if level == _PROVISIONING else 0) + (before.provisioning_units if before else 0),
        )
        if all(v <= _EPS_USD for v in excess.values()):
            break
    short: dict[tuple[str, CapKind], Shortfall] = {}
    for i, left in excess.items():
        keeping = tuple(sorted(p for p in caps[i].pools & held if _sheddable(pools.get(p), kept.get(p, 0))))
        if left <= _EPS_USD or not keeping:
            continue
        key = (caps[i].budget, caps[i].kind)
        if key not in short or short[key].usd < left:
            short[key] = Shortfall(caps[i].budget, caps[i].kind, left, keeping, forced=stop)
    return [shed[p] for p in sorted(shed)], [short[k] for k in sorted(short)]


def _deferred(
    now: datetime,
    caps: list[_Cap],
    pools: Mapping[str, PoolSpec],
    base: Mapping[str, int],
    targets: Mapping[str, int],
    settle: timedelta,
    unread: frozenset[str],
) -> tuple[DeferredStop, ...]:
    """The hard stops not started because a pool of their budget was not read (and has not been for less than the
    budget's ``unread_stop_wait``): those whose projection over the next two ticks, with the units kept, is over the
    cap."""
    prices = {p: s.price_per_unit_hour_usd for p, s in pools.items()}
    kept = {p: min(targets.get(p, base[p]), base[p]) for p in base}
    out = []
    for cap in caps:
        missing = sorted(cap.pools & unread)
        since = cap.unread_from(unread, now)
        if cap.crossing or cap.horizon is None or since is None or not cap.waits(unread, now):
            continue
        projected = project(cap.spent_usd, cap.period, now, sorted(cap.pools), kept, prices, base, settle, 2 * settle)
        if projected > cap.cap_usd + _EPS_USD:
            counted = tuple((p, base[p]) for p in missing)
            out.append(
                DeferredStop(cap.budget, cap.kind, projected - cap.cap_usd, counted, since, since + cap.stop_wait)
            )
    return tuple(out)


@dataclass(frozen=True)
class _Idleness:
    """Units observed idle per pool: ``settled`` for the release window, ``now`` at all (``now`` >= ``settled``); and
    units still provisioning, where a release takes those before ready ones (``provisioning``); and units billed that
    no release can take (``broken``)."""

    settled: Mapping[str, int]
    now: Mapping[str, int]
    provisioning: Mapping[str, int] = field(default_factory=dict)
    broken: Mapping[str, int] = field(default_factory=dict)


# how cheap a unit is to lose: idle for the window, idle now, still provisioning (serving nothing yet), busy
_SETTLED, _IDLE, _PROVISIONING, _BUSY = 0, 1, 2, 3
_Group = tuple[tuple[int, int, float, str], str, int]  # (rank, pool, units)


def _candidates(
    broken: list[_Cap],
    pools: Mapping[str, PoolSpec],
    base: Mapping[str, int],
    kept: Mapping[str, int],
    idle: _Idleness,
    held: frozenset[str],
) -> list[_Group]:
    """Groups of sheddable units (how cheap to lose, pool, how many), cheapest to lose first: every pool's units
    idle for the window, then those idle now, then those still provisioning (``_Idleness.provisioning``), then the
    busy ones; within each, by tier and price per chip. A pool in ``held`` has none: its units stay, so the broken
    caps must be held by the other pools."""
    members = sorted({p for cap in broken for p in cap.pools if p in pools and p not in held})
    groups: list[_Group] = []
    for pool_id in members:
        spec = pools[pool_id]
        releasable = kept[pool_id] - idle.broken.get(pool_id, 0)
        if not _sheddable(spec, releasable):
            continue
        sheddable = max(0, releasable - spec.min_units)
        already_released = base[pool_id] - kept[pool_id]  # the planner's own releases, the longest idle first
        settled = idle.settled.get(pool_id, 0)
        idle_now = max(idle.now.get(pool_id, 0), settled)
        settled_left = min(sheddable, max(0, settled - already_released))
        idle_left = min(
            sheddable - settled_left, max(0, idle_now - already_released) - max(0, settled - already_released)
        )
        left = sheddable - settled_left - idle_left
        provisioning = min(left, idle.provisioning.get(pool_id, 0))
        levels = (
            (_SETTLED, settled_left),
            (_IDLE, idle_left),
            (_PROVISIONING, provisioning),
            (_BUSY, left - provisioning),
        )
        rank = (-_TIER_SHED_RANK[spec.tier], -spec.price_per_chip_hour_usd, pool_id)
        groups.extend(((level, *rank), pool_id, count) for level, count in levels if count)
    return sorted(groups)


def _sheddable(spec: PoolSpec | None, units: int) -> bool:
    """Whether a release could save money in a pool holding ``units``: a priced burst pool above its minimum."""
    return (
        spec is not None
        and spec.kind is not PoolKind.ON_PREM
        and spec.price_per_unit_hour_usd > 0.0
        and units > spec.min_units
    )


_TIER_SHED_RANK = {
    CapacityTier.ON_DEMAND: 3,
    CapacityTier.SPOT: 2,
    CapacityTier.RESERVED: 1,
    CapacityTier.ON_PREM: 0,
}


def _hours(span: timedelta) -> float:
    return span.total_seconds() / 3600.0

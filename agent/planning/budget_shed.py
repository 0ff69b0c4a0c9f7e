"""What to release where a budget's cap is broken: the shed and the hard stop's forced release. Pure.

A shed (``shed_to_caps``) names burst units to release, cheapest to lose first, across the pools of the broken caps
(``_candidates``): units idle for the release window, then units idle now (for less), then units still provisioning
in a pool whose release takes those first, then busy ones; within each, on-demand before spot before reserved, then
the dearest per chip. Fixed (on-prem) pools, units at a pool's minimum, broken units and the units of a pool no
release may touch (``held``) are never named; what the others cannot cover is a ``Shortfall``. With ``stop``, the
hard stop of the caps that have a commit horizon, projected over the next two ticks only: what it names is
``Shed.forced``. ``agent.planning.enforcement`` says when each is asked for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from agent.planning.budget import CapKind, project
from agent.planning.budget_caps import EPS_USD, Cap, hours_in
from models import CapacityTier, PoolKind, PoolSpec


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


def shed_to_caps(
    now: datetime,
    caps: list[Cap],
    pools: Mapping[str, PoolSpec],
    base: Mapping[str, int],
    targets: Mapping[str, int],
    idle: Idleness,
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
        if (stop and not held_by_stop) or (not stop and cap.room_usd >= -EPS_USD):
            continue
        if stop and cap.waits(unread, now):  # not started on a guess yet: ``_deferred``
            continue
        horizons[i] = 2 * settle if stop else cap.horizon
        # the stop counts the other agents' units kept over its two ticks (their reservations run past them); each
        # counts what the others decided to release as shed already (``Cap.to_shed_from_usd``, ``Cap.staying_usd``)
        spent = cap.spent_usd + cap.staying_usd if stop else cap.to_shed_from_usd
        units = kept if stop else after_drains(kept, idle.draining)
        projected = project(spent, cap.period, now, sorted(cap.pools), units, prices, base, settle, horizons[i])
        if projected > cap.cap_usd + EPS_USD:
            excess[i] = projected - cap.cap_usd
    shed: dict[str, Shed] = {}
    for (level, *_), pool_id, count in _candidates([caps[i] for i in excess], pools, base, kept, idle, held):
        saves = {
            i: prices[pool_id] * hours_in(max(timedelta(0), caps[i].period.remaining(now, horizons[i]) - settle))
            for i in excess
            if pool_id in caps[i].pools
        }
        needed = [math.ceil((excess[i] - EPS_USD) / v) for i, v in saves.items() if v > 0.0 and excess[i] > EPS_USD]
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
        if all(v <= EPS_USD for v in excess.values()):
            break
    short: dict[tuple[str, CapKind], Shortfall] = {}
    for i, left in excess.items():
        keeping = tuple(sorted(p for p in caps[i].pools & held if _sheddable(pools.get(p), kept.get(p, 0))))
        if left <= EPS_USD or not keeping:
            continue
        key = (caps[i].budget, caps[i].kind)
        if key not in short or short[key].usd < left:
            short[key] = Shortfall(caps[i].budget, caps[i].kind, left, keeping, forced=stop)
    return [shed[p] for p in sorted(shed)], [short[k] for k in sorted(short)]


@dataclass(frozen=True)
class Idleness:
    """Units observed idle per pool: ``settled`` for the release window, ``now`` at all (``now`` >= ``settled``); and
    units still provisioning, where a release takes those before ready ones (``provisioning``); and units billed that
    no release can take (``broken``), of which ``draining`` are nodes being drained (``PoolState.draining_units``)."""

    settled: Mapping[str, int]
    now: Mapping[str, int]
    provisioning: Mapping[str, int] = field(default_factory=dict)
    broken: Mapping[str, int] = field(default_factory=dict)
    draining: Mapping[str, int] = field(default_factory=dict)


def after_drains(kept: Mapping[str, int], draining: Mapping[str, int]) -> dict[str, int]:
    """The units a shed projects each pool to bill after this tick: ``kept`` less its nodes being drained, which bill
    one more tick (``project``'s ``held``, as a release does and as the marks of units being released assume), not to
    the period's end: counted to its end, a release whose drains take several ticks was shed again at each (2 busy and
    6 idle units, 3 units over, drains of 3 ticks: 3, 3, 2 and 2 released, 2 units left where 5 were enough). A drain
    that ends without deleting its node (its timeout: uncordoned) gives the unit back to the pool, counted again from
    the next tick. The grant and the trim still count them billed to the period's end (``billed_after``): no scale-up
    is granted their room before they are gone. The hard stop does too: it holds a cap over its next two ticks, when a
    blocked drain may still bill. The figures the operator sees count them as the shed does (the snapshots' projection,
    the projected-overspend alert: ``agent.planning.enforcement``)."""
    return {pool_id: max(0, units - draining.get(pool_id, 0)) for pool_id, units in kept.items()}


# how cheap a unit is to lose: idle for the window, idle now, still provisioning (serving nothing yet), busy
_SETTLED, _IDLE, _PROVISIONING, _BUSY = 0, 1, 2, 3
_Group = tuple[tuple[int, int, float, str], str, int]  # (rank, pool, units)


def _candidates(
    broken: list[Cap],
    pools: Mapping[str, PoolSpec],
    base: Mapping[str, int],
    kept: Mapping[str, int],
    idle: Idleness,
    held: frozenset[str],
) -> list[_Group]:
    """Groups of sheddable units (how cheap to lose, pool, how many), cheapest to lose first: every pool's units
    idle for the window, then those idle now, then those still provisioning (``Idleness.provisioning``), then the
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

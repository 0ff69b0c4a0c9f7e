"""Pacing a burst budget over its month period, value-aware. Pure: ``now`` is always a parameter.

A budget whose ``pacing`` is ``forecast`` spends so that its money lasts the period. Each tick:

1. the burst need of each demand group now: its planned need above what the pools it fills before any pool a paced
   budget pays for take of it (``ahead_chips``): its on-prem pools (the units that can take work on them, read each
   tick; ``max_units`` where that read is missing) and any cheaper pool outside the paced budgets (a reserved pool),
   allocated among the groups as the planner allocates, so a pool shared by several groups is counted once, not in
   full for each, and demand a pool outside the budget serves first is not paced;
2. the period's remaining burst need of each group, in accelerator-hours: a seasonal profile of its burst need in
   history (the mean per hour of the day, UTC) summed over the hours left in the period;
3. the money left: the monthly cap minus what the period has spent so far;
4. the groups are funded in order of waiting cost, dearest first, at the cheapest per-chip price of the budget's
   cloud pools: groups whose whole remaining need the money still covers keep all of their burst need now; in the
   first tier of waiting cost it does not cover, every group keeps the same share, what the money covers of the
   tier's need; cheaper tiers keep none of it now.

So when money is scarce the cheapest waiting is trimmed first and the dearest last. Recomputed every tick from the
spend so far and the hours left, pacing corrects itself: money a forecast held back for later comes back to the
next tick's plan. The cap itself is still held by ``agent.planning.enforcement``, whatever the forecast says.
Without a profile for every group the budget touches (no history yet), nothing is trimmed here.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from agent.planning.budget import Budget, BudgetSpend
from agent.planning.groups import DemandGroup
from models import PoolKind, PoolSpec
from models.allocation import allocate

HOURS_A_DAY = 24


@dataclass(frozen=True)
class BurstProfile:
    """Mean burst need (chips above what the group's pools ahead of the paced ones take, ``ahead_chips``) per hour
    of the day, UTC (24 values), per demand group, from history."""

    hourly_chips: Mapping[str, tuple[float, ...]]

    def __post_init__(self) -> None:
        for name, values in self.hourly_chips.items():
            if len(values) != HOURS_A_DAY or any(math.isnan(v) or v < 0.0 for v in values):
                raise ValueError(f"burst profile of {name!r}: needs {HOURS_A_DAY} hourly values, none negative or NaN")

    def remaining(self, name: str, now: datetime, end: datetime) -> float:
        """Accelerator-hours the group's profile expects from ``now`` to ``end``."""
        values = self.hourly_chips[name]
        left = max(0.0, (end - now) / timedelta(hours=1))
        into_hour = (now.minute * 60 + now.second) / 3600.0
        first = min(left, 1.0 - into_hour)
        total = values[now.hour] * first
        left -= first
        days, rest = divmod(left, float(HOURS_A_DAY))
        total += days * sum(values)
        for k in range(math.ceil(rest)):
            total += values[(now.hour + 1 + k) % HOURS_A_DAY] * min(1.0, rest - k)
        return total


def funded_shares(
    remaining_usd: Mapping[str, float], money_usd: float, waiting_costs: Mapping[str, float]
) -> dict[str, float]:
    """The share (0..1) of each group's burst need the money funds, dearest waiting first. Groups whose waiting
    costs the same share what is left for them in proportion to their need: each gets the same share."""
    shares: dict[str, float] = {}
    left = max(0.0, money_usd)
    for tier in sorted({waiting_costs.get(n, 0.0) for n in remaining_usd}, reverse=True):
        names = [n for n in remaining_usd if waiting_costs.get(n, 0.0) == tier]
        cost = sum(max(0.0, remaining_usd[n]) for n in names)
        share = 1.0 if cost <= left else left / cost
        shares.update(dict.fromkeys(names, share))
        left = max(0.0, left - cost)
    return shares


def pace_needs(
    now: datetime,
    pools: Sequence[PoolSpec],
    groups: Sequence[DemandGroup],
    needs: Mapping[str, float],
    spends: Sequence[BudgetSpend],
    profile: BurstProfile | None,
    waiting_costs: Mapping[str, float],
    onprem_units: Mapping[str, int] | None = None,
    room: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """``needs`` (chips per group) with each group's burst part cut to the share its paced budgets fund.

    The burst part is what is above the group's part of the pools it fills before any pool a paced budget pays for
    (``ahead_chips``): its on-prem pools, shared with other groups as the planner shares them, and any pool outside
    the paced budgets cheaper than those (a reserved pool). An on-prem pool counts its units that can take work now
    (``onprem_units``, read each tick; a pool not in it, or every pool when it is not given: its ``max_units``), so
    demand that on-prem nodes down or cordoned cannot serve is paced as burst, never left to go to the cloud
    unfunded. ``room`` (chips per pool, as the planner fills them) overrides that for any pool it names."""
    paced = dict(needs)
    if profile is None:
        return paced
    by_id = {p.pool_id: p for p in pools}
    funded = paced_pools([s.budget for s in spends], by_id)
    priority = {g.name: max((waiting_costs.get(m, 0.0) for m in g.members), default=0.0) for g in groups}
    base = ahead_chips(needs, groups, by_id, _room(by_id, onprem_units or {}, room or {}), funded, priority)
    for spend in spends:
        budget = spend.budget
        if budget.pacing != "forecast" or budget.monthly_cap_usd is None:
            continue
        prices = [
            by_id[p].price_per_chip_hour_usd
            for p in budget.pools
            if p in by_id and by_id[p].kind is not PoolKind.ON_PREM and by_id[p].price_per_chip_hour_usd > 0.0
        ]
        touched = [g for g in groups if g.name in paced and g.pools & budget.pools]
        if not prices or not touched or any(g.name not in profile.hourly_chips for g in touched):
            continue
        end = budget.period(now).end
        price = min(prices)
        remaining = {g.name: profile.remaining(g.name, now, end) * price for g in touched}
        costs = {g.name: priority[g.name] for g in touched}
        shares = funded_shares(remaining, budget.monthly_cap_usd - spend.spent_period_usd, costs)
        for group in touched:
            ahead = base.get(group.name, 0.0)
            burst = max(0.0, paced[group.name] - ahead)
            paced[group.name] = min(paced[group.name], ahead + burst * shares[group.name])
    return paced


def paced_pools(budgets: Iterable[Budget], pools: Mapping[str, PoolSpec]) -> frozenset[str]:
    """The pools the budgets paced on a forecast pay for: their cloud pools (an on-prem pool is paid for already)."""
    return frozenset(
        p
        for b in budgets
        if b.pacing == "forecast" and b.monthly_cap_usd is not None
        for p in b.pools
        if p in pools and pools[p].kind is not PoolKind.ON_PREM
    )


def ahead_pools(group: DemandGroup, pools: Mapping[str, PoolSpec], paced: Collection[str] | None) -> frozenset[str]:
    """The pools ``group`` fills before any pool of ``paced`` (``paced_pools``): demand they take is not burst.
    On-prem pools fill first; a pool outside the paced budgets that fills later than the group's first paced pool
    takes only what is above the paced pools, so it is not ahead. ``paced`` None: every cloud pool is paced."""
    own = [pools[p] for p in sorted(group.pools) if p in pools]
    if paced is None:
        return frozenset(p.pool_id for p in own if p.kind is PoolKind.ON_PREM)
    keys = [p.fill_key for p in own if p.pool_id in paced]
    first = min(keys) if keys else None
    return frozenset(p.pool_id for p in own if p.pool_id not in paced and (first is None or p.fill_key < first))


def ahead_chips(
    needs: Mapping[str, float],
    groups: Sequence[DemandGroup],
    pools: Mapping[str, PoolSpec],
    room: Mapping[str, float],
    paced: Collection[str] | None,
    priority: Mapping[str, float],
) -> dict[str, float]:
    """The chips of each group's need its pools ahead of the paced ones (``ahead_pools``) take, with ``room`` chips
    in each pool, allocated as the planner allocates (``models.allocation.allocate``, dearest waiting first): a pool
    shared by several groups is counted once, split among them, never in full for each."""
    eligible = {g.name: ahead_pools(g, pools, paced) for g in groups if g.name in needs}
    used = sorted({p for ids in eligible.values() for p in ids})
    assigned = allocate(
        {n: needs[n] for n in eligible}, [pools[p] for p in used], {p: room.get(p, 0.0) for p in used}, eligible,
        priority,
    )  # fmt: skip
    got = dict.fromkeys(eligible, 0.0)
    for per_group in assigned.values():
        for name, chips in per_group.items():
            got[name] += chips
    return got


def _room(
    pools: Mapping[str, PoolSpec], onprem_units: Mapping[str, int], room: Mapping[str, float]
) -> dict[str, float]:
    """Chips each pool can take: ``room`` where given, else an on-prem pool's units that can work now (at most its
    ``max_units``; those where not read) and any other pool's ``max_units``."""
    out: dict[str, float] = {}
    for pool_id, pool in pools.items():
        units = pool.max_units
        if pool.kind is PoolKind.ON_PREM:
            units = min(pool.max_units, onprem_units.get(pool_id, pool.max_units))
        out[pool_id] = room.get(pool_id, float(units * pool.chips_per_unit))
    return out


def onprem_chips(group: DemandGroup, pools: Mapping[str, PoolSpec], units: Mapping[str, int] | None = None) -> float:
    """The on-prem capacity a group may use, in chips: each on-prem pool's ``units`` (those that can take work now),
    at most its ``max_units``; its ``max_units`` where they are not known."""
    known = units or {}
    return float(
        sum(
            min(pools[p].max_units, known.get(p, pools[p].max_units)) * pools[p].chips_per_unit
            for p in group.pools
            if p in pools and pools[p].kind is PoolKind.ON_PREM
        )
    )

"""Property tests: the agent's own actions never take projected (or recorded) spend over a cap."""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.ledger import InMemoryLedger
from agent.ledger.accrual import PoolReading
from agent.ledger.meter import SpendMeter
from agent.planning.budget import Budget, BudgetSpend, CapKind, Period, project
from agent.planning.enforcement import BudgetEnforcement, enforce_budgets
from models import AcceleratorFamily, CapacityTier, PoolKind, PoolSpec

EPS = 1e-6
TICK = timedelta(minutes=1)
START = datetime(2024, 3, 1, tzinfo=UTC)


# The strategies are built once and drawn from again: a strategy built anew at each draw is checked anew by
# hypothesis, which took about half the time a case took to draw. The cases drawn are the same.
_integers = functools.cache(st.integers)
_TIERS = st.sampled_from(list(CapacityTier))
_CLOUD_KINDS = st.sampled_from([PoolKind.GPU_NODE_POOL, PoolKind.TPU_SLICE_GROUP])
_PRICES = st.sampled_from([0.0, 1.5, 8.0, 29.36, 38.4])


@st.composite
def _pool_specs(draw: st.DrawFn, pool_id: str) -> PoolSpec:
    tier = draw(_TIERS)
    kind = PoolKind.ON_PREM if tier is CapacityTier.ON_PREM else draw(_CLOUD_KINDS)
    lo = draw(_integers(0, 3))
    hi = lo if kind is PoolKind.ON_PREM else draw(_integers(lo, lo + 12))
    chips = 32 if kind is PoolKind.TPU_SLICE_GROUP else 8
    family = AcceleratorFamily.TPU if kind is PoolKind.TPU_SLICE_GROUP else AcceleratorFamily.GPU
    price = draw(_PRICES)
    return PoolSpec(pool_id, kind, tier, family, chips, lo, hi, price, timedelta(minutes=10), ("c",))


pool_specs = functools.cache(_pool_specs)


@dataclass(frozen=True)
class Case:
    now: datetime
    pools: dict[str, PoolSpec]
    spends: list[BudgetSpend]
    billed: dict[str, int]
    proposed: dict[str, int]
    idle: dict[str, int]  # idle for the release window
    idle_now: dict[str, int]  # idle at all: at least those
    held: frozenset[str] = frozenset()  # pools no release may touch


_MONTHLY_CAPS = st.none() | st.floats(1.0, 200_000.0)
_HOURLY_CAPS = st.floats(1.0, 500.0)
_HOURLY_CAPS_OR_NONE = st.none() | _HOURLY_CAPS
_SPENT_IN_MONTH = st.floats(0.0, 150_000.0)
_SPENT_IN_HOUR = st.floats(0.0, 400.0)


@functools.cache
def _members(ids: tuple[str, ...]) -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(ids), min_size=1, unique=True)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    ids = [f"p{i}" for i in range(draw(_integers(1, 6)))]
    pools = {p: draw(pool_specs(p)) for p in ids}
    now = START + timedelta(minutes=draw(_integers(0, 60 * 24 * 30)))
    billed = {p: draw(_integers(s.min_units, s.max_units)) for p, s in pools.items()}
    proposed = {p: draw(_integers(s.min_units, s.max_units)) for p, s in pools.items() if draw(st.booleans())}
    idle = {p: draw(_integers(0, billed[p])) for p in ids}
    idle_now = {p: draw(_integers(idle[p], billed[p])) for p in ids}
    held = frozenset(p for p in ids if draw(_integers(0, 3)) == 0)
    spends = []
    for i in range(draw(_integers(1, 3))):
        members = frozenset(draw(_members(tuple(ids))))
        monthly = draw(_MONTHLY_CAPS)
        hourly = draw(_HOURLY_CAPS) if monthly is None else draw(_HOURLY_CAPS_OR_NONE)
        budget = Budget(f"b{i}", members, monthly, hourly)
        spends.append(BudgetSpend(budget, now, draw(_SPENT_IN_MONTH), draw(_SPENT_IN_HOUR)))
    return Case(now, pools, spends, billed, proposed, idle, idle_now, held)


def cap_checks(case: Case) -> list[tuple[BudgetSpend, Period, float, float]]:
    """(spend, period, cap, spent) for every cap, plus the next hour of each hourly cap."""
    out = []
    for spend in case.spends:
        for kind, period, cap in spend.budget.caps(case.now):
            out.append((spend, period, cap, spend.spent(kind)))
            if kind is CapKind.HOUR:
                out.append((spend, Period(period.end, period.end + timedelta(hours=1)), cap, 0.0))
    return out


def run(case: Case) -> BudgetEnforcement:
    return enforce_budgets(
        case.now,
        case.spends,
        case.pools,
        case.billed,
        case.proposed,
        case.idle,
        TICK,
        idle_now=case.idle_now,
        held=case.held,
    )


@settings(max_examples=300, deadline=None)
@given(cases())
def test_granted_scale_ups_never_take_a_projection_over_its_cap(case: Case) -> None:
    out = run(case)
    prices = {p: s.price_per_unit_hour_usd for p, s in case.pools.items()}
    for spend, period, cap, spent in cap_checks(case):
        pools = sorted(spend.budget.pools)
        before = project(spent, period, case.now, pools, case.billed, prices)
        # Releases are not counted: what the cap must survive is every granted scale-up with nothing released.
        after_units = {p: max(case.billed[p], out.targets.get(p, case.billed[p])) for p in case.pools}
        after = project(spent, period, case.now, pools, after_units, prices)
        if before <= cap + EPS:
            assert after <= cap + 1e-5, (spend.budget.name, period, before, after, cap)
        else:  # a broken cap grants nothing that costs money
            assert all(out.targets.get(p, case.billed[p]) <= case.billed[p] for p in pools if prices[p] > 0)


@settings(max_examples=300, deadline=None)
@given(cases())
def test_targets_stay_between_what_is_billed_and_what_was_proposed(case: Case) -> None:
    out = run(case)
    assert set(out.targets) == set(case.proposed)
    for pool, target in out.targets.items():
        spec, wanted, billed = case.pools[pool], case.proposed[pool], case.billed[pool]
        assert spec.min_units <= target <= spec.max_units
        assert target == wanted if wanted <= billed else billed <= target <= wanted
    trimmed = {t.pool_id for t in out.trims}
    assert trimmed == {s.pool_id for s in out.skips}
    assert all(s.reason == "budget" and "budget 'b" in s.detail for s in out.skips)


@settings(max_examples=300, deadline=None)
@given(cases())
def test_shedding_spares_fixed_pools_minimums_and_held_pools_and_clears_the_overrun_when_it_can(case: Case) -> None:
    out = run(case)
    for shed in out.shed:
        assert shed.pool_id not in case.held
        spec = case.pools[shed.pool_id]
        kept = min(case.proposed.get(shed.pool_id, case.billed[shed.pool_id]), case.billed[shed.pool_id])
        assert spec.kind is not PoolKind.ON_PREM
        assert 0 < shed.units <= kept - spec.min_units
        assert 0 <= shed.idle_units <= min(shed.units, case.idle_now[shed.pool_id])
    if not out.overspends:
        assert out.shed == ()
    prices = {p: s.price_per_unit_hour_usd for p, s in case.pools.items()}
    final = {p: min(case.billed[p], out.targets.get(p, case.billed[p])) for p in case.pools}
    for shed in out.shed:
        final[shed.pool_id] -= shed.units
    for spend, period, cap, spent in cap_checks(case):
        pools = sorted(spend.budget.pools)
        after = project(spent, period, case.now, pools, final, prices, case.billed, TICK)
        floor = {p: case.pools[p].min_units if prices[p] > 0 and p not in case.held else final[p] for p in case.pools}
        floor_cost = project(spent, period, case.now, pools, floor, prices, case.billed, TICK)
        if after > cap + 1e-5:
            # Still over: then nothing more could be shed (all at the floor or held, or too late in the period to
            # save), and the held pools that keep units a release could have taken are named.
            assert after <= floor_cost + 1e-5
            keeping = {
                p for p in spend.budget.pools & case.held if prices[p] > 0 and final[p] > case.pools[p].min_units
            }
            keeping -= {p for p in keeping if case.pools[p].kind is PoolKind.ON_PREM}
            named = {p for s in out.shortfalls if s.budget == spend.budget.name and not s.forced for p in s.held}
            assert keeping <= named


@settings(max_examples=200, deadline=None)
@given(cases(), st.data())
def test_no_release_names_a_pool_not_read_and_no_hard_stop_starts_in_its_budget(
    case: Case, data: st.DataObject
) -> None:
    unread = set(data.draw(st.lists(st.sampled_from(sorted(case.pools)), unique=True)))
    billed = {p: n for p, n in case.billed.items() if p not in unread}
    # each monthly cap held by a hard stop, with its spend close to the cap: the money left pays for a few
    # unit-ticks or none
    capped = [(s.budget, s.budget.monthly_cap_usd) for s in case.spends if s.budget.monthly_cap_usd is not None]
    spends = [
        BudgetSpend(
            Budget(b.name, b.pools, cap, commit_horizon=timedelta(hours=2)),
            case.now,
            cap - data.draw(st.floats(-5.0, 20.0)),
            0.0,
        )
        for b, cap in capped
    ]
    out = enforce_budgets(case.now, spends, case.pools, billed, {}, case.idle, TICK, idle_now=case.idle_now)
    by_name = {s.budget.name: s.budget for s in spends}
    assert not any(s.pool_id in unread for s in out.shed)
    assert not any(s.forced and by_name[s.budget].pools & unread for s in out.shed)
    for deferred in out.deferred:
        assert {p for p, _ in deferred.unread} <= unread
        # nothing recorded nor read before: an on-prem pool at its max_units, any other not known (None)
        fixed = {p for p, spec in case.pools.items() if spec.kind is PoolKind.ON_PREM}
        assert all(units == (case.pools[p].max_units if p in fixed else None) for p, units in deferred.unread)


@settings(max_examples=100, deadline=None)
@given(cases())
def test_the_same_inputs_give_the_same_decision(case: Case) -> None:
    shuffled = Case(
        case.now,
        dict(reversed(case.pools.items())),
        list(reversed(case.spends)),
        dict(reversed(case.billed.items())),
        dict(reversed(case.proposed.items())),
        dict(reversed(case.idle.items())),
        dict(reversed(case.idle_now.items())),
        case.held,
    )
    assert run(case) == run(shuffled)


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_recorded_spend_never_exceeds_a_cap_over_hours_of_ticks(data: st.DataObject) -> None:
    """The loop in miniature: observe, record, enforce, act, record again; random proposals and spot losses."""
    ids = [f"p{i}" for i in range(data.draw(st.integers(1, 4)))]
    pools = {p: data.draw(pool_specs(p)) for p in ids}
    prices = {p: s.price_per_unit_hour_usd for p, s in pools.items()}
    floor_rate = sum(s.min_units * prices[p] for p, s in pools.items())
    # Caps the fixed floor fits under (else the floor, not the agent, breaks them), tight enough to bind.
    hourly = floor_rate + data.draw(st.floats(1.0, 400.0))
    monthly = floor_rate * 24 * 31 + data.draw(st.floats(1.0, 3 * hourly))
    budget = Budget("b", frozenset(ids), monthly_cap_usd=monthly, hourly_cap_usd=hourly)
    rng = random.Random(data.draw(st.integers(0, 2**32 - 1)))
    now = datetime(2024, 3, 31, 21, tzinfo=UTC) + timedelta(minutes=data.draw(st.integers(0, 59)))
    ledger = InMemoryLedger()
    meter = SpendMeter(ledger, timedelta(minutes=5))
    billed = {p: s.min_units for p, s in pools.items()}
    for _ in range(150):
        meter.observe(PoolReading(p, now, billed[p], prices[p]) for p in ids)
        spend = meter.budget_spend([budget], now)
        proposed = {p: rng.randint(s.min_units, s.max_units) for p, s in pools.items() if rng.random() < 0.7}
        out = enforce_budgets(now, spend, pools, billed, proposed, {}, TICK)
        billed.update(out.targets)
        for shed in out.shed:
            billed[shed.pool_id] -= shed.units
        meter.observe(PoolReading(p, now, billed[p], prices[p]) for p in ids)
        for p, s in pools.items():  # spot losses, at random
            if s.tier is CapacityTier.SPOT and billed[p] > s.min_units and rng.random() < 0.05:
                billed[p] -= 1
        now += TICK
        meter.observe(PoolReading(p, now, billed[p], prices[p]) for p in ids)
        for kind, period, cap in budget.caps(now - timedelta(microseconds=1)):
            spent = ledger.spent(ids, period.start, now)
            assert spent <= cap + 1e-6, (kind, period, spent, cap)

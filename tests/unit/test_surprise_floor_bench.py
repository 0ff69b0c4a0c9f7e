"""The floors of ``bench/bench_surprise_floor.py`` on hand-made demand whose schedules can be worked out by hand."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from agent.simulation.oracle import oracle_schedule
from bench.bench_surprise_floor import excess_by_time_since_fall
from bench.perfect_foresight import perfect_foresight, unit_layers
from bench.surprise_pools import PoolDemand, pool_demands
from bench.unseen_jumps import (
    blind_curve,
    blind_run,
    duration_curves,
    flat_steps_before,
    jump_rates,
    learned_standby,
    surprises,
    unchanged_for,
)

STEP = timedelta(hours=1)  # one-hour steps: a chip for a step is a chip-hour


def _trace(demand: list[float], lead_steps: int = 2, max_units: int = 4) -> PoolDemand:
    values = np.array(demand, dtype=float)
    return PoolDemand(
        demand=values,
        required=np.ceil(np.nan_to_num(values) / 10).astype(int),
        chips_per_unit=10,
        lead_steps=lead_steps,
        unit_step_usd=1.0,
        max_units=max_units,
    )


def test_a_jump_after_a_flat_stretch_is_a_surprise_and_one_after_a_gap_is_not() -> None:
    required = np.array([0, 0, 0, 0, 2, 2, 2, 2, 0, 0, 3])
    observed = np.ones(len(required))
    flat = flat_steps_before(required, observed, 2)
    assert flat.tolist() == [False, False, True, True, False, False, True, True, False, False, False]
    assert surprises(required, flat).tolist() == [3]
    observed[2] = 0.0  # a gap inside the stretch: nothing says the need was unchanged
    assert surprises(required, flat_steps_before(required, observed, 2)).tolist() == []


def test_jumps_are_counted_by_how_long_the_need_had_been_unchanged() -> None:
    series = _trace([10, 10, 10, 20, 20, 20, 20, 20, 30])  # need 1, 1, 1, 2, 2, 2, 2, 2, 3
    observed = np.ones(9)
    longer = np.iinfo(np.int64).max
    # unchanged for 1-2 steps: 4 such steps, one followed by a jump; for 3 or more: 2 steps, one jump
    assert jump_rates([series], observed, [1, 3]) == [(1, 3, 4, 1), (3, longer, 2, 1)]
    observed[5] = 0.0  # a gap: the stretch starts again after it, and the last jump comes after 1 step
    assert jump_rates([series], observed, [1, 3]) == [(1, 3, 4, 2), (3, longer, 0, 0)]


def test_standby_by_time_unchanged_is_held_only_where_the_jumps_come() -> None:
    # need 1 for 4 steps, a jump to 2 after 3 unchanged steps, 2 for 8 steps, then 1 for 8 steps
    series = _trace([10.0] * 4 + [20.0] * 8 + [10.0] * 8, lead_steps=2)
    observed = np.ones(20)
    assert unchanged_for(series.required, observed).tolist() == [0, 1, 2, 3, *range(8), *range(8)]
    flat_mask = flat_steps_before(series.required, observed, 2)
    events = surprises(series.required, flat_mask)
    assert events.tolist() == [3]
    base, curves = duration_curves(series, 2, STEP, observed, [2, 4])
    assert base == blind_run(series, flat_mask, events, 0, STEP, observed)[0]
    assert set(curves) == {2}  # unchanged 4 steps or longer: no jump ever came, so no standby is offered there
    (span,) = curves.values()
    assert span.unserved[0.0] > 0.0 and span.unserved[1.0] == 0.0
    uniform = blind_run(series, flat_mask, events, 1, STEP, observed)[0] - base  # standby through every flat step
    assert 0.0 < span.cost[1.0] < uniform


def test_a_blind_schedule_is_late_by_a_lead_time_unless_standby_was_held() -> None:
    # Need 0 units for four steps, then 2; lead 2 steps. The oracle pays 2 units from step 2: 12 unit-steps.
    trace = _trace([0, 0, 0, 0, 20, 20, 20, 20])
    observed = np.ones(8)
    flat = flat_steps_before(trace.required, observed, 2)  # steps 2, 3, 6, 7
    events = surprises(trace.required, flat)
    assert int(oracle_schedule(trace.required, 2 * STEP, STEP).sum()) == 12
    # Blind, no standby: the jump at step 4 is seen then, so units are ready at step 6; steps 4-5 miss 40 chips,
    # and the lead time before the jump is not paid: 2 units for steps 4-7.
    assert blind_run(trace, flat, events, 0, STEP, observed) == (8.0, 40.0)
    # One standby unit on every flat step: ready 1 unit at steps 4-5 (20 chips missed); paid 0,0,1,1,2,2 and then
    # 3 on the flat steps 6-7 (need 2 plus the standby unit): 12 unit-steps.
    assert blind_run(trace, flat, events, 1, STEP, observed) == (12.0, 20.0)
    curve, jumps, unseen = blind_curve(trace, 2, STEP, observed)
    assert (jumps, unseen) == (1, 40.0)
    assert curve.cost == {0.0: 8.0, 1.0: 12.0, 2.0: 16.0}  # two standby units: the oracle's 12, and 4 more at 6-7
    assert curve.unserved == {0.0: 40.0, 1.0: 20.0, 2.0: 0.0}


def test_perfect_foresight_serves_a_spike_only_when_unserved_demand_is_priced_above_its_units() -> None:
    # One unit, lead 1 step: serving the 10-chip spike at step 3 pays steps 2 and 3 (2 USD); missing it leaves 10
    # chip-hours unserved.
    layers = np.array([[0.0, 0.0, 0.0, 10.0, 0.0, 0.0]])
    args = (layers, np.array([1.0]), np.array([1]), np.array([False]), np.ones(6), 1.0)
    assert perfect_foresight(*args, price=1.0) == (2.0, 0.0)
    assert perfect_foresight(*args, price=0.1) == (0.0, 10.0)


def test_perfect_foresight_that_leaves_nothing_unserved_costs_what_the_oracle_does() -> None:
    rng = np.random.default_rng(5)
    demand = np.repeat(rng.choice([0.0, 5.0, 15.0, 38.0], size=40), rng.integers(1, 4, size=40))
    trace = _trace(demand.tolist(), lead_steps=3)
    observed = np.ones(len(demand))
    observed[10:12] = 0.0  # gap steps are not billed, by either
    layers, prices, leads, start = unit_layers([trace])
    cost, unserved = perfect_foresight(layers, prices, leads, start, observed, 1.0, price=1e6)
    oracle = float((oracle_schedule(trace.required, 3 * STEP, STEP) * observed).sum())
    assert unserved == 0.0
    assert cost == pytest.approx(oracle)


def test_the_cost_above_the_oracle_is_split_by_the_time_since_its_units_last_fell() -> None:
    # Two steps an hour. The oracle falls from 2 to 0 at step 2; the policy holds 1 unit more than it throughout.
    oracle = np.array([2, 2, 0, 0, 0, 0, 0, 0, 0, 0], dtype=float)
    paid = oracle + 1
    observed = np.ones(10)
    observed[9] = 0.0  # a gap step is not billed
    # Steps 2-4 are within an hour of the fall, 5-8 one to three hours after; steps 0-1 come before any fall.
    assert excess_by_time_since_fall(paid, oracle, observed, steps_per_hour=2.0) == (3.0, 4.0, 2.0)


def test_a_pool_for_all_classes_carries_their_summed_demand() -> None:
    root = Path(__file__).resolve().parents[2]
    pools, observed, step, demanded = pool_demands(
        str(root / "config/examples/helios-earth.yaml"), str(root / "data/helios-earth/demand_5min.csv.gz")
    )
    (pool,) = pools.values()
    assert step == timedelta(minutes=5)
    gaps = observed == 0
    assert np.isnan(pool.demand[gaps]).all()
    assert not np.isnan(pool.demand[~gaps]).any()
    assert float(pool.demand[~gaps].sum()) * 5 / 60 == pytest.approx(demanded)
    assert (pool.required[~gaps] == np.ceil(pool.demand[~gaps] / pool.chips_per_unit - 1e-9)).all()
    assert (pool.lead_steps, pool.chips_per_unit) == (2, 8)


def test_standby_learned_on_a_first_half_like_the_second_costs_there_what_hindsight_would() -> None:
    # Each half: four flat steps at 0, then 2 units for four steps; lead 2 steps. Meeting 1% unserved takes both
    # standby units on each half, so the first half's choice is the second half's own.
    one = [0.0, 0.0, 0.0, 0.0, 20.0, 20.0, 20.0, 20.0]
    pools = {"p": _trace(one + one)}
    observed = np.ones(16)
    kept = learned_standby(pools, observed, STEP, flat=2, target=0.01)
    assert kept is not None
    reached, cost, floor = kept
    assert reached == 0.0
    assert floor == pytest.approx(cost)
    # with both standby units the second half pays the oracle's 12 unit-steps plus 4 on its flat steps 6-7
    assert cost == pytest.approx(16 / 12)

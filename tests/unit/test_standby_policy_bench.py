"""The standby replay and choices of ``bench/bench_standby_policy.py`` on hand-made demand whose runs can be counted
by hand, and the replay against the simulator's reactive run on a small trace."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import yaml

from agent.simulation import run_policy, select_window
from agent.sources.trace import read_trace
from bench.standby_choice import causal_tables, families, hull_cost
from bench.standby_pools import configurations, load, reactive_replay, replay_all
from bench.standby_sim import N_BUCKETS, buckets, simulate
from config import load_settings
from tests.conftest import TraceWriter


def _replay(
    need: list[int],
    tables: list[int],
    lead: int,
    hold: int,
    start: int = 0,
    day_of: list[int] | None = None,
    gaps: tuple[int, ...] = (),
) -> tuple[np.ndarray, np.ndarray]:
    """One pool of 10-chip units whose demand is exactly its need, one row per standby (the same in every bucket)."""
    steps = len(need)
    days = day_of if day_of is not None else [0] * steps
    observed = np.ones(steps, dtype=bool)
    observed[list(gaps)] = False
    return simulate(
        np.array(need),
        np.array(need, dtype=float) * 10,
        observed,
        np.zeros(steps, dtype=np.int64),
        np.array([[[s] * N_BUCKETS] for s in tables]),
        np.array(days),
        lead,
        hold,
        10,
        10,
        np.full(len(tables), start),
        max(days) + 1,
    )


def test_the_bucket_is_how_long_the_need_has_been_unchanged_and_whether_it_last_fell() -> None:
    need = np.array([1, 1, 1, 1, 2, 2, 0, 0, 0, 0])
    observed = np.ones(10, dtype=bool)
    # unchanged for 0, 1, 2, 3, 0, 1, 0, 1, 2, 3 steps; base 2: under 2 steps is bucket 0, 2-3 bucket 1
    assert buckets(need, observed, 2, dropped=False).tolist() == [0, 0, 1, 1, 0, 0, 0, 0, 1, 1]
    # the fall at step 6 puts the two steps after it in bucket 6; the rise at step 4 leaves its steps in bucket 0
    assert buckets(need, observed, 2, dropped=True).tolist() == [0, 0, 1, 1, 0, 0, 6, 6, 1, 1]
    observed[6] = False  # a gap: the stretch starts again after it, and the need's last change is not known
    assert buckets(need, observed, 2, dropped=True).tolist() == [0, 0, 1, 1, 0, 0, 0, 0, 0, 1]
    # base 1 step: 1 step is bucket 1, 2-3 bucket 2, 4-7 bucket 3, 8-15 bucket 4, 16 or more bucket 5
    flat = buckets(np.zeros(20, dtype=int), np.ones(20, dtype=bool), 1, dropped=True)
    assert flat.tolist() == [0, 1, 2, 2, *[3] * 4, *[4] * 8, *[5] * 4]


def test_a_jump_is_late_by_a_lead_time_less_the_standby_held_before_it() -> None:
    # Need 0 for three steps, 2 for three, then 0; lead 2 steps, hold 1 step. The tick at a step sees the step
    # before it. Standby 0: the jump at step 3 is asked for at step 4 and ready at step 6, so steps 3-5 miss 20
    # chips each; 2 units are paid at steps 4-6 and released at step 7, idle since step 6.
    # Standby 1: one unit asked for at step 1, ready at step 3; steps 3-5 miss 10 chips each; paid 0, 1, 1, 1,
    # then 3 at steps 4-6, and 1 at step 7 (two released after their hold, the standby unit kept).
    paid, short = _replay([0, 0, 0, 2, 2, 2, 0, 0], [0, 1], lead=2, hold=1, day_of=[0] * 4 + [1] * 4)
    assert paid.tolist() == [[0, 6], [3, 10]]
    assert short.tolist() == [[20, 40], [10, 20]]


def test_a_fall_seen_before_units_arrive_cancels_them_first_and_ready_units_after_their_hold() -> None:
    # Two units ready; the need rises to 4 at step 2 (asked for at step 3, due at step 6, lead 3) and falls to 0
    # at step 3. At step 4 the two ready units have been idle one step (the hold): two units may go, and they are
    # the two in flight; at step 5 the ready ones go. The need of 2 from step 5 is asked for at step 6, due at 9.
    paid, short = _replay([2, 2, 4, 0, 0, 2, 2, 2, 2], [0], lead=3, hold=1, start=2)
    assert paid.tolist() == [[2 + 2 + 2 + 4 + 2 + 0 + 2 + 2 + 2]]
    assert short.tolist() == [[20 + 20 * 4]]  # step 2 (4 needed, 2 ready), then steps 5-8 with none ready


def test_idle_units_start_their_hold_again_after_a_gap() -> None:
    # Two idle units, hold 2 steps: idle at steps 0 and 1, they go at the tick of step 2. With a gap at step 1 they
    # are idle at step 0, then again from step 2, and go at the tick of step 4. The gap step is not billed: 2
    # units paid at steps 0, 2 and 3.
    assert _replay([0] * 5, [0], lead=1, hold=2, start=2)[0].tolist() == [[2 + 2]]
    assert _replay([0] * 5, [0], lead=1, hold=2, start=2, gaps=(1,))[0].tolist() == [[2 + 2 + 2]]


def test_the_families_of_rules_are_counted_as_their_choices() -> None:
    configs = configurations(1)
    assert configs.shape == (2**N_BUCKETS, N_BUCKETS)
    counts = {label: int(mask.sum()) for label, mask in families(configs).items()}
    # one standby: all 0 or all 1; by time unchanged: the fall's bucket copies bucket 0 (2**6); never more for
    # longer: 1s then 0s over the six buckets of time unchanged (7 ways)
    assert counts == {
        "one standby per pool": 2,
        "by time unchanged": 64,
        "by time unchanged, and after a fall": 128,
        "by time unchanged, never more for longer": 7,
    }


def test_one_price_per_unserved_chip_hour_mixes_the_pools_choices_on_the_hull() -> None:
    # Pool a: nothing (10 unserved) or 5 USD (none); pool b: nothing (4 unserved) or 1 USD (none). Of 100 demanded,
    # 5% unserved: b's unit is cheaper per chip-hour (0.25 USD) than a's (0.5), so the hull runs from (1 USD, 10%)
    # to (6 USD, 0%): 3.5 USD at 5%, where the only fixed choice that meets it pays 6.
    costs = [np.array([0.0, 5.0]), np.array([0.0, 1.0])]
    shorts = [np.array([10.0, 0.0]), np.array([4.0, 0.0])]
    assert hull_cost(costs, shorts, 100.0, 0.05) == pytest.approx(3.5)
    assert hull_cost(costs, shorts, 100.0, 0.10) == pytest.approx(1.0)
    assert hull_cost(costs, [np.array([10.0, 10.0]), shorts[1]], 100.0, 0.05) is None


def test_the_hindsight_choice_is_never_dearer_than_a_fixed_rule_that_meets_the_same_target() -> None:
    rng = np.random.default_rng(3)
    observed = np.ones(600, dtype=bool)
    series = {}
    for name in ("a", "b"):
        need = np.repeat(rng.choice([0, 1, 2, 4], size=150), rng.integers(4, 16, size=150))[:600]
        series[name] = need
    configs = configurations(1)
    costs, shorts = [], []
    for need in series.values():
        paid, missed = simulate(
            need,
            need * 10.0,
            observed,
            buckets(need, observed, 3, dropped=True),
            configs[:, None, :],
            np.zeros(600, dtype=np.int64),
            3,
            4,
            8,
            10,
            np.zeros(len(configs), dtype=np.int64),
            1,
        )
        costs.append(paid[:, 0])
        shorts.append(missed[:, 0])
    demanded = float(sum(need.sum() * 10.0 for need in series.values()))
    # the least cost among the fixed pairs of rules (one per pool) that meet each target
    pairs = [
        (costs[0][i] + costs[1][j], shorts[0][i] + shorts[1][j]) for i, j in itertools.product(range(128), repeat=2)
    ]
    least = min(u for _, u in pairs) / demanded  # what the rules with the most standby leave unserved
    assert least > 0
    for target in (least * 1.2, least * 2, least * 4):
        fixed = min(c for c, u in pairs if u / demanded <= target)
        found = hull_cost(costs, shorts, demanded, target)
        assert found is not None
        assert found <= fixed + 0.01  # the hull rounds to cents
        assert found < costs[0].max() + costs[1].max()  # not merely the dearest rule


def test_the_rule_for_a_day_is_chosen_on_the_days_before_it_only() -> None:
    # One pool, two rules: no standby (free, misses 5 chip-steps on day 1) and one unit everywhere (10 USD a day,
    # misses nothing). 100 chip-steps demanded a day; target 1% of the history.
    configs = np.array([[0] * N_BUCKETS, [1] * N_BUCKETS])
    cost = {"p": np.array([[0.0] * 4, [10.0] * 4])}
    short = {"p": np.array([[0.0, 5.0, 0.0, 0.0], [0.0] * 4])}
    demanded = np.full(4, 100.0)
    tables = causal_tables(cost, short, configs, demanded, 1, 4, 0.01, 0.0)
    # day 1 judged on day 0 (nothing missed): no standby; days 2-3 on history with 5 of 200, then of 300, missed
    assert tables["p"][:, 0].tolist() == [0, 0, 1, 1]
    short["p"][0, 3] = 50.0  # what happens on day 3 is not known before it
    assert causal_tables(cost, short, configs, demanded, 1, 4, 0.01, 0.0)["p"][:, 0].tolist() == [0, 0, 1, 1]
    short["p"][0, 1] = 0.0
    assert causal_tables(cost, short, configs, demanded, 1, 4, 0.01, 0.0)["p"][:, 0].tolist() == [0, 0, 0, 0]


def _slices_config(tmp_path: Path) -> Path:
    pools = [
        {
            "id": f"slices-{name}",
            "kind": "tpu-slice-group",
            "tier": "on-demand",
            "family": "tpu",
            "chips_per_unit": 32,
            "min_units": 0,
            "max_units": 6,
            "price_per_chip_hour_usd": 1.2,
            "lead_time": "15m",
            "serves": [name],
        }
        for name in ("a", "b")
    ]
    document = {
        "demand_classes": [{"name": "a", "family": "tpu"}, {"name": "b", "family": "tpu"}],
        "pools": pools,
        "forecast": {"model": "last-value"},
    }
    path = tmp_path / "slices.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_the_replay_without_headroom_is_the_simulators_reactive_run(write_trace: TraceWriter, tmp_path: Path) -> None:
    # A week of history and a day of window, demand jumping between levels every 20 minutes to 2 hours, with a gap.
    rng = np.random.default_rng(11)
    steps = 8 * 288
    demand = {}
    for name in ("a", "b"):
        values = np.repeat(rng.choice([0.0, 20.0, 40.0, 70.0, 130.0], size=steps), rng.integers(4, 24, size=steps))
        demand[name] = values[:steps].tolist()
    demand["a"][7 * 288 + 100] = float("nan")
    trace_path = write_trace(demand)
    config = _slices_config(tmp_path)
    loaded = load(str(config), str(trace_path))
    assert loaded.first == 7 * 288
    assert {s.lead for s in loaded.series.values()} == {3}
    settings = load_settings(config)
    trace = read_trace(trace_path)
    window = select_window(trace, settings.demand_class_models(), None, None)
    reactive = run_policy(settings, trace, window, "reactive")
    assert reactive.unserved_accelerator_hours > 0  # the jumps are late: the comparison covers unserved demand
    cost, unserved = reactive_replay(loaded, 0)
    assert cost == pytest.approx(reactive.cost_usd)
    assert unserved == pytest.approx(reactive.unserved_accelerator_hours)
    assert loaded.oracle_usd == pytest.approx(run_policy(settings, trace, window, "oracle").cost_usd)
    # more headroom costs more and leaves less unserved
    more_cost, less_unserved = reactive_replay(loaded, 1)
    assert more_cost > cost and less_unserved < unserved


def test_every_rule_is_replayed_over_history_and_window_by_day(write_trace: TraceWriter, tmp_path: Path) -> None:
    # a: 2 slices needed for 80 minutes every 3 hours; b: 1 slice throughout
    demand = {"a": ([0.0] * 20 + [64.0] * 16) * 8 * 8, "b": [32.0] * 288 * 8}
    loaded = load(str(_slices_config(tmp_path)), str(write_trace(demand)))
    configs = np.array([[0] * N_BUCKETS, [0, 0, 1, 0, 0, 0, 0]])  # none, or 1 slice at 1-2 hours unchanged
    cost, short = replay_all(loaded.series, loaded.observed, 6, 12, configs, 8)
    a, b = "slices-a", "slices-b"
    assert cost[b].shape == (2, 8)
    # b needs one slice throughout, from the start: never short, and one slice paid every step with no standby
    assert not short[b].any()
    assert cost[b][0].tolist() == pytest.approx([288 * 32 * 1.2 / 12] * 8)
    # a's slices, idle for 100 minutes, go after the hour's hold, so with no standby each of the 8 jumps a day is
    # seen a step late and served a lead time (3 steps) after that: 4 steps of 64 chips unserved
    assert short[a][0].tolist() == [8 * 4 * 64] * 8
    # with a standby slice asked for once the need has been 0 for an hour (12 steps, after the hour's hold let the
    # 2 slices go), one slice is ready when the need jumps 20 steps after its fall: 32 chips unserved a step
    assert short[a][1].tolist() == [8 * 4 * 32] * 8
    assert (cost[a][1] > cost[a][0]).all()

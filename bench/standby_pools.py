"""The pools of a configuration on a trace as the standby benchmark (``bench.bench_standby_policy``) replays them,
and their replays: every standby table on every day, tables that change from day to day, and the reactive
autoscaler. Each pool serves one demand class alone; ``bench.standby_sim`` replays the rule.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from agent.simulation import select_window
from agent.simulation.oracle import oracle_schedule
from agent.simulation.window import SimulationWindow, initial_units, required_units
from agent.sources.trace import read_trace
from bench.standby_sim import N_BUCKETS, buckets, simulate
from config import load_settings

DAY_STEPS = 288  # of five minutes
REACTIVE_HOLD = 2  # steps: the reactive autoscaler releases a unit after 10 idle minutes


@dataclass(frozen=True)
class Series:
    """One pool (serving one class) over the trace's history and the window: demand (chips, NaN on gaps), units
    needed per step, the unit's size, its price per step, the lead time in steps, the most units it may hold, and
    the units ready at the history's first step."""

    demand: np.ndarray
    need: np.ndarray
    chips: int
    unit_step_usd: float
    lead: int
    max_units: int
    start: int


@dataclass(frozen=True)
class Loaded:
    """The pools of a configuration on a trace: ``series`` over history and window, steps at which every class
    has a value (``observed``), the window's first step among them (``first``), hours per step, what the oracle
    pays on the window as the simulator bills it, and the units the simulator starts every policy with."""

    series: dict[str, Series]
    observed: np.ndarray
    first: int
    hours: float
    oracle_usd: float
    initial: dict[str, int]
    window: SimulationWindow


def load(config: str, trace_path: str) -> Loaded:
    """Read a configuration whose every pool serves one demand class alone, and its trace's default window."""
    settings = load_settings(config)
    pools = settings.pool_specs()
    window = select_window(read_trace(trace_path), settings.demand_class_models(), None, None)
    demand = np.concatenate([window.history, window.demand])
    observed = ~np.isnan(demand).any(axis=1)
    required = required_units(demand, window.classes, pools)
    hours = window.step.total_seconds() / 3600
    series = {}
    for pool in pools:
        columns = [i for i, name in enumerate(window.classes) if name in pool.serves]
        if len(columns) != 1:
            raise SystemExit("every pool must serve one demand class alone (as in helios-earth-slices.yaml)")
        lead = math.ceil(pool.lead_time / window.step)
        need = required[pool.pool_id]
        series[pool.pool_id] = Series(
            demand=demand[:, columns[0]],
            need=need,
            chips=pool.chips_per_unit,
            unit_step_usd=pool.price_per_unit_hour_usd * hours,
            lead=lead,
            max_units=pool.max_units,
            start=int(need[: lead + 1].max()),
        )
    first = len(window.history)
    billed = window.observed.astype(float)  # the oracle from the window's own start, as the simulator bills it
    oracle = sum(
        float((oracle_schedule(s.need[first:], window.step * s.lead, window.step) * billed).sum()) * s.unit_step_usd
        for s in series.values()
    )
    return Loaded(series, observed, first, hours, oracle, initial_units(window, pools), window)


def configurations(max_standby: int) -> np.ndarray:
    """Every standby table: 0 to ``max_standby`` units in each bucket, one row per combination."""
    return np.array(list(itertools.product(range(max_standby + 1), repeat=N_BUCKETS)), dtype=np.int64)


def day_of_steps(steps: int, n_days: int) -> np.ndarray:
    """The day of each of ``steps`` steps, those after the last of ``n_days`` days counted in it."""
    return np.minimum(np.arange(steps) // DAY_STEPS, n_days - 1)


def replay_all(
    series: Mapping[str, Series], observed: np.ndarray, base: int, hold: int, configs: np.ndarray, n_days: int
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Per pool, per configuration and day: cost (USD) and unserved chip-steps."""
    day_of = day_of_steps(len(observed), n_days)
    cost, short = {}, {}
    for pool_id, s in series.items():
        k = buckets(s.need, observed, base, dropped=True)
        paid, missed = simulate(
            s.need,
            s.demand,
            observed,
            k,
            configs[:, None, :],
            day_of,
            s.lead,
            hold,
            s.max_units,
            s.chips,
            np.full(len(configs), s.start),
            n_days,
        )
        cost[pool_id], short[pool_id] = paid * s.unit_step_usd, missed
    return cost, short


def replay_tables(
    series: Mapping[str, Series],
    observed: np.ndarray,
    base: int,
    hold: int,
    tables: Sequence[Mapping[str, np.ndarray]],
    n_days: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Cost (USD) and unserved chip-steps per day of each set of day-varying tables, summed over pools."""
    day_of = day_of_steps(len(observed), n_days)
    cost = np.zeros((len(tables), n_days))
    short = np.zeros((len(tables), n_days))
    for pool_id, s in series.items():
        k = buckets(s.need, observed, base, dropped=True)
        table = np.stack([t[pool_id] for t in tables])
        paid, missed = simulate(
            s.need,
            s.demand,
            observed,
            k,
            table,
            day_of,
            s.lead,
            hold,
            s.max_units,
            s.chips,
            np.full(len(tables), s.start),
            n_days,
        )
        cost += paid * s.unit_step_usd
        short += missed
    return cost, short


def reactive_replay(loaded: Loaded, headroom: int) -> tuple[float, float]:
    """The reactive autoscaler on the window (the last need plus ``headroom`` units, released after 10 idle
    minutes), replayed from the window's start with the simulator's initial units: cost (USD) and unserved
    chip-hours."""
    first, obs = loaded.first, loaded.observed[loaded.first :]
    cost = short = 0.0
    for pool_id, s in loaded.series.items():
        paid, missed = simulate(
            s.need[first:],
            s.demand[first:],
            obs,
            np.zeros(len(obs), dtype=np.int64),
            np.full((1, 1, N_BUCKETS), headroom),
            np.zeros(len(obs), dtype=np.int64),
            s.lead,
            REACTIVE_HOLD,
            s.max_units,
            s.chips,
            np.array([loaded.initial[pool_id]]),
            1,
        )
        cost += float(paid.sum()) * s.unit_step_usd
        short += float(missed.sum()) * loaded.hours
    return cost, short

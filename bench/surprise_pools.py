"""The pools of a configuration on a trace as the surprise-floor benchmark (``bench.bench_surprise_floor``) sees
them: each pool with the summed demand of the classes it alone serves (``PoolDemand``, ``pool_demands``), a pool over
part of the window (``half``), and what the perfect-foresight oracle pays to serve them all (``oracle_cost``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import timedelta

import numpy as np

from agent.simulation import select_window
from agent.simulation.oracle import oracle_schedule
from agent.simulation.window import required_units
from agent.sources.trace import read_trace
from config import load_settings


@dataclass(frozen=True)
class PoolDemand:
    """One pool and the demand of the classes it alone serves: demand (chips, NaN on gaps), units needed per
    step, the unit size, lead time in steps, the price of one unit for one step and the most units it may hold."""

    demand: np.ndarray
    required: np.ndarray
    chips_per_unit: int
    lead_steps: int
    unit_step_usd: float
    max_units: int


def oracle_cost(pools: Iterable[PoolDemand], observed: np.ndarray, step: timedelta) -> float:
    """What the perfect-foresight oracle pays to serve all of the pools' demand (gap steps are not billed)."""
    return sum(
        float((oracle_schedule(c.required, step * c.lead_steps, step) * observed).sum()) * c.unit_step_usd
        for c in pools
    )


def pool_demands(config: str, trace_path: str) -> tuple[dict[str, PoolDemand], np.ndarray, timedelta, float]:
    """Each pool with the summed demand of the classes it serves, the observed steps, the step and the demand in
    chip-hours. Every class must be served by one pool only (a pool per tenant, or one pool for all)."""
    settings = load_settings(config)
    pools = settings.pool_specs()
    classes = settings.demand_class_models()
    serving = {c.name: [p.pool_id for p in pools if c.name in p.serves] for c in classes}
    shared = sorted(name for name, found in serving.items() if len(found) != 1)
    if shared:
        raise SystemExit(f"every demand class needs exactly one pool; these have none or several: {shared}")
    window = select_window(read_trace(trace_path), classes, None, None)
    required = required_units(window.demand, window.classes, pools)
    hours = window.step.total_seconds() / 3600
    out = {}
    for pool in pools:
        columns = [i for i, name in enumerate(window.classes) if serving[name] == [pool.pool_id]]
        if not columns:
            continue
        out[pool.pool_id] = PoolDemand(
            demand=_summed(window.demand[:, columns]),
            required=required[pool.pool_id],
            chips_per_unit=pool.chips_per_unit,
            lead_steps=math.ceil(pool.lead_time / window.step),
            unit_step_usd=pool.price_per_unit_hour_usd * hours,
            max_units=pool.max_units,
        )
    observed = window.observed.astype(float)
    demanded = float(np.nansum(window.demand, axis=1) @ observed * hours)
    return out, observed, window.step, demanded


def _summed(columns: np.ndarray) -> np.ndarray:
    """Row sums, NaN where every value is (a gap step)."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isnan(columns).all(axis=1), np.nan, np.nansum(columns, axis=1))


def half(series: PoolDemand, span: slice) -> PoolDemand:
    """The pool over the steps of ``span`` only (its demand and need; the rest is unchanged)."""
    return replace(series, demand=series.demand[span], required=series.required[span])

"""A level reads the same whatever other levels are asked with it: asking the equal-service search's levels (or a
class's service level) with the configured ones changes neither the configured levels' forecasts nor their peaks."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from agent.sources.trace import read_trace
from forecasting.block import ordered, with_anchors
from forecasting.calibrated import last_value_forecaster
from forecasting.registry import build_calibrated
from forecasting.selection import AutoForecaster
from forecasting.series import SeriesData
from tests.forecasting.conftest import DAY, STEP, long_frame

BASE = (0.5, 0.9, 0.95)
# the levels the equal-service search asks (agent.simulation.equal_service.SERVICE_LEVELS)
SEARCHED = (0.5, 0.7, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995, 0.998, 0.999)
TRACE = Path(__file__).resolve().parents[2] / "data" / "helios-earth" / "demand_5min.csv.gz"


@pytest.mark.parametrize("seed", range(20))
def test_levels_asked_besides_the_anchors_never_move_them(seed: int) -> None:
    rng = np.random.default_rng(seed)
    extra = tuple(float(q) for q in rng.uniform(0.01, 0.999, size=4))
    anchors = (0.5, 0.9, 0.95)
    levels = with_anchors(extra, anchors)
    alone = ordered(rng.normal(size=(3, 5)), anchors)
    values = np.concatenate([rng.normal(size=(len(extra), 5)), alone])
    together = ordered(values, levels, anchors)
    assert np.array_equal(together[len(extra) :], ordered(alone, anchors))
    order = np.argsort(levels)
    assert (np.diff(together[order], axis=0) >= 0).all()  # and nothing crosses


def _helios(until: str, days: int) -> tuple[dict[str, SeriesData], int]:
    trace = read_trace(TRACE)
    end = trace.position(pd.Timestamp(until).to_pydatetime())
    size = int(trace.step.total_seconds() * 1e9)
    start = end - days * DAY
    start_ns = int(trace.index[start].value)
    return {u: SeriesData(u, start_ns, size, trace.column(u)[start:end].copy()) for u in trace.series}, size


def test_the_last_values_q09_is_the_same_with_the_searched_levels_asked() -> None:
    """The series near 170 whose 0.999 tail (1,390) failed the guards and sent the whole row to the fallback."""
    panel, size = _helios("2020-05-12T01:00:00+08:00", days=7)
    model = last_value_forecaster(timedelta(minutes=15))
    model.fit_panel(panel, size)
    windows = model.windows(panel)
    base, searched = model.forecast_windows(windows, 3, BASE), model.forecast_windows(windows, 3, SEARCHED)
    assert base.peaks is not None and searched.peaks is not None
    for k, level in enumerate(BASE):
        j = SEARCHED.index(level)
        assert np.array_equal(base.values[:, k], searched.values[:, j], equal_nan=True)
        assert np.array_equal(base.peaks[:, k], searched.peaks[:, j], equal_nan=True)
    # the case is exercised: the series' q0.999 tail is beyond the sane ceiling, judged whatever levels are asked
    # (the tail probe): its tail levels are the fallback's, its lower levels the model's with or without them
    row = searched.uids.index("earth/vc6YE")
    assert "tail probe" in searched.notes[row] and "sane multiple" in searched.notes[row]
    assert searched.models[row] == base.models[row] == "naive"
    assert searched.values[row, SEARCHED.index(0.999)].max() < 600
    tails = [k for k, level in enumerate(SEARCHED) if level >= 0.97]
    assert tails and all(f"q{SEARCHED[k]:g}" in searched.notes[row] for k in tails)


def test_without_the_tail_probe_only_the_extreme_level_is_replaced() -> None:
    """Turned off, the probe judges nothing: the same series keeps its own row and only its q0.999 is the
    fallback's (the levels asked still do not move one another)."""
    panel, size = _helios("2020-05-12T01:00:00+08:00", days=7)
    model = last_value_forecaster(timedelta(minutes=15))
    model.tail_probe = None
    model.fit_panel(panel, size)
    windows = model.windows(panel)
    base, searched = model.forecast_windows(windows, 3, BASE), model.forecast_windows(windows, 3, SEARCHED)
    row = searched.uids.index("earth/vc6YE")
    assert "sane multiple" not in base.notes[row]
    assert "q0.999: forecast" in searched.notes[row] and "sane multiple" in searched.notes[row]
    for k, level in enumerate(BASE):
        assert np.array_equal(base.values[:, k], searched.values[:, SEARCHED.index(level)], equal_nan=True)


def test_autos_q09_is_the_same_with_the_searched_levels_asked() -> None:
    """Levels from different models (a pooled one at the levels it won) are kept from crossing around the judged
    levels, so a level asked below q0.9 from another model does not lift it."""
    n = 5 * DAY + DAY // 2  # ends on a falling half cycle: the last value is above what the cycle forecasts
    rng = np.random.default_rng(5)
    cycle = {f"c{i}": 80 + 40 * np.sin(2 * np.pi * np.arange(n) / DAY) + rng.normal(0, 0.5, n) for i in range(4)}
    history = long_frame({**cycle, "walk": 40 + np.cumsum(rng.normal(0, 1, n))})
    auto = AutoForecaster(
        [build_calibrated(name, BASE) for name in ("naive", "seasonal_naive")],
        quantiles=BASE,
        pooled=("seasonal_naive",),
    ).fit(history, STEP)
    assert auto.won["seasonal_naive"] == BASE  # the cycles' judged levels come from it, the others from naive
    recent = history.groupby("unique_id").tail(auto.min_history_steps)
    base, searched = auto.predict(recent, 6, BASE), auto.predict(recent, 6, SEARCHED)
    for column in ("q0.9", "peak_q0.9", "q0.5", "q0.95"):
        assert np.array_equal(base[column].to_numpy(), searched[column].to_numpy(), equal_nan=True)

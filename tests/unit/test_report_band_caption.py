"""The simulation report's forecast bands are each class's own forecast. The caption calls a band the forecast the
capacity was bought on only for a class planned on its own forecast: classes that may use exactly the same pools
are planned together on the forecast of their summed demand, which the bands are not, and the caption says so."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np

from agent.planning.groups import demand_groups
from agent.report.simulation import _bands_caption
from agent.simulation import run_policy, select_window
from agent.sources.trace import read_trace
from config import settings_from_mapping
from tests.conftest import TraceWriter

DAY = 288  # five-minute steps
BOUGHT_ON = "the forecast the capacity for that step was bought on"


def _pool(pool_id: str, serves: list[str]) -> dict[str, Any]:
    return {
        "id": pool_id,
        "kind": "gpu-node-pool",
        "chips_per_unit": 4,
        "max_units": 50,
        "price_per_chip_hour_usd": 2.0,
        "lead_time": "10m",
        "serves": serves,
    }


def _caption(write_trace: TraceWriter, pools: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """The caption of a forecast run of classes a, b and c on ``pools``, and the names of the groups planned on
    summed demand."""
    rng = np.random.default_rng(3)
    t = np.arange(2 * DAY)
    wave = np.maximum(np.round(20 + 10 * np.sin(2 * np.pi * t / DAY) + rng.normal(0, 3, len(t))), 0)
    trace = read_trace(write_trace({"a": list(wave), "b": list(30 - wave / 2), "c": [6.0] * len(t)}))
    config = {
        "demand_classes": [{"name": "a"}, {"name": "b"}, {"name": "c"}],
        "pools": pools,
        "forecast": {"model": "last-value", "history": "1d"},
    }
    settings = settings_from_mapping(config)
    start = trace.index[DAY].to_pydatetime()  # after a day of history, half a day: a's wave rises and falls
    window = select_window(trace, settings.demand_class_models(), start, start + timedelta(hours=12))
    run = run_policy(settings, trace, window, "forecast")
    assert set(run.forecast_bands) == {"a", "b", "c"}  # the bands drawn are the classes' own
    groups = demand_groups(["a", "b", "c"], settings.pool_specs())
    return _bands_caption(window, run, settings), [g.name for g in groups if g.is_aggregate]


def test_classes_planned_together_are_not_said_to_be_bought_on_their_own_band(write_trace: TraceWriter) -> None:
    caption, (group,) = _caption(write_trace, [_pool("gpu", ["a", "b", "c"])])
    assert BOUGHT_ON not in caption
    assert f"planned together ({group}, 3 classes)" in caption
    assert "bought on the forecast of their summed demand" in caption
    assert "show how each class's own forecast did, not what was bought" in caption
    assert "Demand stayed at or below the band's top in" in caption  # the classes' own bands, counted as before


def test_a_class_planned_on_its_own_forecast_is_told_apart(write_trace: TraceWriter) -> None:
    caption, (group,) = _caption(write_trace, [_pool("gpu", ["a", "b"]), _pool("solo", ["c"])])
    assert f"planned together ({group}, 2 classes)" in caption
    assert "For the other 1 class(es) the band is the forecast the capacity was bought on." in caption


def test_classes_each_planned_on_their_own_forecast_keep_the_plain_caption(write_trace: TraceWriter) -> None:
    # each class may use a pool of its own beside the shared one: no two classes have the same pools
    pools = [_pool("shared", ["a", "b", "c"]), _pool("pa", ["a"]), _pool("pb", ["b"]), _pool("pc", ["c"])]
    caption, groups = _caption(write_trace, pools)
    assert groups == []
    assert f"It is {BOUGHT_ON}." in caption
    assert "planned together" not in caption

"""The MetricSource contract, on TraceSource (simulations, replays) and on PrometheusSource (a real Prometheus
backfilled with the same trace, through the default kube-state-metrics queries): the same window gives the same
frame — columns ``unique_id, ds, y``, one row per class and step in [start, end), ``ds`` tz-aware UTC at the start
of each step, a step without a trustworthy value NaN and never 0 — and two adjacent windows give exactly the rows of
the window they make up together."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from agent.sources.base import MetricSource
from agent.sources.prometheus import PrometheusSource
from agent.sources.prometheus_queries import demand_queries
from agent.sources.trace import TraceSource, read_trace
from config.prometheus import PrometheusSettings
from models import DemandClass
from tests.prometheus.server import TENANTS, TRACE, LoadedTrace, PrometheusServer

pytestmark = pytest.mark.xdist_group("prometheus")
STEP = timedelta(minutes=5)
CLASSES = tuple(DemandClass(name=t) for t in TENANTS)


def _trace_source(_: PrometheusServer) -> MetricSource:
    return TraceSource(read_trace(TRACE))


def _prometheus_source(server: PrometheusServer) -> MetricSource:
    settings = PrometheusSettings.model_validate({"url": server.url, "retries": 0, "max_points_per_query": 500})
    return PrometheusSource.from_settings(settings, demand_queries(CLASSES, settings))


SOURCES: dict[str, Callable[[PrometheusServer], MetricSource]] = {
    "trace": _trace_source,
    "prometheus": _prometheus_source,
}


def _window(loaded: LoadedTrace, days: int = 3) -> tuple[datetime, datetime]:
    """Three days in the middle of the trace, with outages in them."""
    start = loaded.index[len(loaded.index) // 2].to_pydatetime()
    return start, start + timedelta(days=days)


@pytest.mark.parametrize("name", SOURCES)
def test_a_window_is_one_row_per_class_and_step_with_gaps_as_nan(
    prometheus: PrometheusServer, loaded_trace: LoadedTrace, name: str
) -> None:
    source = SOURCES[name](prometheus)
    start, end = _window(loaded_trace)
    frame = source.fetch(CLASSES, start, end, STEP)
    assert list(frame.columns) == ["unique_id", "ds", "y"]
    assert str(frame["ds"].dt.tz) == "UTC"
    grid = pd.date_range(start, end, freq=STEP, inclusive="left")
    for tenant in TENANTS:
        got = frame[frame["unique_id"] == tenant]
        assert list(got["ds"]) == list(grid)
        want = loaded_trace.demand[tenant][loaded_trace.index.get_indexer(grid)]
        assert np.isnan(want).any()  # the window holds outages: they must stay missing, never become 0
        np.testing.assert_array_equal(np.isnan(got["y"].to_numpy()), np.isnan(want))
        np.testing.assert_allclose(got["y"].to_numpy(), want, rtol=1e-9, equal_nan=True)


def test_both_sources_give_the_same_frame(prometheus: PrometheusServer, loaded_trace: LoadedTrace) -> None:
    start, end = _window(loaded_trace)
    frames = [SOURCES[name](prometheus).fetch(CLASSES, start, end, STEP) for name in SOURCES]
    keyed = [f.sort_values(["unique_id", "ds"]).reset_index(drop=True) for f in frames]
    pd.testing.assert_frame_equal(keyed[0], keyed[1], check_dtype=False, rtol=1e-9)


@pytest.mark.parametrize("name", SOURCES)
def test_adjacent_windows_make_up_the_window_they_span(
    prometheus: PrometheusServer, loaded_trace: LoadedTrace, name: str
) -> None:
    source = SOURCES[name](prometheus)
    start, end = _window(loaded_trace, days=1)
    middle = start + timedelta(hours=7, minutes=35)
    whole = source.fetch(CLASSES, start, end, STEP)
    parts = pd.concat([source.fetch(CLASSES, start, middle, STEP), source.fetch(CLASSES, middle, end, STEP)])

    def ordered(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.sort_values(["unique_id", "ds"]).reset_index(drop=True)

    pd.testing.assert_frame_equal(ordered(whole), ordered(parts))

"""The ``actual`` row of a replay from Prometheus bills what the pools recorded: a record missing for a step or
two holds the last one, a longer gap at steps with demand is not filled (a pool scaled to zero answers a bare
``count()`` with no sample at all) and the results say where, and a gap where the trace has no demand either is
not billed, whatever it holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from agent.simulation import select_window
from agent.simulation.actual import actual_note, actual_run
from agent.sources.prometheus_history import ClusterHistory
from agent.sources.trace import Trace, read_trace
from config import settings_from_mapping
from config.schema import Settings

BARE = 'count(max by (node) (kube_node_labels{label_cloud_google_com_gke_nodepool="gpu"}))'
GUARDED = f'{BARE} or on() (0 * count(kube_node_labels{{label_cloud_google_com_gke_nodepool!=""}}))'
HOURS = 5 / 60
PRICE = 8.0  # a node: 8 chips at 1 USD per chip-hour


def scenario(tmp_path: Path, demand: list[float]) -> tuple[Settings, Trace, Any]:
    """One class on one 8-chip pool; a day of history at 5-minute steps, then ``demand``."""
    values = [4.0] * 288 + demand
    stamps = pd.date_range("2024-01-01T00:00:00+00:00", periods=len(values), freq="5min")
    path = tmp_path / "trace.csv"
    frame = pd.DataFrame({"unique_id": "a", "ds": stamps.strftime("%Y-%m-%dT%H:%M:%S%z"), "y": values})
    frame.to_csv(path, index=False)
    raw = {
        "demand_classes": [{"name": "a"}],
        "pools": [{"id": "gpu", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 10,
                   "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": ["a"]}],
        "forecast": {"history": "1d", "model": "last-value"},
    }  # fmt: skip
    settings = settings_from_mapping(raw, source="gaps.yaml")
    trace = read_trace(path)
    return settings, trace, select_window(trace, settings.demand_class_models(), stamps[288].to_pydatetime(), None)


def history(trace: Trace, window: Any, nodes: list[float], query: str) -> ClusterHistory:
    """The pool's recorded nodes: ``nodes`` over the window, 3 before it."""
    before = trace.position(window.index[0].to_pydatetime())
    recorded = np.array([3.0] * before + nodes, dtype=float)
    return ClusterHistory(trace, capacity={"gpu": recorded}, capacity_queries={"gpu": query})


def test_a_pool_scaled_to_zero_under_a_bare_count_leaves_no_actual_row_and_says_where(tmp_path: Path) -> None:
    settings, trace, window = scenario(tmp_path, [16.0] * 24)
    nan = float("nan")
    cluster = history(trace, window, [3.0] * 4 + [nan] * 16 + [2.0] * 4, BARE)
    assert actual_run(settings, cluster, window) is None
    missing = actual_note(settings, cluster, window)["missing"]
    first, last = window.index[4].isoformat(), window.index[19].isoformat()
    assert missing.startswith(f"gpu: no recorded capacity for 16 steps, from {first} to {last}, while demand was")
    assert f"e.g. {GUARDED}" in missing


def test_the_guarded_query_bills_the_nodes_the_pool_ran(tmp_path: Path) -> None:
    settings, trace, window = scenario(tmp_path, [16.0] * 24)
    cluster = history(trace, window, [3.0] * 4 + [0.0] * 16 + [2.0] * 4, GUARDED)
    run = actual_run(settings, cluster, window)
    assert run is not None
    # the 2 nodes recorded from step 20 on were paid from their request, the pool's lead time (2 steps) before
    assert run.paid_units["gpu"].tolist() == [3] * 4 + [0] * 14 + [2] * 6
    assert run.cost_usd == pytest.approx(24 * PRICE * HOURS)
    assert actual_note(settings, cluster, window)["missing"] is None


@pytest.mark.parametrize("gap", [1, 2])
def test_a_record_missing_for_a_step_or_two_holds_the_last_one(tmp_path: Path, gap: int) -> None:
    settings, trace, window = scenario(tmp_path, [16.0] * 12)
    nodes = [3.0] * 4 + [float("nan")] * gap + [2.0] * (8 - gap)
    run = actual_run(settings, history(trace, window, nodes, BARE), window)
    assert run is not None
    assert run.paid_units["gpu"].tolist() == [3] * (4 + gap) + [2] * (8 - gap)


def test_a_longer_gap_at_steps_without_demand_is_not_billed(tmp_path: Path) -> None:
    # kube-state-metrics down: neither demand nor nodes recorded for 6 steps; those steps are not billed.
    nan = float("nan")
    settings, trace, window = scenario(tmp_path, [16.0] * 4 + [nan] * 6 + [16.0] * 4)
    cluster = history(trace, window, [3.0] * 4 + [nan] * 6 + [2.0] * 4, BARE)
    run = actual_run(settings, cluster, window)
    assert run is not None
    assert run.cost_usd == pytest.approx((3 * 4 + 2 * 4) * PRICE * HOURS)

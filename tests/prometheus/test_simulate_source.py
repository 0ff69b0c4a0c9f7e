"""``simulate --source prometheus`` and ``export-trace`` against the real Prometheus loaded with the Helios trace:
the replay from Prometheus gives what the replay of the same trace file gives, the ``actual`` row is the capacity
that was recorded, and a Prometheus that cannot answer stops the command with exit code 3."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from agent.cli import main
from agent.sources.trace import read_trace
from tests.prometheus.server import (
    CAPACITY_QUERY,
    GPUS_PER_NODE,
    POOL,
    TENANTS,
    TRACE,
    LoadedTrace,
    PrometheusServer,
    pool_nodes,
)

pytestmark = pytest.mark.xdist_group("prometheus")
# A day, after a week of history: the trace starts 2020-05-01T00:00+08:00.
START, END = "2020-05-08T00:00:00+08:00", "2020-05-09T00:00:00+08:00"
# The replays compared: the day's last six hours (72 steps), in which demand rises and falls and the pool grows by
# two nodes. A replay read one step off moves the demand by 0.24 % there, past the comparison's 0.1 %; over the
# whole day it moved it by 0.01 %, within it.
REPLAY_START = "2020-05-08T18:00:00+08:00"
PRICE_PER_GPU_HOUR = 3.67
POLICIES = ("forecast", "reactive", "static", "oracle")


def _config(tmp_path: Path, url: str, capacity_query: str | None = CAPACITY_QUERY) -> Path:
    prometheus: dict[str, Any] = {"url": url, "retries": 0}
    if capacity_query is not None:
        prometheus["pools"] = {POOL: {"capacity_query": capacity_query}}
    document: dict[str, Any] = {
        "demand_classes": [{"name": t} for t in TENANTS],
        "pools": [
            {
                "id": POOL,
                "kind": "gpu-node-pool",
                "chips_per_unit": GPUS_PER_NODE,
                "max_units": 60,
                "price_per_chip_hour_usd": PRICE_PER_GPU_HOUR,
                "lead_time": "10m",
                "serves": list(TENANTS),
            }
        ],
        "forecast": {"model": "seasonal_naive"},
        "prometheus": prometheus,
    }
    path = tmp_path / "leadtime.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def _simulate(config: Path, out: Path, *source: str) -> dict[str, Any]:
    args = ["simulate", "--config", str(config), *source, "--start", REPLAY_START, "--end", END]
    assert main([*args, "--out", str(out), "--equal-service", "none", "--no-progress"]) == 0
    document: dict[str, Any] = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return document


@pytest.fixture(scope="module")
def replays(prometheus: PrometheusServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("replays")
    config = _config(tmp, prometheus.url)
    return {
        "trace": _simulate(config, tmp / "trace", "--trace", str(TRACE)),
        "prometheus": _simulate(config, tmp / "prometheus", "--source", "prometheus"),
    }


def test_the_replay_from_prometheus_matches_the_replay_of_the_trace(replays: dict[str, dict[str, Any]]) -> None:
    from_trace, from_prometheus = replays["trace"]["policies"], replays["prometheus"]["policies"]
    assert set(from_trace) == set(POLICIES)
    assert set(from_prometheus) == {*POLICIES, "actual"}
    assert replays["prometheus"]["window"] == replays["trace"]["window"]
    for policy in POLICIES:
        expected, got = from_trace[policy], from_prometheus[policy]
        assert got["cost_usd"] == pytest.approx(expected["cost_usd"], rel=1e-3), policy
        assert got["demanded_accelerator_hours"] == pytest.approx(expected["demanded_accelerator_hours"], rel=1e-3)
        assert got["unserved_accelerator_hours"] == pytest.approx(
            expected["unserved_accelerator_hours"], rel=1e-3, abs=1e-6
        ), policy
    assert replays["prometheus"]["trace"]["path"].startswith("prometheus http://127.0.0.1:")


def test_the_actual_row_is_the_recorded_capacity(replays: dict[str, dict[str, Any]], loaded_trace: LoadedTrace) -> None:
    window = replays["prometheus"]["window"]
    lo = int(loaded_trace.index.searchsorted(pd.Timestamp(window["start"])))
    steps = slice(lo, lo + window["steps"])
    demand = np.sum([loaded_trace.demand[t][steps] for t in TENANTS], axis=0)
    observed = ~np.isnan(demand)
    nodes = pool_nodes(loaded_trace)[steps]
    assert not np.isnan(nodes[observed]).any()
    hours = 5 / 60
    paid = nodes.copy()  # each node added is paid from the 10m lead time (2 steps) before it is recorded
    for t in range(1, len(nodes)):
        paid[max(0, t - 2) : t] += max(0.0, nodes[t] - nodes[t - 1])
    expected_cost = float(np.sum(paid[observed]) * GPUS_PER_NODE * PRICE_PER_GPU_HOUR * hours)
    unserved = np.maximum(0.0, demand[observed] - nodes[observed] * GPUS_PER_NODE)
    actual = replays["prometheus"]["policies"]["actual"]
    assert actual["cost_usd"] == pytest.approx(expected_cost, abs=0.01)
    assert actual["accelerator_hours"] == pytest.approx(float(np.sum(paid[observed])) * GPUS_PER_NODE * hours)
    assert actual["unserved_accelerator_hours"] == pytest.approx(float(np.sum(unserved)) * hours, abs=1e-4)
    assert actual["cost_usd"] > replays["prometheus"]["policies"]["oracle"]["cost_usd"]
    note = replays["prometheus"]["actual"]
    assert note["capacity_queries"] == {POOL: CAPACITY_QUERY} and note["missing"] is None


def test_without_a_capacity_query_there_is_no_actual_row_and_the_results_say_why(
    prometheus: PrometheusServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, prometheus.url, capacity_query=None)
    args = ["simulate", "--config", str(config), "--source", "prometheus", "--since", "1d", "--end", START]
    assert main([*args, "--policy", "static,oracle", "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    document = json.loads((tmp_path / "o" / "results.json").read_text(encoding="utf-8"))
    assert set(document["policies"]) == {"static", "oracle"}
    assert document["window"]["steps"] == 288
    assert f"no prometheus.pools.{POOL}.capacity_query is configured" in document["actual"]["missing"]
    assert "no actual row" in capsys.readouterr().out


def test_export_trace_writes_what_simulate_reads_back(
    prometheus: PrometheusServer, tmp_path: Path, replays: dict[str, dict[str, Any]]
) -> None:
    config = _config(tmp_path, prometheus.url)
    exported = tmp_path / "history.csv.gz"
    args = ["export-trace", "--config", str(config), "--start", "2020-05-01T00:00:00+08:00", "--end", END]
    assert main([*args, "--out", str(exported)]) == 0
    trace, bundled = read_trace(exported), read_trace(TRACE)
    assert set(trace.series) == set(TENANTS)
    assert trace.index[0] == bundled.index[0] and len(trace.index) == 8 * 288
    for tenant in TENANTS:
        np.testing.assert_allclose(trace.column(tenant), bundled.column(tenant)[: 8 * 288], rtol=1e-9)
    offline = tmp_path / "offline"
    args = ["simulate", "--config", str(config), "--trace", str(exported), "--start", REPLAY_START, "--end", END]
    assert main([*args, "--policy", "static,oracle", "--out", str(offline), "--no-progress"]) == 0
    document = json.loads((offline / "results.json").read_text(encoding="utf-8"))
    for policy in ("static", "oracle"):
        assert document["policies"][policy]["cost_usd"] == pytest.approx(
            replays["prometheus"]["policies"][policy]["cost_usd"], rel=1e-9
        )


def test_an_unreachable_prometheus_stops_the_replay_with_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nobody = PrometheusServer(tmp_path, tmp_path)  # a free port nobody listens on
    config = _config(tmp_path, nobody.url)
    args = ["simulate", "--config", str(config), "--source", "prometheus", "--since", "1d", "--end", END]
    assert main([*args, "--out", str(tmp_path / "o"), "--no-progress"]) == 3
    printed = capsys.readouterr()
    (line,) = printed.err.splitlines()
    assert line == f"leadtime: cannot use Prometheus at {nobody.url}: cannot connect to Prometheus: [Errno 111] " + (
        "Connection refused"
    )
    assert not (tmp_path / "o").exists()


def test_a_replay_of_an_outage_names_the_classes_without_data(
    prometheus: PrometheusServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, prometheus.url)
    # the collector was down all of 2020-05-10 (UTC+8): no class has a value from midnight to noon
    args = ["export-trace", "--config", str(config), "--start", "2020-05-10T00:00:00+08:00"]
    assert main([*args, "--end", "2020-05-10T12:00:00+08:00", "--out", str(tmp_path / "o.csv")]) == 3
    (line,) = capsys.readouterr().err.splitlines()
    assert "no usable data for any demand class: 'earth/vc6YE', 'earth/vcMod', 'earth/vcJkd': " in line
    assert "no data for the whole range" in line and "--end 2020-05-10T12:00:00+08:00)" in line


def test_a_capacity_query_reading_0_wherever_demand_ran_leaves_no_actual_row_and_says_to_check_the_label(
    prometheus: PrometheusServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The query as docs/configuration.md writes it for a cloud pool, its fallback on any node-pool label, with the
    pool's name misspelt: it reads 0 at every step, not nothing. The row was the cluster's run at 0 USD with all its
    demand unserved, reported as fact; now there is none, and the results and a warning say why."""
    misspelt = POOL.replace("on-demand", "ondemand")
    label = "label_cloud_google_com_gke_nodepool"
    query = f'count(kube_node_labels{{{label}="{misspelt}"}}) or on() (0 * count(kube_node_labels{{{label}!=""}}))'
    config = _config(tmp_path, prometheus.url, capacity_query=query)
    args = ["simulate", "--config", str(config), "--source", "prometheus", "--since", "1d", "--end", START]
    assert main([*args, "--policy", "oracle", "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    document = json.loads((tmp_path / "o" / "results.json").read_text(encoding="utf-8"))
    assert set(document["policies"]) == {"oracle"}
    missing = document["actual"]["missing"]
    assert missing.startswith(
        f"{POOL}: prometheus.pools.{POOL}.capacity_query reads 0 units at each of the 288 steps where its classes "
        f"({', '.join(TENANTS)}) had demand, while no other pool serving them ran a unit"
    )
    assert f"check the label value in {query} (in Prometheus, {label} is '{POOL}')" in missing
    assert f"no actual row: {missing}" in capsys.readouterr().out
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "agent.simulation.actual"]
    assert warning == f"no actual row: {missing}"

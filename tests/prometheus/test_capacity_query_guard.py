"""The capacity query the documentation gives for the ``actual`` row of ``simulate --source prometheus``, on the
real Prometheus: a pool without nodes, beside the pool that ran the demand, reads 0 through it (a bare ``count()``
over no series answers no sample at all), and the results name the fallback when a bare count leaves the pool without
a record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from agent.cli import main
from tests.prometheus.server import CAPACITY_QUERY, GPUS_PER_NODE, POOL, TENANTS, PrometheusServer

pytestmark = pytest.mark.xdist_group("prometheus")
END = "2020-05-08T00:00:00+08:00"
# kube-state-metrics reports the nodes of a100-on-demand only: EMPTY is a node pool of the cluster without nodes.
EMPTY = "spot-a100"
BARE = f'count(max by (node) (kube_node_labels{{label_cloud_google_com_gke_nodepool="{EMPTY}"}}))'
GUARDED = f'{BARE} or on() (0 * count(kube_node_labels{{label_cloud_google_com_gke_nodepool!=""}}))'


def _replay(tmp_path: Path, url: str, query: str) -> dict[str, Any]:
    document = {
        "demand_classes": [{"name": t} for t in TENANTS],
        "pools": [{"id": EMPTY, "kind": "gpu-node-pool", "tier": "spot", "chips_per_unit": GPUS_PER_NODE,
                   "max_units": 60, "price_per_chip_hour_usd": 1.5, "lead_time": "15m", "serves": list(TENANTS)},
                  {"id": POOL, "kind": "gpu-node-pool", "chips_per_unit": GPUS_PER_NODE, "max_units": 60,
                   "price_per_chip_hour_usd": 3.67, "lead_time": "10m", "serves": list(TENANTS)}],
        "forecast": {"model": "seasonal_naive"},
        "prometheus": {"url": url, "retries": 0,
                       "pools": {EMPTY: {"capacity_query": query}, POOL: {"capacity_query": CAPACITY_QUERY}}},
    }  # fmt: skip
    config = tmp_path / "leadtime.yaml"
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    out = tmp_path / "out"
    args = ["simulate", "--config", str(config), "--source", "prometheus", "--since", "1d", "--end", END]
    assert main([*args, "--policy", "static", "--out", str(out), "--equal-service", "none", "--no-progress"]) == 0
    results: dict[str, Any] = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return results


def test_the_documented_capacity_query_reads_a_pool_without_nodes_as_zero(
    prometheus: PrometheusServer, tmp_path: Path
) -> None:
    results = _replay(tmp_path, prometheus.url, GUARDED)
    assert results["actual"]["missing"] is None
    actual = results["policies"]["actual"]
    assert actual["spend_by_pool_usd"][EMPTY] == 0.0 and actual["spend_by_pool_usd"][POOL] > 0.0
    assert actual["unserved_fraction"] < 0.01
    assert np.isclose(actual["demanded_accelerator_hours"], results["policies"]["static"]["demanded_accelerator_hours"])


def test_a_bare_count_of_a_pool_without_nodes_leaves_no_actual_row_and_names_the_fallback(
    prometheus: PrometheusServer, tmp_path: Path
) -> None:
    results = _replay(tmp_path, prometheus.url, BARE)
    assert "actual" not in results["policies"]
    missing = results["actual"]["missing"]
    assert missing.startswith(f"{EMPTY}: Prometheus returned no data for the whole range")
    assert f"e.g. {GUARDED}" in missing
    assert "--metric-labels-allowlist=nodes=[cloud.google.com/gke-nodepool]" in missing

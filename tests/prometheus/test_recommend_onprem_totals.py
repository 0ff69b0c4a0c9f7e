"""``leadtime recommend`` counts an on-prem pool in its cost totals when it reads the other pools from the cloud. No
cloud adapter reads an on-prem pool, and one without a capacity query is planned on its ``max_units`` (as the daemon
plans it, and as the daemon's budgets count a pool they have no record of): it is costed at those units, now and
recommended alike (it is never resized), so the totals are those of the same fleet given with ``--current-units``,
and the pool's row and a warning say what it was counted at and why. The configuration is the documented hybrid
example (config/examples/hybrid-aws-gke.yaml, 40 on-prem nodes at 8 USD a node-hour) without its GKE pool, served
the test Prometheus's tenants, its AWS pools on the local moto-backed server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from tests.fakes.aws_api import FakeAwsApi
from tests.prometheus.server import TENANTS, PrometheusServer

pytestmark = pytest.mark.xdist_group("prometheus")
AT = "2020-05-08T12:00+08:00"
EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "examples" / "hybrid-aws-gke.yaml"
ONPREM, SPOT, ON_DEMAND = "onprem-a100", "aws-p4d-spot", "aws-p4d-on-demand"


def _config(tmp_path: Path, server: PrometheusServer, aws: FakeAwsApi) -> Path:
    document: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    document.pop("cloud")
    document["pools"] = [p for p in document["pools"] if p["kind"] != "tpu-slice-group"]
    document["demand_classes"] = [c for c in document["demand_classes"] if c["name"] in TENANTS]
    document["demand_classes"] = [c for c in document["demand_classes"] if c["family"] == "gpu"]
    for pool in document["pools"]:
        pool["serves"] = [c for c in pool["serves"] if c in TENANTS]
    document["prometheus"] = {"url": server.url, "retries": 0}  # no capacity_query for the on-prem pool
    document["aws"]["endpoint"] = aws.url
    path = tmp_path / "leadtime.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def _recommend(config: Path, out: Path, *extra: str) -> dict[str, Any]:
    assert main(["recommend", "--config", str(config), "--out", str(out), "--at", AT, *extra]) == 0
    document: dict[str, Any] = json.loads((out / "recommendation.json").read_text())
    return document


def test_an_on_prem_pool_without_a_capacity_query_is_costed_at_its_max_units(
    prometheus: PrometheusServer,
    aws_api: FakeAwsApi,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    aws_api.add_group("gpu-p4d-spot", nodes=3, max_size=48)
    aws_api.add_nodegroup("ml-gpu", "p4d-on-demand", nodes=2, max_size=120)
    config = _config(tmp_path, prometheus, aws_api)

    read = _recommend(config, tmp_path / "read")

    assert read["pool_state_source"] == "cloud"
    pools = {p["pool_id"]: p for p in read["pools"]}
    onprem = pools[ONPREM]
    assert (onprem["current_units"], onprem["recommended_units"], onprem["billed_units"]) == (40, 40, 40)
    assert onprem["current_cost_per_day_usd"] == pytest.approx(40 * 8.00 * 24)
    assert onprem["recommended_cost_per_day_usd"] == pytest.approx(40 * 8.00 * 24)
    assert "max_units" in onprem["reason"] and "capacity_query" in onprem["reason"]
    # the report's row says so too, where the plan's record ends in no target of its own
    assert onprem["why"].startswith("need ") and onprem["why"].endswith(onprem["reason"])
    (line,) = [row for row in (tmp_path / "read" / "report.md").read_text().splitlines() if f"| {ONPREM} |" in row]
    assert "counted at its max_units (40)" in line and "target unknown" not in line
    every = [SPOT, ON_DEMAND, ONPREM]
    assert read["cost"]["current_per_day_usd"] == pytest.approx(
        sum(pools[p]["current_cost_per_day_usd"] for p in every)
    )
    assert read["cost"]["recommended_per_day_usd"] == pytest.approx(
        sum(pools[p]["recommended_cost_per_day_usd"] for p in every)
    )
    (warning,) = [w for w in read["warnings"] if ONPREM in w]
    assert f"on-prem pool {ONPREM} has no prometheus.pools.{ONPREM}.capacity_query" in warning
    assert f"warning: {warning}\n" in capsys.readouterr().err

    # the same fleet given by hand: the same totals
    given = _recommend(config, tmp_path / "given", "--current-units", f"{ONPREM}=40,{SPOT}=3,{ON_DEMAND}=2")
    assert given["pool_state_source"] == "--current-units"
    assert given["cost"]["current_per_day_usd"] == pytest.approx(read["cost"]["current_per_day_usd"])
    assert given["cost"]["recommended_per_day_usd"] == pytest.approx(read["cost"]["recommended_per_day_usd"])

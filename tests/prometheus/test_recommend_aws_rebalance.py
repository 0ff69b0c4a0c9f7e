"""``leadtime recommend`` runs the start-up check the daemon runs on the AWS pools it reads: an EC2 Auto Scaling
group, or an EKS node group's group, over several Availability Zones with its AZRebalance process not suspended may
terminate a node the agent did not choose after each drained one. The finding is listed under the report's warnings
and printed on stderr, and nothing is changed in AWS (the process stays as it is, no resize is sent). The
configuration is the documented hybrid example (config/examples/hybrid-aws-gke.yaml) without its GKE pool, served
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
ZONES = ("us-east-1a", "us-east-1b")
COMMAND = "aws autoscaling suspend-processes --auto-scaling-group-name {} --scaling-processes AZRebalance"
WRITES = (
    "SetDesiredCapacity",
    "UpdateNodegroupConfig",
    "TerminateInstanceInAutoScalingGroup",
    "UpdateAutoScalingGroup",
    "SuspendProcesses",
    "ResumeProcesses",
)


def _config(tmp_path: Path, server: PrometheusServer, aws: FakeAwsApi) -> Path:
    document: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    document.pop("cloud")
    document["pools"] = [p for p in document["pools"] if p["kind"] != "tpu-slice-group"]
    document["demand_classes"] = [c for c in document["demand_classes"] if c["name"] in TENANTS]
    document["demand_classes"] = [c for c in document["demand_classes"] if c["family"] == "gpu"]
    for pool in document["pools"]:
        pool["serves"] = [c for c in pool["serves"] if c in TENANTS]
    document["prometheus"] = {"url": server.url, "retries": 0}
    document["aws"]["endpoint"] = aws.url
    path = tmp_path / "leadtime.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def _recommend(config: Path, out: Path) -> dict[str, Any]:
    assert main(["recommend", "--config", str(config), "--out", str(out), "--at", AT]) == 0
    document: dict[str, Any] = json.loads((out / "recommendation.json").read_text())
    return document


def test_recommend_warns_of_groups_over_several_zones_whose_azrebalance_is_not_suspended(
    prometheus: PrometheusServer,
    aws_api: FakeAwsApi,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    aws_api.add_group("gpu-p4d-spot", nodes=3, max_size=48, zones=ZONES)
    node_group = aws_api.add_nodegroup("ml-gpu", "p4d-on-demand", nodes=2, max_size=120, zones=ZONES)
    config = _config(tmp_path, prometheus, aws_api)

    document = _recommend(config, tmp_path / "out")

    found = [w for w in document["warnings"] if "AZRebalance not suspended" in w]
    assert [w.split(":", 1)[0] for w in found] == ["pool aws-p4d-on-demand", "pool aws-p4d-spot"]
    on_demand, spot = found
    assert f"EKS node group 'p4d-on-demand' runs in Auto Scaling group {node_group!r}" in on_demand
    assert f"({COMMAND.format(node_group)})" in on_demand
    assert spot.startswith(
        "pool aws-p4d-spot: Auto Scaling group 'gpu-p4d-spot' spans 2 Availability Zones (us-east-1a, us-east-1b)"
    )
    assert spot.endswith(f"suspend it: {COMMAND.format('gpu-p4d-spot')}")
    err = capsys.readouterr().err
    assert all(f"warning: {w}\n" in err for w in found)
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert all(f"- {w}" in report for w in found)
    assert [aws_api.calls(w) for w in WRITES] == [0] * len(WRITES)
    suspended = aws_api.group("gpu-p4d-spot")["SuspendedProcesses"]
    assert suspended == []

    # suspended on both groups: nothing to say
    for group in ("gpu-p4d-spot", node_group):
        aws_api.direct.autoscaling.suspend_processes(AutoScalingGroupName=group, ScalingProcesses=["AZRebalance"])
    again = _recommend(config, tmp_path / "again")
    assert [w for w in again["warnings"] if "AZRebalance" in w] == []

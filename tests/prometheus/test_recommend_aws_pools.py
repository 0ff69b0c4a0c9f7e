"""``leadtime recommend`` reads the AWS pools (EKS managed node groups, EC2 Auto Scaling groups) through the
daemon's adapters, on the local moto-backed AWS server, beside the GKE pools of a ``cloud`` section, and writes to
neither: no resize is sent. A cloud pool no section reads is refused as unread, as a pool whose read fails is, and
``pool_state_source`` says where the units came from. The configuration is the documented hybrid example
(config/examples/hybrid-aws-gke.yaml) served the test Prometheus's tenants."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from tests.fakes.aws_api import FakeAwsApi
from tests.fakes.gke_api import FakeGkeApi
from tests.prometheus.server import TENANTS, PrometheusServer

pytestmark = pytest.mark.xdist_group("prometheus")
AT = "2020-05-08T12:00+08:00"
EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "examples" / "hybrid-aws-gke.yaml"
SPOT, ON_DEMAND, SLICES = "aws-p4d-spot", "aws-p4d-on-demand", "gke-v5e-slices"
WRITES = (
    "SetDesiredCapacity",
    "UpdateNodegroupConfig",
    "TerminateInstanceInAutoScalingGroup",
    "UpdateAutoScalingGroup",
)


@pytest.fixture
def aws(aws_api: FakeAwsApi, monkeypatch: pytest.MonkeyPatch) -> FakeAwsApi:
    """The example's Spot group with 3 nodes and its on-demand node group with 2, within the example's bounds."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    aws_api.add_group("gpu-p4d-spot", nodes=3, max_size=48)
    aws_api.add_nodegroup("ml-gpu", "p4d-on-demand", nodes=2, max_size=120)
    return aws_api


def _config(tmp_path: Path, server: PrometheusServer, aws: FakeAwsApi, gke: FakeGkeApi | None) -> Path:
    """The hybrid example as written, its classes narrowed to the test tenants (two GPU tenants and one TPU tenant,
    as the example has them), its clouds the local servers; ``gke`` None leaves out the cloud section and its TPU
    pool."""
    document: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    document["demand_classes"] = [c for c in document["demand_classes"] if c["name"] in TENANTS]
    assert sorted(c["name"] for c in document["demand_classes"]) == sorted(TENANTS)
    for pool in document["pools"]:
        pool["serves"] = [c for c in pool["serves"] if c in TENANTS]
    document["prometheus"] = {"url": server.url, "retries": 0}
    document["aws"]["endpoint"] = aws.url
    if gke is None:
        document.pop("cloud")
        document["pools"] = [p for p in document["pools"] if p["id"] != SLICES]
        document["demand_classes"] = [c for c in document["demand_classes"] if c["family"] == "gpu"]
    else:
        cloud = document["cloud"]
        cloud.update(project=gke.project, location=gke.location, cluster=gke.cluster, endpoint=gke.url)
    path = tmp_path / "leadtime.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def _recommend(config: Path, out: Path) -> dict[str, Any]:
    assert main(["recommend", "--config", str(config), "--out", str(out), "--at", AT]) == 0
    document: dict[str, Any] = json.loads((out / "recommendation.json").read_text())
    return document


def test_an_aws_only_configuration_reads_its_pools_from_aws_and_writes_nothing(
    prometheus: PrometheusServer,
    aws: FakeAwsApi,
    tmp_path: Path,
) -> None:
    document = _recommend(_config(tmp_path, prometheus, aws, None), tmp_path / "out")

    assert document["pool_state_source"] == "cloud"
    pools = {p["pool_id"]: p for p in document["pools"]}
    assert [(pools[p]["current_units"], pools[p]["ready_units"]) for p in (SPOT, ON_DEMAND)] == [(3, 3), (2, 2)]
    assert pools[SPOT]["current_cost_per_day_usd"] == pytest.approx(3 * 13.00 * 24)
    assert pools[ON_DEMAND]["current_cost_per_day_usd"] == pytest.approx(2 * 32.77 * 24)
    assert aws.calls("DescribeAutoScalingGroups") > 0 and aws.calls("DescribeNodegroup") > 0
    assert [aws.calls(w) for w in WRITES] == [0] * len(WRITES)
    assert aws.group("gpu-p4d-spot")["DesiredCapacity"] == 3


def test_with_gke_beside_aws_every_cloud_pool_is_read_and_costed(
    prometheus: PrometheusServer,
    aws: FakeAwsApi,
    gke_api: FakeGkeApi,
    tmp_path: Path,
) -> None:
    for i in range(2):  # two running v5e slices of 4x8: 8 hosts each
        gke_api.add_pool(f"v5e-{i}", nodes=8)

    document = _recommend(_config(tmp_path, prometheus, aws, gke_api), tmp_path / "out")

    assert document["pool_state_source"] == "cloud"
    pools = {p["pool_id"]: p for p in document["pools"]}
    assert {p: pools[p]["current_units"] for p in (SPOT, ON_DEMAND, SLICES)} == {SPOT: 3, ON_DEMAND: 2, SLICES: 2}
    read = 3 * 13.00 + 2 * 32.77 + 2 * 32 * 1.20  # USD an hour of the cloud pools as read
    cloud = sum(pools[p]["current_cost_per_day_usd"] for p in (SPOT, ON_DEMAND, SLICES))
    assert cloud == pytest.approx(read * 24)
    onprem = 40 * 8.00 * 24  # not read from a cloud: counted whole, at its max_units (never resized)
    assert pools["onprem-a100"]["current_cost_per_day_usd"] == pytest.approx(onprem)
    assert document["cost"]["current_per_day_usd"] == pytest.approx(cloud + onprem)
    assert [aws.calls(w) for w in WRITES] == [0] * len(WRITES)
    gke_writes = [(m, p) for m, p in gke_api.requests if m in ("POST", "PUT", "DELETE")]
    assert [w for w in gke_writes if "listManagedInstances" not in w[1]] == []


def test_a_cloud_pool_no_section_reads_is_refused_as_unread(
    prometheus: PrometheusServer,
    aws: FakeAwsApi,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = _config(tmp_path, prometheus, aws, None)
    document = yaml.safe_load(config.read_text(encoding="utf-8"))
    document["aws"]["nodegroups"] = []  # the on-demand pool is mapped nowhere
    document["aws"].pop("cluster")
    config.write_text(yaml.safe_dump(document), encoding="utf-8")

    assert main(["recommend", "--config", str(config), "--out", str(tmp_path / "out"), "--at", AT]) == 2

    err = capsys.readouterr().err
    assert f"pool {ON_DEMAND!r}: no mapping in the cloud: or aws: section reads it" in err
    assert "--current-units" in err
    assert not (tmp_path / "out").exists()


def test_without_a_cloud_section_or_current_units_the_source_says_min_units(
    prometheus: PrometheusServer,
    aws: FakeAwsApi,
    tmp_path: Path,
) -> None:
    config = _config(tmp_path, prometheus, aws, None)
    document = yaml.safe_load(config.read_text(encoding="utf-8"))
    document.pop("aws")
    config.write_text(yaml.safe_dump(document), encoding="utf-8")

    recommended = _recommend(config, tmp_path / "out")

    assert recommended["pool_state_source"] == "min_units"
    assert {p["pool_id"]: p["current_units"] for p in recommended["pools"]}[SPOT] == 0
    assert aws.calls("DescribeAutoScalingGroups") == 0

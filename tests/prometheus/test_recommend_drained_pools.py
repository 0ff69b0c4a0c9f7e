"""``leadtime recommend`` plans with the pools the daemon drains: its dry-run agent has no drainer, but it plans the
GKE node pools, TPU slice groups, EKS node groups and EC2 Auto Scaling groups as drained, the pools the daemon's live
wiring gives a drainer. A budget's hard stop ranks the units in flight of such a pool busy (a drain takes a ready
node, busy or not), so recommend's forced releases are the daemon's; before, it ranked them provisioning and released
them first."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from prometheus_client import CollectorRegistry

from agent.commands.recommend import cloud_read_side, drained_pools, recommend
from agent.daemon.live import live_parts
from agent.ledger.sqlite import SqliteLedger
from agent.notify import RecordingNotifier
from config import settings_from_mapping
from models import LedgerEntry
from models.clock import SimulatedClock
from tests.fakes.aws_api import FakeAwsApi
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.prometheus_api import FakePrometheusApi
from tests.prometheus.server import PrometheusServer

pytestmark = pytest.mark.xdist_group("prometheus")
NOW = datetime(2024, 3, 31, 14, 0, tzinfo=UTC)
FORECAST = {"model": "persistence", "history": "2h", "step": "1m", "max_staleness": "5m"}
AT = datetime(2020, 5, 8, 4, 0, tzinfo=UTC)  # within the test Prometheus's trace
MONTH = datetime(2020, 5, 1, tzinfo=UTC)
GPU_TENANTS = ("earth/vc6YE", "earth/vcJkd")


def _pool(pool_id: str, kind: str, serves: Sequence[str], **extra: Any) -> dict[str, Any]:
    return {"id": pool_id, "kind": kind, "chips_per_unit": 8, "max_units": 20, "lead_time": "10m",
            "price_per_unit_hour_usd": 10.0, "serves": list(serves), **extra}  # fmt: skip


def test_recommend_plans_as_drained_the_pools_the_daemon_gives_a_drainer(
    gke_api: FakeGkeApi,
    aws_api: FakeAwsApi,
    prometheus_api: FakePrometheusApi,
    kube_client: k8s.ApiClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    document = {
        "demand_classes": [{"name": "train"}, {"name": "tpu", "family": "tpu"}],
        "pools": [
            _pool("gke-a100", "gpu-node-pool", ["train"]),
            _pool("eks-p4d", "gpu-node-pool", ["train"]),
            _pool("asg-p4d", "gpu-node-pool", ["train"], tier="spot"),
            _pool("gke-v5e", "tpu-slice-group", ["tpu"], family="tpu", chips_per_unit=16),
            _pool("v5e-queued", "tpu-queued-resource", ["tpu"], family="tpu", tier="spot"),
        ],
        "forecast": FORECAST,
        "prometheus": {"url": prometheus_api.url, "retries": 0, "timeout": "5s"},
        "cloud": {
            "project": gke_api.project,
            "location": gke_api.location,
            "cluster": gke_api.cluster,
            "endpoint": gke_api.url,
            "node_pools": [{"pool": "gke-a100", "node_pool": "a100"}],
            "tpu_slice_groups": [
                {
                    "pool": "gke-v5e",
                    "group": "v5e",
                    "machine_type": "ct5lp-hightpu-4t",
                    "tpu_topology": "4x4",
                    "zone": "us-central1-a",
                }
            ],
            "queued_resources": [
                {
                    "pool": "v5e-queued",
                    "group": "v5e-q",
                    "zone": "us-central2-b",
                    "accelerator_type": "v5litepod-8",
                    "runtime_version": "v2",
                    "chips": 8,
                    "spot": True,
                }
            ],
        },
        "aws": {
            "region": "us-east-1",
            "cluster": "ml-gpu",
            "endpoint": aws_api.url,
            "nodegroups": [{"pool": "eks-p4d", "nodegroup": "p4d"}],
            "auto_scaling_groups": [{"pool": "asg-p4d", "group": "gpu-p4d-spot"}],
        },
        "ledger": {"path": str(tmp_path / "ledger.sqlite")},
    }
    settings = settings_from_mapping(document, source="every cloud")

    parts = live_parts(
        settings, "every cloud", SimulatedClock(NOW), RecordingNotifier(), kube_client, CollectorRegistry()
    )

    assert set(parts.drainers) == {"gke-a100", "gke-v5e", "eks-p4d", "asg-p4d"}
    assert drained_pools(settings) == set(parts.drainers)  # the queued resources are deleted by a size change


def test_recommend_s_hard_stop_keeps_the_units_in_flight_of_a_drained_pool_busy(
    gke_api: FakeGkeApi,
    prometheus: PrometheusServer,
    tmp_path: Path,
) -> None:
    # 4 spot units in flight (10 USD an hour) and 4 ready on-demand units (30 USD): 160 USD an hour, 5.33 USD over the
    # next two ticks, 0.90 USD more than the 800 USD cap's money left. The daemon drains both node pools, so a unit
    # in flight is as busy as a ready one and two busy on-demand units go (on-demand before spot); before, recommend
    # released the 4 spot units in flight and one on-demand unit
    gke_api.add_pool("spot", nodes=4)
    for mig in gke_api.pools["spot"].migs:
        for instance in mig.instances:
            instance.action = "CREATING"
    gke_api.add_pool("ondemand", nodes=4)
    path = tmp_path / "ledger.sqlite"
    spent = 800.0 - 160.0 * 2 / 60 + 0.9
    with SqliteLedger(path, fresh_if_empty=True) as ledger:
        ledger.record(LedgerEntry("spot", MONTH, AT, 4, spent / 4))
        ledger.record(LedgerEntry("ondemand", MONTH, AT, 4, spent * 3 / 4))
    settings = settings_from_mapping(
        {
            "demand_classes": [{"name": name, "family": "gpu"} for name in GPU_TENANTS],
            "pools": [
                _pool("spot", "gpu-node-pool", GPU_TENANTS, tier="spot", min_units=0),
                _pool("ondemand", "gpu-node-pool", GPU_TENANTS, min_units=0, price_per_unit_hour_usd=30.0),
            ],
            "budgets": [
                {"name": "team-a", "pools": ["spot", "ondemand"], "monthly_cap_usd": 800, "commit_horizon": "2h"}
            ],
            "loop": {"tick_interval": "1m"},
            "prometheus": {"url": prometheus.url, "retries": 0},
            "cloud": {
                "project": gke_api.project,
                "location": gke_api.location,
                "cluster": gke_api.cluster,
                "endpoint": gke_api.url,
                "node_pools": [{"pool": "spot", "node_pool": "spot"}, {"pool": "ondemand", "node_pool": "ondemand"}],
            },
            "ledger": {"path": str(path)},
        }
    )

    document = recommend(settings, "hard stop", tmp_path / "out", AT, cloud_read_side(settings), "cloud")

    pools = {p["pool_id"]: p for p in document["pools"]}
    assert {p: (pools[p]["current_units"], pools[p]["ready_units"]) for p in pools} == {
        "spot": (4, 0),
        "ondemand": (4, 4),
    }
    assert [(r["pool_id"], r["to_units"]) for r in document["dry_run"]] == [("ondemand", 2)]

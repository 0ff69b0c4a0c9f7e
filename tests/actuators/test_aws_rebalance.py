"""A group over several Availability Zones may rebalance after the agent terminates a drained node, terminating an
instance of its own choosing, unless its AZRebalance process is suspended: the AWS adapters say so at start, as the
live daemon runs its advisory checks. boto3 against moto behind the proxy of ``tests.fakes.aws_api``."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from kubernetes import client as k8s
from prometheus_client import CollectorRegistry

from actuators.aws_wiring import build_aws_actuators
from agent.daemon.live import live_parts
from agent.notify import RecordingNotifier
from config import settings_from_mapping
from config.aws import AwsSettings
from models.clock import SimulatedClock
from tests.fakes.aws_api import FakeAwsApi
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.prometheus_api import FakePrometheusApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)
ZONES = ("us-east-1a", "us-east-1b")
COMMAND = "aws autoscaling suspend-processes --auto-scaling-group-name {} --scaling-processes AZRebalance"


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


def _warnings(aws_api: FakeAwsApi, settings: AwsSettings) -> list[str]:
    built = build_aws_actuators(settings, SimulatedClock(T0))
    return [warning for check in built.checks for warning in check()]


def test_a_multi_zone_group_without_azrebalance_suspended_is_warned_about(
    aws_api: FakeAwsApi, credentials: None
) -> None:
    spread = aws_api.add_group("gpu-spread", nodes=2, zones=ZONES)
    single = aws_api.add_group("gpu-single", nodes=2)
    settings = AwsSettings.model_validate(
        {
            "region": "us-east-1",
            "endpoint": aws_api.url,
            "auto_scaling_groups": [{"pool": "spread", "group": spread}, {"pool": "single", "group": single}],
        }
    )
    (warning,) = _warnings(aws_api, settings)
    assert warning.startswith(
        "pool spread: Auto Scaling group 'gpu-spread' spans 2 Availability Zones (us-east-1a, us-east-1b) with "
        "AZRebalance not suspended"
    )
    assert warning.endswith(f"suspend it: {COMMAND.format(spread)}")

    aws_api.direct.autoscaling.suspend_processes(AutoScalingGroupName=spread, ScalingProcesses=["AZRebalance"])
    assert _warnings(aws_api, settings) == []


def test_a_multi_zone_managed_node_group_is_warned_about_with_what_to_do(
    aws_api: FakeAwsApi, credentials: None
) -> None:
    group = aws_api.add_nodegroup("ml", "p5", nodes=2, zones=ZONES)
    settings = AwsSettings.model_validate(
        {
            "region": "us-east-1",
            "endpoint": aws_api.url,
            "cluster": "ml",
            "nodegroups": [{"pool": "od", "nodegroup": "p5"}],
        }
    )
    (warning,) = _warnings(aws_api, settings)
    assert warning.startswith(f"pool od: EKS node group 'p5' runs in Auto Scaling group {group!r}, which spans 2")
    assert f"EKS has no setting for it: suspend it on that group yourself ({COMMAND.format(group)})" in warning

    aws_api.direct.autoscaling.suspend_processes(AutoScalingGroupName=group, ScalingProcesses=["AZRebalance"])
    assert _warnings(aws_api, settings) == []


def test_the_live_daemon_runs_the_check_at_start(
    aws_api: FakeAwsApi,
    credentials: None,
    prometheus_api: FakePrometheusApi,
    kube_api: FakeKubeApi,
    kube_client: k8s.ApiClient,
    tmp_path: Path,
) -> None:
    spread = aws_api.add_group("gpu-spread", nodes=0, zones=ZONES)
    pool = {"id": "spread", "kind": "gpu-node-pool", "tier": "spot", "chips_per_unit": 8, "max_units": 8}
    document = {
        "demand_classes": [{"name": "training", "family": "gpu"}],
        "pools": [pool | {"price_per_unit_hour_usd": 40.0, "lead_time": "10m", "serves": ["training"]}],
        "prometheus": {"url": prometheus_api.url, "retries": 0, "timeout": "5s"},
        "aws": {
            "region": "us-east-1",
            "endpoint": aws_api.url,
            "auto_scaling_groups": [{"pool": "spread", "group": spread}],
        },
        "ledger": {"path": str(tmp_path / "ledger.sqlite")},
        "daemon": {"kubernetes": {"api_url": kube_api.url, "request_timeout": "2s"}},
    }
    settings = settings_from_mapping(document, source="test config")
    parts = live_parts(
        settings, "test config", SimulatedClock(T0), RecordingNotifier(), kube_client, CollectorRegistry()
    )
    found = [warning for check in parts.checks[1:] for warning in check()]  # the first is the resource check
    assert len(found) == 1 and found[0].startswith("pool spread: Auto Scaling group 'gpu-spread' spans 2")

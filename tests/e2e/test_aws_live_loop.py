"""The real agent loop on the live parts ``leadtime run`` wires from an ``aws`` section (the EC2 Auto Scaling group
and EKS node group adapters behind the router, credentials from the standard chain), with boto3 talking to moto
behind the proxy of ``tests.fakes.aws_api``: a Spot pool that cannot launch (refused at once, or accepted and failed
with InsufficientInstanceCapacity afterwards) sends the next tick's demand to the on-demand node group."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from prometheus_client import CollectorRegistry

from agent.daemon.live import live_parts
from agent.loop import Agent, AgentParts
from agent.notify import RecordingNotifier
from config import settings_from_mapping
from forecasting.factory import build_forecaster
from models import ActionStatus, AlertKind
from models.clock import SimulatedClock
from tests.fakes.aws_api import FakeAwsApi
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.prometheus_api import FakePrometheusApi

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
CLASS = "training"
SPOT, ON_DEMAND = "p5-spot", "p5-on-demand"
GROUP, NODEGROUP = "gpu-p5-spot", "p5-on-demand"


def _pool(pool_id: str, tier: str, price: float) -> dict[str, Any]:
    return {
        "id": pool_id,
        "kind": "gpu-node-pool",
        "tier": tier,
        "chips_per_unit": 8,
        "max_units": 8,
        "price_per_unit_hour_usd": price,
        "lead_time": "10m",
        "serves": [CLASS],
    }


def _agent(
    aws: FakeAwsApi, prometheus: FakePrometheusApi, kube: FakeKubeApi, client: k8s.ApiClient, workdir: Path
) -> tuple[Agent, SimulatedClock]:
    document = {
        "demand_classes": [{"name": CLASS, "family": "gpu"}],
        "pools": [_pool(SPOT, "spot", 40.0), _pool(ON_DEMAND, "on-demand", 98.32)],
        "forecast": {"model": "persistence", "history": "2h", "step": "1m", "max_staleness": "5m"},
        "prometheus": {"url": prometheus.url, "retries": 0, "timeout": "5s"},
        "aws": {
            "region": "us-east-1",
            "cluster": "ml",
            "endpoint": aws.url,
            "nodegroups": [{"pool": ON_DEMAND, "nodegroup": NODEGROUP}],
            "auto_scaling_groups": [{"pool": SPOT, "group": GROUP}],
        },
        "ledger": {"path": str(workdir / "ledger.sqlite")},
        "daemon": {"kubernetes": {"api_url": kube.url, "request_timeout": "2s"}},
    }
    settings = settings_from_mapping(document, source="aws e2e config")
    clock = SimulatedClock(T0)
    notifier = RecordingNotifier()
    parts = live_parts(settings, "aws e2e config", clock, notifier, client, CollectorRegistry())
    forecaster = build_forecaster(settings.forecast)
    parts_ = AgentParts(parts.source, forecaster, parts.actuator, parts.ledger, notifier, parts.drainers)
    return Agent(settings, parts_), clock


@pytest.fixture
def aws_cloud(aws_api: FakeAwsApi, monkeypatch: pytest.MonkeyPatch) -> FakeAwsApi:
    """The Spot Auto Scaling group and the on-demand EKS node group, empty; the agent's credentials come from the
    environment (moto's test keys), as from any link of the standard chain."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    aws_api.now = T0
    aws_api.add_group(GROUP, nodes=0)
    aws_api.add_nodegroup("ml", NODEGROUP, nodes=0)
    return aws_api


@pytest.mark.parametrize("when", ["refused", "after-the-call"])
def test_insufficient_capacity_on_the_spot_pool_moves_the_next_tick_to_the_on_demand_pool(
    aws_cloud: FakeAwsApi,
    prometheus_api: FakePrometheusApi,
    kube_api: FakeKubeApi,
    kube_client: k8s.ApiClient,
    tmp_path: Path,
    when: str,
) -> None:
    if when == "refused":
        aws_cloud.stockout(GROUP)  # the group's latest launch just failed: InsufficientInstanceCapacity
    else:
        aws_cloud.arm_late_stockout()  # SetDesiredCapacity is accepted; the launches fail afterwards
    prometheus_api.set_demand(CLASS, 24)  # three 8-GPU nodes
    agent, clock = _agent(aws_cloud, prometheus_api, kube_api, kube_client, tmp_path)

    first = agent.run_once(clock.now())
    assert [(r.pool_id, r.to_units) for r in first.plan.resizes] == [(SPOT, 3)]
    (spot,) = first.results
    if when == "refused":
        assert spot.status is ActionStatus.FAILED
        assert "InsufficientInstanceCapacity" in (spot.error or "")
        assert [(a.kind, a.subject) for a in first.alerts] == [(AlertKind.STOCKOUT, SPOT)]
    else:
        assert spot.status is ActionStatus.STARTED
        aws_cloud.settle()  # the group records the failed launch; none of the three instances exists
    assert aws_cloud.calls("UpdateNodegroupConfig") == 0

    clock.advance(timedelta(minutes=10 if when == "after-the-call" else 1))
    if when == "after-the-call":
        aws_cloud.now = clock.now()
        aws_cloud.settle()  # the group retried the three launches meanwhile, and they failed again
    second = agent.run_once(clock.now())
    assert [(r.pool_id, r.from_units, r.to_units) for r in second.plan.resizes] == [(ON_DEMAND, 0, 3)]
    assert (ON_DEMAND, ActionStatus.STARTED) in [(r.pool_id, r.status) for r in second.results]
    if when == "after-the-call":
        assert [(a.kind, a.subject) for a in second.alerts] == [(AlertKind.STOCKOUT, SPOT)]
    assert aws_cloud.group(GROUP)["DesiredCapacity"] == 0  # nothing left asked of the Spot group
    assert aws_cloud.calls("SetDesiredCapacity") == (0 if when == "refused" else 2)  # never asked to grow again
    assert aws_cloud.calls("UpdateNodegroupConfig") == 1
    (nodegroup,) = [s for s in agent.parts.actuator.list_pools() if s.pool_id == ON_DEMAND]
    assert nodegroup.target_units == 3


def test_a_fleet_on_both_clouds_moves_demand_from_a_stocked_out_aws_pool_to_a_gke_node_pool(
    aws_cloud: FakeAwsApi,
    gke_api: FakeGkeApi,
    prometheus_api: FakePrometheusApi,
    kube_client: k8s.ApiClient,
    tmp_path: Path,
) -> None:
    """One configuration with an ``aws`` and a ``cloud`` section: each pool is routed to its own cloud's adapter
    behind one instrumented router."""
    gke_pool = "a100-gke-on-demand"
    gke_api.add_pool("a100", nodes=0)
    document = {
        "demand_classes": [{"name": CLASS, "family": "gpu"}],
        "pools": [_pool(SPOT, "spot", 40.0), _pool(gke_pool, "on-demand", 98.32)],
        "forecast": {"model": "persistence", "history": "2h", "step": "1m", "max_staleness": "5m"},
        "prometheus": {"url": prometheus_api.url, "retries": 0, "timeout": "5s"},
        "aws": {
            "region": "us-east-1",
            "cluster": "ml",
            "endpoint": aws_cloud.url,
            "auto_scaling_groups": [{"pool": SPOT, "group": GROUP}],
        },
        "cloud": {
            "project": gke_api.project,
            "location": gke_api.location,
            "cluster": gke_api.cluster,
            "endpoint": gke_api.url,
            "node_pools": [{"pool": gke_pool, "node_pool": "a100"}],
        },
        "ledger": {"path": str(tmp_path / "ledger.sqlite")},
    }
    settings = settings_from_mapping(document, source="hybrid config")
    clock = SimulatedClock(T0)
    notifier = RecordingNotifier()
    parts = live_parts(settings, "hybrid config", clock, notifier, kube_client, CollectorRegistry())
    agent = Agent(
        settings,
        AgentParts(parts.source, build_forecaster(settings.forecast), parts.actuator, parts.ledger, notifier),
    )
    assert sorted(s.pool_id for s in parts.actuator.list_pools()) == [gke_pool, SPOT]
    aws_cloud.stockout(GROUP)
    prometheus_api.set_demand(CLASS, 16)

    first = agent.run_once(clock.now())
    assert [(r.pool_id, r.status) for r in first.results] == [(SPOT, ActionStatus.FAILED)]
    clock.advance(timedelta(minutes=1))
    second = agent.run_once(clock.now())
    assert [(r.pool_id, r.to_units) for r in second.plan.resizes] == [(gke_pool, 2)]
    assert [(r.pool_id, r.status) for r in second.results] == [(gke_pool, ActionStatus.STARTED)]
    (gke,) = [s for s in agent.parts.actuator.list_pools() if s.pool_id == gke_pool]
    assert gke.target_units == 2
    assert aws_cloud.calls("SetDesiredCapacity") == 0

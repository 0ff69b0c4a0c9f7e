"""A pool whose state cannot be read (a refused permission, a rate limit, an API that cannot be reached) is left out
of ``list_pools`` and reported by ``unread_pools``; every other pool, of the same adapter and of every other cloud,
is still read, and the agent holds the unread pool, alerts on it and plans the others."""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from kubernetes import client as k8s
from prometheus_client import CollectorRegistry

from actuators.aws_asg import Ec2AutoScalingGroupActuator
from actuators.aws_groups import AutoScalingGroups
from actuators.base import unread_pools
from actuators.cloud_tpu import CloudTpuQueuedResourceActuator
from actuators.dry_run import DryRunActuator
from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.gke_tpu_slices import GkeTpuSliceActuator
from actuators.instrumented import InstrumentedActuator
from actuators.routing import RoutingActuator
from actuators.simulated import SimulatedCluster
from agent.daemon.adapters import PoolStateRecorder
from agent.daemon.election import SoleReplicaElector
from agent.daemon.guard import LeaderOnlyActuator
from agent.daemon.live import live_parts
from agent.executor import execute
from agent.loop import Agent, AgentParts
from agent.notify import RecordingNotifier
from agent.planning import PlannerMemory
from config import settings_from_mapping
from config.aws import AutoScalingGroupMapping
from config.cloud import NodePoolMapping, QueuedResourceMapping, TpuSliceGroupMapping
from forecasting.factory import build_forecaster
from models import (
    AcceleratorFamily,
    ActionStatus,
    AlertKind,
    CapacityPlan,
    CapacityTier,
    PermanentActuatorError,
    PoolKind,
    PoolSpec,
    Resize,
    Severity,
    SkipReason,
    TransientActuatorError,
)
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import eks_actuator
from tests.contract.harnesses import CLUSTER
from tests.fakes.aws_api import FakeAwsApi
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.prometheus_api import FakePrometheusApi
from tests.fakes.tpu_api import FakeTpuApi

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
DENIED = "Required 'container.clusters.get' permission for 'projects/test-project/locations/us-central1/clusters/ml'."


def _node_pools(url: str, clock: SimulatedClock, *names: str) -> GkeNodePoolActuator:
    clients = google_clients(url)
    mappings = [NodePoolMapping(pool=f"gke-{n}", node_pool=n) for n in names]
    return GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, mappings, clock)


def _asg(aws: FakeAwsApi, clock: SimulatedClock, *groups: str) -> Ec2AutoScalingGroupActuator:
    clients = aws.clients()
    mappings = [AutoScalingGroupMapping(pool=f"aws-{g}", group=g) for g in groups]
    return Ec2AutoScalingGroupActuator(AutoScalingGroups(clients.autoscaling, clients.ec2), mappings, clock)


def _closed_port_url() -> str:
    """An address nothing listens on: every connection is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_a_refused_read_of_one_gke_node_pool_leaves_out_that_pool_only(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=2)
    gke_api.add_pool("h100", nodes=1)
    gke_api.fail_next(1, 403, DENIED, path="/nodePools/a100")
    actuator = _node_pools(gke_api.url, SimulatedClock(T0), "a100", "h100")

    states = actuator.list_pools()

    assert [(s.pool_id, s.target_units) for s in states] == [("gke-h100", 1)]
    (error,) = actuator.unread_pools().values()
    assert isinstance(error, PermanentActuatorError)
    assert error.pool_id == "gke-a100"
    assert error.reason.startswith("HTTP 403: ") and error.reason.endswith(DENIED)
    assert gke_api.calls("GET", "/nodePools/") == 2  # one read per pool, as before
    assert [(s.pool_id, s.target_units) for s in actuator.list_pools()] == [("gke-a100", 2), ("gke-h100", 1)]
    assert actuator.unread_pools() == {}


@pytest.mark.parametrize(("status", "error"), [(403, PermanentActuatorError), (429, TransientActuatorError)])
def test_a_refused_list_of_the_clusters_node_pools_leaves_out_every_slice_group(
    gke_api: FakeGkeApi, status: int, error: type[Exception]
) -> None:
    groups = [
        TpuSliceGroupMapping(pool=p, group=g, machine_type="ct5lp-hightpu-4t", tpu_topology="4x4", zone="us-central1-a")
        for p, g in (("v5e-a", "v5ea"), ("v5e-b", "v5eb"))
    ]
    gke_api.add_pool("v5ea-0", nodes=4, zones=("us-central1-a",))
    gke_api.fail_next(1, status, DENIED if status == 403 else "Too many requests", path="/nodePools")
    actuator = GkeTpuSliceActuator(google_clients(gke_api.url).gke, CLUSTER, groups, SimulatedClock(T0))

    assert actuator.list_pools() == []
    unread = actuator.unread_pools()
    assert sorted(unread) == ["v5e-a", "v5e-b"]
    assert all(isinstance(e, error) and e.pool_id == p for p, e in unread.items())
    assert gke_api.calls("GET", "/nodePools") == 1  # one list reads every group, refused or not
    assert [(s.pool_id, s.target_units) for s in actuator.list_pools()] == [("v5e-a", 1), ("v5e-b", 0)]


def test_a_refused_list_of_one_queued_resource_group_leaves_out_that_group_only(tpu_api: FakeTpuApi) -> None:
    groups = [
        QueuedResourceMapping(
            pool=f"tpu-{g}",
            group=g,
            zone="us-central2-b",
            accelerator_type="v5litepod-8",
            runtime_version="v2",
            chips=8,
        )
        for g in ("v5ea", "v5eb")
    ]
    tpu_api.fail_next(1, 403, "Permission 'tpu.queuedResources.list' denied", path="/queuedResources")
    actuator = CloudTpuQueuedResourceActuator(
        google_clients(tpu_api.url).tpu, "test-project", groups, SimulatedClock(T0)
    )

    assert [s.pool_id for s in actuator.list_pools()] == ["tpu-v5eb"]  # each group is its own list
    assert {p: type(e) for p, e in actuator.unread_pools().items()} == {"tpu-v5ea": PermanentActuatorError}
    assert tpu_api.calls("GET", "/queuedResources") == 2


def test_a_refused_read_of_one_aws_group_leaves_out_that_pool_only(aws_api: FakeAwsApi) -> None:
    aws_api.add_group("gpu-a", nodes=1)
    aws_api.add_group("gpu-b", nodes=2)
    message = "User is not authorized to perform: autoscaling:DescribeAutoScalingGroups"
    aws_api.fail("DescribeAutoScalingGroups", "AccessDenied", message, status=403)  # the first pool's read
    actuator = _asg(aws_api, SimulatedClock(T0), "gpu-a", "gpu-b")

    assert [(s.pool_id, s.target_units) for s in actuator.list_pools()] == [("aws-gpu-b", 2)]
    assert {p: type(e) for p, e in actuator.unread_pools().items()} == {"aws-gpu-a": PermanentActuatorError}
    assert aws_api.calls("DescribeAutoScalingGroups") == 2


def test_a_throttled_read_of_an_eks_node_group_leaves_it_out_and_is_transient(aws_api: FakeAwsApi) -> None:
    aws_api.add_nodegroup("ml", "p5", nodes=1)
    aws_api.fail("DescribeNodegroup", "ThrottlingException", "Rate exceeded", status=429)
    actuator = eks_actuator(aws_api, SimulatedClock(T0))

    assert actuator.list_pools() == []
    assert {p: type(e) for p, e in actuator.unread_pools().items()} == {"od": TransientActuatorError}


def test_the_router_reads_every_cloud_apart_and_the_wrappers_pass_the_unread_pools_on(
    gke_api: FakeGkeApi, aws_api: FakeAwsApi
) -> None:
    """One GKE pool refused (403) beside a healthy GKE pool and a healthy AWS pool; then the GKE API unreachable."""
    clock = SimulatedClock(T0)
    gke_api.add_pool("a100", nodes=2)
    gke_api.add_pool("h100", nodes=1)
    aws_api.add_group("gpu-p5", nodes=3)
    gke = _node_pools(gke_api.url, clock, "a100", "h100")
    aws = _asg(aws_api, clock, "gpu-p5")
    registry = CollectorRegistry()
    router = RoutingActuator({"gke-a100": gke, "gke-h100": gke, "aws-gpu-p5": aws})
    dry_run = DryRunActuator(InstrumentedActuator(router, registry), clock)
    actuator = PoolStateRecorder(LeaderOnlyActuator(dry_run, SoleReplicaElector("replica-a"), clock))  # the daemon's
    gke_api.fail_next(1, 403, DENIED, path="/nodePools/a100")

    assert [(s.pool_id, s.target_units) for s in actuator.list_pools()] == [("aws-gpu-p5", 3), ("gke-h100", 1)]
    assert {p: type(e) for p, e in unread_pools(actuator).items()} == {"gke-a100": PermanentActuatorError}
    calls = {"method": "list_pools", "pool": "gke-a100", "outcome": "PermanentActuatorError"}
    assert registry.get_sample_value("leadtime_actuator_calls_total", calls) == 1.0

    unreachable = _node_pools(_closed_port_url(), clock, "a100", "h100")
    router = RoutingActuator({"gke-a100": unreachable, "gke-h100": unreachable, "aws-gpu-p5": aws})
    assert [s.pool_id for s in router.list_pools()] == ["aws-gpu-p5"]
    unread = router.unread_pools()
    assert {p: type(e) for p, e in unread.items()} == {
        "gke-a100": TransientActuatorError,
        "gke-h100": TransientActuatorError,
    }
    assert "cannot reach the Google API" in unread["gke-a100"].reason


def test_an_actuator_that_fails_its_whole_read_holds_only_the_pools_routed_to_it(aws_api: FakeAwsApi) -> None:
    """An inner actuator that does not read its pools apart (here a router behind a router whose one actuator
    raises) still holds only its own pools."""

    class Unreachable:
        def list_pools(self) -> list[object]:
            raise TransientActuatorError("tpu-a", "cannot reach the Google API: connection refused")

        def resize(self, pool_id: str, to_units: int, key: str) -> object:
            raise AssertionError("not called")

    aws_api.add_group("gpu-p5", nodes=3)
    aws = _asg(aws_api, SimulatedClock(T0), "gpu-p5")
    down = Unreachable()
    router = RoutingActuator({"tpu-a": down, "tpu-b": down, "aws-gpu-p5": aws})  # type: ignore[dict-item]

    assert [s.pool_id for s in router.list_pools()] == ["aws-gpu-p5"]
    unread = router.unread_pools()
    assert {p: (e.pool_id, e.reason) for p, e in unread.items()} == {
        "tpu-a": ("tpu-a", "cannot reach the Google API: connection refused"),
        "tpu-b": ("tpu-b", "cannot reach the Google API: connection refused"),
    }


def test_the_agent_holds_and_alerts_on_an_unreadable_pool_and_plans_the_others(
    gke_api: FakeGkeApi,
    aws_api: FakeAwsApi,
    prometheus_api: FakePrometheusApi,
    kube_client: k8s.ApiClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The real loop on the live parts of a configuration with a GKE and an AWS pool: the GKE pool's read refused
    (403) for two ticks. The tick does not fail, the AWS pool gets its state and its scale-up, the GKE pool is held
    and alerted on each tick, and is not blocked: once it can be read it is planned again."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    aws_api.now = T0
    aws_api.add_group("gpu-p5-spot", nodes=0)
    gke_api.add_pool("a100", nodes=1)

    def pool(pool_id: str, tier: str, price: float) -> dict[str, object]:
        return {
            "id": pool_id,
            "kind": "gpu-node-pool",
            "tier": tier,
            "chips_per_unit": 8,
            "max_units": 8,
            "price_per_unit_hour_usd": price,
            "lead_time": "10m",
            "serves": ["training"],
        }

    document = {
        "demand_classes": [{"name": "training", "family": "gpu"}],
        "pools": [pool("p5-spot", "spot", 40.0), pool("a100", "on-demand", 98.32)],
        "forecast": {"model": "persistence", "history": "2h", "step": "1m", "max_staleness": "5m"},
        "prometheus": {"url": prometheus_api.url, "retries": 0, "timeout": "5s"},
        "aws": {
            "region": "us-east-1",
            "endpoint": aws_api.url,
            "auto_scaling_groups": [{"pool": "p5-spot", "group": "gpu-p5-spot"}],
        },
        "cloud": {
            "project": gke_api.project,
            "location": gke_api.location,
            "cluster": gke_api.cluster,
            "endpoint": gke_api.url,
            "node_pools": [{"pool": "a100", "node_pool": "a100"}],
        },
        "ledger": {"path": str(tmp_path / "ledger.sqlite")},
    }
    settings = settings_from_mapping(document, source="hybrid config")
    clock = SimulatedClock(T0)
    notifier = RecordingNotifier()
    parts = live_parts(settings, "hybrid config", clock, notifier, kube_client, CollectorRegistry())
    forecaster = build_forecaster(settings.forecast)
    agent = Agent(settings, AgentParts(parts.source, forecaster, parts.actuator, parts.ledger, notifier))
    prometheus_api.set_demand("training", 16)
    gke_api.fail_next(2, 403, DENIED, path="/nodePools/a100")  # this tick's read and its re-validation

    first = agent.run_once(clock.now())

    assert [(r.pool_id, r.from_units, r.to_units) for r in first.plan.resizes] == [("p5-spot", 0, 2)]
    assert [(r.pool_id, r.status) for r in first.results] == [("p5-spot", ActionStatus.STARTED)]
    held = first.plan.decisions["a100"]
    assert held.current_units is None
    assert [h.reason for h in held.holds] == [SkipReason.MISSING_DATA]
    (alert,) = [a for a in first.alerts if a.subject == "a100"]
    assert (alert.kind, alert.severity) == (AlertKind.POOL_UNREADABLE, Severity.CRITICAL)
    assert DENIED in alert.details["error"]
    assert agent.memory.blocked == {}

    clock.advance(timedelta(minutes=1))
    second = agent.run_once(clock.now())
    assert second.plan.decisions["a100"].current_units == 1  # read again: planned, not blocked
    assert not [a for a in second.alerts if a.subject == "a100"]


def test_a_resize_whose_pool_cannot_be_read_again_before_it_is_carried_out_is_rejected_with_why() -> None:
    clock = SimulatedClock(T0)
    spec = PoolSpec(
        "a", PoolKind.GPU_NODE_POOL, CapacityTier.SPOT, AcceleratorFamily.GPU, 8, 0, 9, 10.0, timedelta(0), ("c",)
    )
    cluster = SimulatedCluster([spec], clock, initial_units={"a": 1})
    plan = CapacityPlan(T0, resizes=(Resize("a", 1, 3, "demand", "a@up"),))
    cluster.fail_reads("a", TransientActuatorError("a", "HTTP 503: The service is currently unavailable."))

    (result,) = execute(plan, cluster, {"a": spec}, PlannerMemory(), T0).results

    assert result.status is ActionStatus.REJECTED
    assert result.detail == (
        "planned from 1 units but the pool is now unreadable (HTTP 503: The service is currently unavailable.); "
        "re-planning next tick"
    )
    assert cluster.paid_units() == {"a": 1}

"""A quota the provider refuses the call itself for (Cloud TPU's create answered 429 "Quota '...' exhausted", GKE's 403
"Insufficient regional quota", an AWS scale-up refused while a launch failed for the instance quota) is told as a quota
used up, with what to do about it, where it read "No capacity for accel; backing off 10m and using the next pool" with
no advice: the adapter says at the boundary that the refusal is a quota (``CapacityUnavailable.quota``), the executor
tells it. A plain stockout and a rate limit (whose wording names a quota too) are not. The real clients (tpu_v2 and
container REST against ``tests.fakes``; boto3 against moto behind ``tests.fakes.aws_api``) and the agent's executor."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from actuators.aws_errors import capacity_unavailable
from actuators.base import Actuator
from actuators.cloud_tpu import CloudTpuQueuedResourceActuator
from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.gke_tpu_slices import GkeTpuSliceActuator
from actuators.vendor_errors import from_status
from agent.executor import execute
from agent.executor_failures import QUOTA_ADVICE
from agent.planning import PlannerMemory
from agent.planning.memory import BackoffReason
from config.cloud import NodePoolMapping
from models import (
    AcceleratorFamily,
    AlertEvent,
    AlertKind,
    CapacityPlan,
    CapacityTier,
    CapacityUnavailable,
    PoolKind,
    PoolSpec,
    Resize,
    TransientActuatorError,
)
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import asg_actuator
from tests.contract.harnesses import CLUSTER, POOL, QUEUED, SLICES
from tests.fakes.aws_api import ICE_MESSAGE, FakeAwsApi
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.tpu_api import QUOTA_MESSAGE, FakeTpuApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)
LEAD = timedelta(minutes=10)
TPU = PoolSpec(
    POOL, PoolKind.TPU_QUEUED_RESOURCE, CapacityTier.SPOT, AcceleratorFamily.TPU, 8, 0, 8, 8.0, LEAD, ("tpu",)
)
GPU = PoolSpec(
    "gpu", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 8, 30.0, LEAD, ("t",)
)
SPOT = PoolSpec("spot", PoolKind.GPU_NODE_POOL, CapacityTier.SPOT, AcceleratorFamily.GPU, 8, 0, 8, 30.0, LEAD, ("t",))
# Sources: tests/fakes/REFERENCE.md (GKE's 403 short of quota; AWS's failed launch for the instance quota).
GKE_QUOTA = (
    'Insufficient regional quota to satisfy request: resource "PREEMPTIBLE_NVIDIA_V100_GPUS": request requires '
    "'2.0' and is short '1.0'. project has a quota of '1.0' with '1.0' available."
)
# tests/fakes/REFERENCE.md (Cloud TPU's quota refusal; a slice's node pool condition, GCE_STOCKOUT).
TPU_SLICE_QUOTA = (
    "Quota 'TPUV4sPreemptiblePodPerProjectPerRegionForTPUAPI' exhausted. Limit 20800 in region us-central2"
)
TPU_SLICE_STOCKOUT = "GCE_STOCKOUT: The zone 'projects/p/zones/us-central2-b' does not have enough resources available"
SLICE_GROUP = PoolSpec(
    POOL, PoolKind.TPU_SLICE_GROUP, CapacityTier.SPOT, AcceleratorFamily.TPU, 8, 0, 4, 8.0, LEAD, ("tpu",)
)
AWS_QUOTA = "Your quota allows for 0 more running instance(s). You requested at least 1. Launching EC2 instance failed."


def _alert(plan_pool: str, actuator: Actuator, spec: PoolSpec, from_units: int, to_units: int) -> AlertEvent:
    """The plan's one scale-up sent through the executor, refused: its one stockout alert, the pool backed off."""
    plan = CapacityPlan(T0, (Resize(plan_pool, from_units, to_units, "demand queued", "k1"),))
    done = execute(plan, actuator, {plan_pool: spec}, PlannerMemory(), T0)
    assert done.memory.backoff_reason == {plan_pool: BackoffReason.STOCKOUT}
    assert done.memory.backoff_until == {plan_pool: T0 + LEAD}
    (alert,) = done.alerts
    assert alert.kind is AlertKind.STOCKOUT
    return alert


def _tpu_refused(tpu_api: FakeTpuApi) -> AlertEvent:
    clock = SimulatedClock(T0)
    tpu_api.clock = clock.now
    actuator = CloudTpuQueuedResourceActuator(
        google_clients(tpu_api.url).tpu, "test-project", [QUEUED], clock, {POOL: timedelta(minutes=20)}
    )
    return _alert(POOL, actuator, TPU, 0, 2)


def test_cloud_tpu_refusing_the_create_for_a_quota_says_to_have_it_raised(tpu_api: FakeTpuApi) -> None:
    tpu_api.stockout("http")  # 429 RESOURCE_EXHAUSTED with QUOTA_MESSAGE
    alert = _tpu_refused(tpu_api)
    assert alert.summary == f"Quota used up for {POOL}; backing off 10m and using the next pool. {QUOTA_ADVICE}"
    assert alert.details["action"] == QUOTA_ADVICE
    assert QUOTA_MESSAGE in alert.details["error"]
    assert alert.details["wanted_units"] == "2"


def test_gke_refusing_a_resize_for_regional_quota_says_to_have_it_raised(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=1)
    gke_api.fail_next(1, 403, GKE_QUOTA, path="/resize")
    clients = google_clients(gke_api.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100")
    actuator = GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], SimulatedClock(T0))
    alert = _alert("gpu", actuator, GPU, 1, 2)
    assert alert.summary.startswith("Quota used up for gpu; backing off 10m")
    assert alert.details["action"] == QUOTA_ADVICE
    assert GKE_QUOTA in alert.details["error"]


def test_a_multi_zone_gke_pool_refused_for_regional_quota_in_every_zone_says_to_have_it_raised(
    gke_api: FakeGkeApi,
) -> None:
    """A pool of two zones: each zone's instance group resize is refused; the refusals are collected zone by zone and
    the error raised from them keeps that they were a quota."""
    gke_api.add_pool("a100", nodes=2, zones=("us-central1-a", "us-central1-b"))
    gke_api.fail_next(2, 403, GKE_QUOTA, path="/resize")
    clients = google_clients(gke_api.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100")
    actuator = GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], SimulatedClock(T0))
    alert = _alert("gpu", actuator, GPU, 2, 4)
    assert alert.summary.startswith("Quota used up for gpu; backing off 10m")
    assert alert.details["action"] == QUOTA_ADVICE


def test_a_slice_group_with_a_stockout_and_a_quota_names_the_quota_it_says_to_raise(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("v5e-0", nodes=SLICES.hosts_per_slice)
    gke_api.add_pool("v5e-1", nodes=SLICES.hosts_per_slice)
    gke_api.add_pool("v5e-2", nodes=SLICES.hosts_per_slice)
    gke_api.report_error("v5e-1", message=TPU_SLICE_STOCKOUT)
    gke_api.report_error("v5e-2", message=TPU_SLICE_QUOTA)
    actuator = GkeTpuSliceActuator(google_clients(gke_api.url).gke, CLUSTER, [SLICES], SimulatedClock(T0))
    alert = _alert(POOL, actuator, SLICE_GROUP, 1, 3)
    assert alert.details["action"] == QUOTA_ADVICE
    assert TPU_SLICE_QUOTA in alert.details["error"]
    assert "(and 1 more)" in alert.details["error"]


def test_aws_refusing_a_scale_up_while_the_instance_quota_is_reached_says_to_have_it_raised(
    aws_api: FakeAwsApi,
) -> None:
    clock = SimulatedClock(T0)
    aws_api.now = clock.now()
    aws_api.add_group("gpu-spot", nodes=1)
    aws_api.arm_late_stockout(AWS_QUOTA)
    asg_actuator(aws_api, clock).resize("spot", 3, "up")
    clock.advance(timedelta(minutes=1))
    aws_api.now = clock.now()
    aws_api.settle()  # both launches failed for the instance quota
    actuator = asg_actuator(aws_api, clock)
    plan = CapacityPlan(clock.now(), (Resize("spot", 1, 4, "demand queued", "k2"),))
    done = execute(plan, actuator, {"spot": SPOT}, PlannerMemory(), clock.now())
    (alert,) = done.alerts
    assert alert.kind is AlertKind.STOCKOUT
    assert alert.summary.startswith("Quota used up for spot; backing off 10m")
    assert alert.details["action"] == QUOTA_ADVICE
    assert AWS_QUOTA in alert.details["error"]


def test_a_stockout_refused_at_the_call_gives_no_quota_advice(tpu_api: FakeTpuApi, gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=1)
    gke_api.stockout("us-central1-a", mode="http")
    clients = google_clients(gke_api.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100")
    actuator = GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], SimulatedClock(T0))
    alert = _alert("gpu", actuator, GPU, 1, 2)
    assert alert.summary == "No capacity for gpu; backing off 10m and using the next pool"
    assert "action" not in alert.details


@pytest.mark.parametrize(
    ("status", "message", "quota"),
    [
        (429, QUOTA_MESSAGE, True),
        (
            429,
            "Quota limit 'TPUV6EPreemptiblePerProjectPerRegionForTPUAPI' has been exceeded. Limit: 0 in region",
            True,
        ),
        (403, GKE_QUOTA, True),
        (403, "Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 0.0 globally.", True),
        (503, "There is no more capacity in the zone; stockout (GCE_STOCKOUT)", False),
        (400, "ZONE_RESOURCE_POOL_EXHAUSTED", False),
        (400, "Insufficient reserved capacity", False),
    ],
)
def test_google_refusals_say_whether_they_are_a_quota(status: int, message: str, quota: bool) -> None:
    refused = from_status("accel", status, message)
    assert isinstance(refused, CapacityUnavailable)
    assert refused.quota is quota


@pytest.mark.parametrize(
    "message",
    [
        "Rate Limit Exceeded (rateLimitExceeded, CONCURRENT_OPERATIONS_QUOTA_EXCEEDED)",
        "Quota exceeded for quota metric 'Mutate requests' and limit 'Mutate requests per minute'",
        'Too many operations: cluster "C" hits the concurrent operations quota 5, please try again later.',
    ],
)
def test_a_rate_limit_is_never_a_quota_used_up(message: str) -> None:
    assert isinstance(from_status("accel", 429, message), TransientActuatorError)


@pytest.mark.parametrize(
    ("message", "quota"),
    [
        (AWS_QUOTA, True),
        ("VcpuLimitExceeded: You have requested more vCPU capacity than your current vCPU limit of 32 allows", True),
        ("20 instance(s) are already running. Launching EC2 instance failed.", True),
        (ICE_MESSAGE, False),
        ("Insufficient capacity. Launching EC2 instance failed.", False),
    ],
)
def test_aws_refusals_say_whether_they_are_a_quota(message: str, quota: bool) -> None:
    assert capacity_unavailable("spot", message).quota is quota


@pytest.mark.parametrize(
    ("message", "summary"),
    [(TPU_SLICE_QUOTA, "Quota used up for"), (TPU_SLICE_STOCKOUT, "No capacity for")],
    ids=["quota", "stockout"],
)
def test_a_slice_group_refusing_a_new_slice_for_a_quota_says_to_have_it_raised(
    gke_api: FakeGkeApi, message: str, summary: str
) -> None:
    """The slice adapter refuses a scale-up itself while a slice of the group is told failed for want of quota."""
    gke_api.add_pool("v5e-0", nodes=SLICES.hosts_per_slice)
    gke_api.add_pool("v5e-1", nodes=SLICES.hosts_per_slice)
    gke_api.report_error("v5e-1", message=message)
    actuator = GkeTpuSliceActuator(google_clients(gke_api.url).gke, CLUSTER, [SLICES], SimulatedClock(T0))
    alert = _alert(POOL, actuator, SLICE_GROUP, 1, 2)
    assert alert.summary.startswith(f"{summary} {POOL}; backing off 10m")
    assert alert.details.get("action") == (QUOTA_ADVICE if "Quota" in summary else None)
    assert message in alert.details["error"]

"""The stockout alert quotes what the provider said of the failed units, and where the adapter read it as a quota used
up, which no back-off clears, tells the operator to have the quota raised. Before, every stockout read "2 units of spot
failed after the request was accepted (no capacity, suspended or in error)", AWS's reason dropped (the AWS adapters
passed no message for a capacity failure) and a TPU slice group's too. The real adapters (boto3 against moto behind
``tests.fakes.aws_api``; the GKE client against ``tests.fakes.gke_api``) and the agent's removal of failed units."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from actuators.aws_errors import capacity_failure, quota_failure
from actuators.gke_tpu_slices import GkeTpuSliceActuator
from actuators.vendor_errors import is_capacity_message, is_quota_message
from agent.executor import clear_failed_units
from agent.executor_failures import QUOTA_ADVICE
from agent.planning import PlannerMemory
from agent.planning.memory import BackoffReason
from models import AcceleratorFamily, ActionStatus, AlertEvent, AlertKind, CapacityTier, PoolKind, PoolSpec
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import asg_actuator, eks_actuator
from tests.contract.harnesses import CLUSTER, POOL, SLICES
from tests.fakes.aws_api import ICE_MESSAGE, FakeAwsApi
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

T0 = datetime(2024, 5, 1, 15, 0, tzinfo=UTC)
LEAD = timedelta(minutes=20)
SPOT = PoolSpec(
    "spot", PoolKind.GPU_NODE_POOL, CapacityTier.SPOT, AcceleratorFamily.GPU, 8, 0, 8, 30.0, LEAD, ("training",), 0.05
)
OD = PoolSpec(
    "od", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 8, 55.0, LEAD, ("training",)
)
TPU = PoolSpec(POOL, PoolKind.TPU_SLICE_GROUP, CapacityTier.SPOT, AcceleratorFamily.TPU, 8, 0, 4, 8.0, LEAD, ("tpu",))
# Sources: tests/fakes/REFERENCE.md (AWS rows on failed launches; Cloud TPU's quota refusal).
AWS_QUOTA = "Your quota allows for 0 more running instance(s). You requested at least 1. Launching EC2 instance failed."
REGION_QUOTA = "20 instance(s) are already running. Launching EC2 instance failed."
VCPU_QUOTA = (
    "You have requested more vCPU capacity than your current vCPU limit of 384 allows for the instance bucket that the "
    "specified instance type belongs to. Launching EC2 instance failed."
)
BLOCK = "Your Capacity Block reservation cr-0123456789abcdef0 is not active yet. Launching EC2 instance failed."
TPU_QUOTA = "Quota 'TPUV4sPreemptiblePodPerProjectPerRegionForTPUAPI' exhausted. Limit 20800 in region us-central2"
TPU_STOCKOUT = "GCE_STOCKOUT: The zone 'projects/p/zones/us-central2-b' does not have enough resources available"


def _aws_stockout_alert(aws_api: FakeAwsApi, message: str, eks: bool = False) -> AlertEvent:
    """One node; a scale-up to 3 whose 2 launches fail with ``message``; the agent removes them: its one alert."""
    clock = SimulatedClock(T0)
    aws_api.now = clock.now()
    if eks:
        aws_api.add_nodegroup("ml", "p5", nodes=1)
    else:
        aws_api.add_group("gpu-spot", nodes=1)
    aws_api.arm_late_stockout(message)
    pool, spec = ("od", OD) if eks else ("spot", SPOT)
    actuator = eks_actuator(aws_api, clock) if eks else asg_actuator(aws_api, clock)
    assert actuator.resize(pool, 3, "up").status is ActionStatus.STARTED
    clock.advance(timedelta(minutes=1))
    aws_api.now = clock.now()
    aws_api.settle()

    actuator = eks_actuator(aws_api, clock) if eks else asg_actuator(aws_api, clock)
    (state,) = actuator.list_pools()
    assert (state.failed_units, state.failed_messages, state.failed_for_capacity) == (2, (message, message), True)
    cleared = clear_failed_units({pool: state}, actuator, {pool: spec}, PlannerMemory(), clock.now())
    assert cleared.memory.backoff_reason == {pool: BackoffReason.STOCKOUT}
    (alert,) = cleared.alerts
    assert alert.kind is AlertKind.STOCKOUT
    return alert


@pytest.mark.parametrize("eks", [False, True], ids=["auto-scaling-group", "eks-node-group"])
@pytest.mark.parametrize("message", [AWS_QUOTA, REGION_QUOTA, VCPU_QUOTA], ids=["instances", "region", "vcpu"])
def test_an_aws_quota_is_quoted_and_the_operator_told_to_have_it_raised(
    aws_api: FakeAwsApi, message: str, eks: bool
) -> None:
    alert = _aws_stockout_alert(aws_api, message, eks)
    pool = "od" if eks else "spot"
    assert alert.summary == (
        f"2 units of {pool} failed after the request was accepted: {message}; removed them, backing off 20m and "
        f"using the next pool. {QUOTA_ADVICE}"
    )
    assert alert.details["error"] == message  # once, though two units failed with it
    assert alert.details["action"] == QUOTA_ADVICE
    assert "Service Quotas" in QUOTA_ADVICE


@pytest.mark.parametrize("message", [ICE_MESSAGE, BLOCK], ids=["no-capacity", "capacity-block-not-active"])
def test_an_aws_stockout_is_quoted_with_no_quota_advice(aws_api: FakeAwsApi, message: str) -> None:
    alert = _aws_stockout_alert(aws_api, message)
    assert alert.summary == (
        f"2 units of spot failed after the request was accepted: {message}; removed them, backing off 20m and using "
        "the next pool"
    )
    assert alert.details["error"] == message
    assert "action" not in alert.details


@pytest.mark.parametrize(("message", "quota"), [(TPU_QUOTA, True), (TPU_STOCKOUT, False)], ids=["quota", "stockout"])
def test_a_tpu_slice_groups_quota_or_stockout_is_quoted(gke_api: FakeGkeApi, message: str, quota: bool) -> None:
    clock = SimulatedClock(T0)
    clients = google_clients(gke_api.url)
    actuator = GkeTpuSliceActuator(clients.gke, CLUSTER, [SLICES], clock)
    gke_api.add_pool("v5e-0", nodes=SLICES.hosts_per_slice)
    gke_api.add_pool("v5e-1", nodes=SLICES.hosts_per_slice)
    gke_api.report_error("v5e-1", message=message)

    (state,) = actuator.list_pools()
    assert (state.failed_units, state.failed_messages, state.failed_for_quota) == (1, (message,), quota)
    cleared = clear_failed_units({POOL: state}, actuator, {POOL: TPU}, PlannerMemory(), clock.now())
    (alert,) = cleared.alerts
    assert alert.kind is AlertKind.STOCKOUT
    assert alert.summary.startswith(f"1 units of {POOL} failed after the request was accepted: {message}; removed")
    assert alert.summary.endswith(f". {QUOTA_ADVICE}") is quota
    assert alert.details["error"] == message
    assert alert.details.get("action") == (QUOTA_ADVICE if quota else None)


@pytest.mark.parametrize(
    ("message", "quota"),
    [
        (AWS_QUOTA, True),
        (REGION_QUOTA, True),
        (VCPU_QUOTA, True),
        ("Max spot instance count exceeded. Launching EC2 instance failed.", True),
        ("InstanceLimitExceeded: Your quota allows for 0 more running instance(s).", True),
        (ICE_MESSAGE, False),
        (BLOCK, False),
        ("Insufficient capacity. Launching EC2 instance failed.", False),
        ("There is no Spot capacity available that matches your request. Launching EC2 instance failed.", False),
    ],
)
def test_aws_quotas_are_told_from_stockouts(message: str, quota: bool) -> None:
    assert capacity_failure(message) == message
    assert quota_failure(message) is quota


@pytest.mark.parametrize(
    ("message", "quota"),
    [
        (TPU_QUOTA, True),
        ("Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 0.0 globally.", True),
        ('Insufficient regional quota to satisfy request: resource "NVIDIA_A100_GPUS"', True),
        (TPU_STOCKOUT, False),
        ("ZONE_RESOURCE_POOL_EXHAUSTED", False),
        ("Rate Limit Exceeded: CONCURRENT_OPERATIONS_QUOTA_EXCEEDED", False),  # a rate limit, not a quota used up
    ],
)
def test_google_quotas_are_told_from_stockouts(message: str, quota: bool) -> None:
    assert is_quota_message(message) is quota
    assert is_capacity_message(message) or not quota

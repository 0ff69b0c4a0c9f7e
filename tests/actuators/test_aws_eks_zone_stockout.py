"""A stockout in one zone of an EKS managed node group over several zones is that zone's, not the pool's, even when
EKS lists it as a node group health issue (``AsgInstanceLaunchFailures``, which names no zone of its own): the
group's activities place the failed launch in one zone, the group launches in the others, so no nodes count as
failed, no scale-up is refused and the pool is not backed off. boto3 against moto behind the proxy of
``tests.fakes.aws_api``; the executor's removal of failed units as the daemon runs it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.executor import clear_failed_units
from agent.planning import PlannerMemory
from models import AcceleratorFamily, ActionStatus, CapacityTier, PoolKind, PoolSpec
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import eks_actuator
from tests.fakes.aws_api import FakeAwsApi

T0 = datetime(2024, 5, 1, 15, 0, tzinfo=UTC)
ZONES = ("us-east-1a", "us-east-1b")
OD = PoolSpec(
    "od", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 8, 55.0, timedelta(minutes=10),
    ("training",),
)  # fmt: skip
ISSUE = (
    "Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently do not have sufficient "
    "p5.48xlarge capacity in the Availability Zone you requested (us-east-1a)."
)


def _one_zone_stockout(aws_api: FakeAwsApi, clock: SimulatedClock) -> None:
    """Two nodes over two zones; a scale-up to 4 whose launches fail in us-east-1a, and EKS's health issue for it."""
    aws_api.now = clock.now()
    aws_api.add_nodegroup("ml", "p5", nodes=2, zones=ZONES)
    aws_api.arm_late_stockout()
    assert eks_actuator(aws_api, clock).resize("od", 4, "up").status is ActionStatus.STARTED
    clock.advance(timedelta(minutes=1))
    aws_api.now = clock.now()
    aws_api.settle()  # the failed launch's Details name us-east-1a
    aws_api.health_issue("p5", "AsgInstanceLaunchFailures", ISSUE)


def test_a_one_zone_stockout_listed_as_a_health_issue_backs_nothing_off(aws_api: FakeAwsApi) -> None:
    clock = SimulatedClock(T0)
    _one_zone_stockout(aws_api, clock)
    actuator = eks_actuator(aws_api, clock)
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (2, 4, 0)

    cleared = clear_failed_units({"od": state}, actuator, {"od": OD}, PlannerMemory(), clock.now())
    assert (cleared.memory.backoff_until, cleared.alerts, cleared.results) == ({}, (), ())

    aws_api.finish_operations()
    grown = actuator.resize("od", 5, "more")  # not refused: us-east-1b launches
    assert (grown.status, grown.detail.split(" (update")[0]) == (ActionStatus.STARTED, "desired size 4 -> 5")

"""A stockout in one Availability Zone of a group that spans others is that zone's, not the pool's: the group
launches elsewhere (its default capacity distribution strategy, balanced-best-effort), so the units it places
there are not failed, nor is the pool backed off. boto3 against moto behind the proxy of ``tests.fakes.aws_api``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.executor import clear_failed_units
from agent.planning import PlannerMemory
from models import AcceleratorFamily, ActionStatus, CapacityTier, CapacityUnavailable, PoolKind, PoolSpec
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import asg_actuator
from tests.fakes.aws_api import ICE_MESSAGE, FakeAwsApi

T0 = datetime(2024, 5, 1, 15, 0, tzinfo=UTC)
ZONES = ("us-east-1a", "us-east-1b")
SPOT = PoolSpec(
    "spot", PoolKind.GPU_NODE_POOL, CapacityTier.SPOT, AcceleratorFamily.GPU, 8, 0, 8, 30.0, timedelta(minutes=10),
    ("training",), 0.05,
)  # fmt: skip


def _short_in_one_zone(aws_api: FakeAwsApi, clock: SimulatedClock) -> str:
    """Two nodes in a group over two zones; two more asked for, whose launch failed for capacity in us-east-1a."""
    aws_api.now = clock.now()
    group = aws_api.add_group("gpu-spot", nodes=2, zones=ZONES)
    aws_api.arm_late_stockout()
    assert asg_actuator(aws_api, clock).resize("spot", 4, "up").status is ActionStatus.STARTED
    clock.advance(timedelta(minutes=1))
    aws_api.now = clock.now()
    aws_api.settle()  # the failed launch: InsufficientInstanceCapacity in us-east-1a
    return group


def _desired(aws_api: FakeAwsApi, group: str) -> int:
    """The desired capacity as AWS reports it (the units that cannot launch included)."""
    found = aws_api.clients().autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[group])
    return int(found["AutoScalingGroups"][0]["DesiredCapacity"])


def test_a_stockout_in_one_zone_of_a_multi_zone_group_backs_nothing_off(aws_api: FakeAwsApi) -> None:
    clock = SimulatedClock(T0)
    group = _short_in_one_zone(aws_api, clock)
    actuator = asg_actuator(aws_api, clock)
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (2, 4, 0)  # us-east-1b may launch them

    cleared = clear_failed_units({"spot": state}, actuator, {"spot": SPOT}, PlannerMemory(), clock.now())
    assert (cleared.memory.backoff_until, cleared.alerts) == ({}, ())
    assert (aws_api.calls("SetDesiredCapacity"), _desired(aws_api, group)) == (1, 4)  # nothing cancelled
    assert actuator.resize("spot", 5, "more").status is ActionStatus.STARTED  # not refused as a stockout
    assert (aws_api.calls("SetDesiredCapacity"), _desired(aws_api, group)) == (2, 5)


def test_a_stockout_in_every_zone_of_the_group_is_the_pools(aws_api: FakeAwsApi) -> None:
    clock = SimulatedClock(T0)
    group = _short_in_one_zone(aws_api, clock)
    aws_api.stockout(group, ICE_MESSAGE.replace("us-east-1a", "us-east-1b"), zone="us-east-1b")
    actuator = asg_actuator(aws_api, clock)
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (2, 2, 2)
    with pytest.raises(CapacityUnavailable, match="InsufficientInstanceCapacity"):
        actuator.resize("spot", 5, "more")
    assert (aws_api.calls("SetDesiredCapacity"), _desired(aws_api, group)) == (2, 2)  # failed units removed

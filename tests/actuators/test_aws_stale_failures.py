"""A capacity failure counts the units a group is missing as failed only while it is current: recent, and nothing
changed in the group since; an instance still terminating is being replaced, not failing. Auto Scaling lists
activities for six weeks and replaces an interrupted Spot instance by terminating it first and launching after, so
an old failure must not turn that gap into failed units (which the executor would cancel, calling a stockout and
backing the pool off). boto3 against moto behind the proxy of ``tests.fakes.aws_api``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.executor import clear_failed_units
from agent.planning import PlannerMemory
from models import AcceleratorFamily, CapacityTier, CapacityUnavailable, PoolKind, PoolSpec
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import asg_actuator, eks_actuator
from tests.fakes.aws_api import FakeAwsApi

T0 = datetime(2024, 5, 1, 15, 0, tzinfo=UTC)
SPOT = PoolSpec(
    "spot", PoolKind.GPU_NODE_POOL, CapacityTier.SPOT, AcceleratorFamily.GPU, 8, 0, 8, 30.0, timedelta(minutes=10),
    ("training",), 0.05,
)  # fmt: skip


def _interrupted_group(aws_api: FakeAwsApi, failed_ago: timedelta) -> str:
    """Three Spot instances; a launch that failed for capacity ``failed_ago``; a minute ago, a Spot interruption of
    one instance, whose termination is still under way (the group launches its replacement after)."""
    aws_api.now = T0 - timedelta(days=3)
    group = aws_api.add_group("gpu-spot", nodes=3)
    aws_api.now = T0 - failed_ago
    aws_api.stockout(group)
    aws_api.now = T0 - timedelta(minutes=1)
    aws_api.interrupt(group, sorted(i["InstanceId"] for i in aws_api.group(group)["Instances"])[2])
    return group


def test_an_old_stockout_does_not_turn_a_spot_replacement_into_failed_units(aws_api: FakeAwsApi) -> None:
    group = _interrupted_group(aws_api, failed_ago=timedelta(days=2))
    actuator = asg_actuator(aws_api, SimulatedClock(T0))
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (2, 3, 0)

    cleared = clear_failed_units({"spot": state}, actuator, {"spot": SPOT}, PlannerMemory(), T0)
    assert (cleared.memory.backoff_until, cleared.alerts, cleared.results) == ({}, (), ())
    assert aws_api.calls("SetDesiredCapacity") == 0  # the group's replacement is not cancelled
    assert aws_api.group(group)["DesiredCapacity"] == 3


def test_a_recent_stockout_refuses_growth_but_a_replacement_since_is_not_failed(aws_api: FakeAwsApi) -> None:
    _interrupted_group(aws_api, failed_ago=timedelta(minutes=3))
    actuator = asg_actuator(aws_api, SimulatedClock(T0))
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (2, 3, 0)
    with pytest.raises(CapacityUnavailable, match="the latest launch failed"):
        actuator.resize("spot", 4, "up")  # capacity was short 3 minutes ago: not asked again yet
    assert aws_api.calls("SetDesiredCapacity") == 0


def test_a_stockout_still_current_counts_the_missing_units_but_not_the_replacement(aws_api: FakeAwsApi) -> None:
    aws_api.now = T0 - timedelta(days=3)
    group = aws_api.add_group("gpu-spot", nodes=3)
    aws_api.now = T0 - timedelta(minutes=5)
    aws_api.interrupt(group, sorted(i["InstanceId"] for i in aws_api.group(group)["Instances"])[2])
    clock = SimulatedClock(T0 - timedelta(minutes=4))
    aws_api.now = clock.now()
    aws_api.arm_late_stockout()
    asg_actuator(aws_api, clock).resize("spot", 5, "up")  # two more asked for: they cannot launch
    clock.advance(timedelta(minutes=2))
    aws_api.now = clock.now()
    aws_api.settle()
    (state,) = asg_actuator(aws_api, clock).list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (2, 3, 2)


def test_a_node_group_inherits_it(aws_api: FakeAwsApi) -> None:
    aws_api.now = T0 - timedelta(days=3)
    group = aws_api.add_nodegroup("ml", "p5", nodes=3)
    aws_api.now = T0 - timedelta(days=2)
    aws_api.stockout(group)
    aws_api.now = T0 - timedelta(minutes=1)
    aws_api.interrupt(group, sorted(i["InstanceId"] for i in aws_api.group(group)["Instances"])[0])
    (state,) = eks_actuator(aws_api, SimulatedClock(T0)).list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (2, 3, 0)

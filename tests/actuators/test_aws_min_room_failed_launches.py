"""The room an Auto Scaling group has above its minimum size while launches it was asked for failed, with boto3
against moto behind the proxy of ``tests.fakes.aws_api``: the room is counted from the instances that exist, so
drains never take the group's instances below its minimum size."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from actuators.aws_asg import Ec2AutoScalingGroupActuator
from models import TransientActuatorError
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import asg_actuator
from tests.fakes.aws_api import FakeAwsApi

T0 = datetime(2024, 5, 1, 15, 0, tzinfo=UTC)


def _two_ready_two_failed(fake: FakeAwsApi, min_size: int = 2) -> tuple[Ec2AutoScalingGroupActuator, list[str]]:
    """Group gpu-spot at minimum size ``min_size`` with 2 ready instances, asked for 4 whose 2 launches failed for
    capacity; a restarted agent over it, and the ready instances."""
    clock = SimulatedClock(T0)
    fake.now = clock.now()
    fake.add_group("gpu-spot", nodes=2, min_size=min_size)
    fake.arm_late_stockout()
    asg_actuator(fake, clock).resize("spot", 4, "up")
    clock.advance(timedelta(minutes=1))
    fake.now = clock.now()
    fake.settle()
    actuator = asg_actuator(fake, clock)
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (2, 2, 2)
    assert _group(fake)["DesiredCapacity"] == 4
    return actuator, _in_service(fake)


def _group(fake: FakeAwsApi) -> dict[str, Any]:
    """The group as its clients read it."""
    found = fake.clients().autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["gpu-spot"])
    return dict(found["AutoScalingGroups"][0])


def _in_service(fake: FakeAwsApi) -> list[str]:
    return sorted(i["InstanceId"] for i in _group(fake)["Instances"] if i["LifecycleState"] == "InService")


def test_failed_launches_give_no_room_to_drain(aws_api: FakeAwsApi) -> None:
    actuator, nodes = _two_ready_two_failed(aws_api)

    kept = actuator.kept_units("spot", nodes)

    assert "is at its minimum size 2" in kept and "(2 instances; desired capacity 4, 2 of them not launched)" in kept
    with pytest.raises(TransientActuatorError, match="minimum size 2"):
        actuator.delete_nodes("spot", nodes, "drain")
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 0
    assert _in_service(aws_api) == nodes  # not both terminated, leaving none of the minimum 2


def test_the_room_is_what_exists_above_the_minimum(aws_api: FakeAwsApi) -> None:
    actuator, nodes = _two_ready_two_failed(aws_api, min_size=1)

    kept_units = actuator.kept_units("spot", nodes)
    assert f"nodes {nodes[1]} stay" in kept_units and nodes[0] not in kept_units  # one of the two may go

    with pytest.raises(TransientActuatorError, match="minimum size 1") as kept:
        actuator.delete_nodes("spot", nodes, "drain")
    assert f"terminating {nodes[0]} ({nodes[0]})" in str(kept.value)
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 1
    assert _in_service(aws_api) == [nodes[1]]

"""Drained nodes whose instances an Auto Scaling group lists out of service (``Standby``), with boto3 against moto
behind the proxy of ``tests.fakes.aws_api``: such an instance still runs, so it is not taken for one already
leaving the group; its drain is not started, and its removal is refused naming the state and what to do."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from models import ActionStatus, TransientActuatorError
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import asg_actuator
from tests.fakes.aws_api import FakeAwsApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)


def _standby_one(fake: FakeAwsApi) -> tuple[str, str]:
    """Group gpu-spot of two nodes, an operator's Standby on the first (desired capacity 2 -> 1); (standby, other)."""
    fake.add_group("gpu-spot", nodes=2)
    first, second = sorted(i["InstanceId"] for i in fake.group("gpu-spot")["Instances"])
    fake.direct.autoscaling.enter_standby(
        AutoScalingGroupName="gpu-spot", InstanceIds=[first], ShouldDecrementDesiredCapacity=True
    )
    return first, second


def _lifecycle(fake: FakeAwsApi) -> dict[str, str]:
    """Each instance's lifecycle state as the group's clients read it."""
    found = fake.clients().autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["gpu-spot"])
    return {i["InstanceId"]: i["LifecycleState"] for i in found["AutoScalingGroups"][0]["Instances"]}


def _ec2_state(fake: FakeAwsApi, instance_id: str) -> str:
    found = fake.direct.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    return str(found["State"]["Name"])


def test_a_standby_node_is_not_drained(aws_api: FakeAwsApi) -> None:
    standby, _ = _standby_one(aws_api)
    kept = asg_actuator(aws_api, SimulatedClock(T0)).kept_units("spot", [standby])
    assert f"{standby} ({standby}, Standby)" in kept and "out of service" in kept
    assert "exit-standby --auto-scaling-group-name gpu-spot" in kept


def test_a_standby_node_drained_is_not_reported_gone(aws_api: FakeAwsApi) -> None:
    standby, _ = _standby_one(aws_api)
    actuator = asg_actuator(aws_api, SimulatedClock(T0))

    with pytest.raises(TransientActuatorError, match="out of service") as refused:
        actuator.delete_nodes("spot", [standby], "drain")

    assert "already leaving" not in str(refused.value) and "Standby" in str(refused.value)
    assert _lifecycle(aws_api)[standby] == "Standby" and _ec2_state(aws_api, standby) == "running"
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 0


def test_the_other_nodes_of_the_drain_are_removed(aws_api: FakeAwsApi) -> None:
    standby, other = _standby_one(aws_api)
    actuator = asg_actuator(aws_api, SimulatedClock(T0))

    with pytest.raises(TransientActuatorError, match="out of service") as refused:
        actuator.delete_nodes("spot", [standby, other], "drain")

    assert f"terminating {other} ({other})" in str(refused.value)
    assert aws_api.group("gpu-spot")["DesiredCapacity"] == 0
    assert _lifecycle(aws_api).get(standby) == "Standby"


def test_a_node_terminating_is_still_already_leaving(aws_api: FakeAwsApi) -> None:
    aws_api.add_group("gpu-spot", nodes=2)
    aws_api.hold_terminations()
    victim = sorted(i["InstanceId"] for i in aws_api.group("gpu-spot")["Instances"])[0]
    actuator = asg_actuator(aws_api, SimulatedClock(T0))
    assert actuator.delete_nodes("spot", [victim], "first").status is ActionStatus.STARTED
    assert _lifecycle(aws_api)[victim].startswith("Terminating")

    again = actuator.delete_nodes("spot", [victim], "again")
    assert again.detail == f"nodes {victim} are already leaving the group"

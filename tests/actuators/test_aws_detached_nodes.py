"""Drained nodes whose instances were detached from their Auto Scaling group (``DetachInstances``: the group no longer
lists them, EC2 still runs them), with boto3 against moto behind the proxy of ``tests.fakes.aws_api``: such an
instance is billed and uncounted, so it is not taken for one already leaving the group; its drain is not started,
and its removal is refused naming the instance and what to do. One EC2 terminated is gone."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from actuators.aws_groups import AutoScalingGroups
from models import ActionStatus, TransientActuatorError
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import asg_actuator
from tests.fakes.aws_api import FakeAwsApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)


def _detach_one(fake: FakeAwsApi) -> tuple[str, str]:
    """Group gpu-spot of two nodes, the first detached (desired capacity 2 -> 1); (detached, other)."""
    fake.add_group("gpu-spot", nodes=2)
    first, second = sorted(i["InstanceId"] for i in fake.group("gpu-spot")["Instances"])
    fake.direct.autoscaling.detach_instances(
        AutoScalingGroupName="gpu-spot", InstanceIds=[first], ShouldDecrementDesiredCapacity=True
    )
    assert first not in {i["InstanceId"] for i in fake.group("gpu-spot")["Instances"]}
    return first, second


def _ec2(fake: FakeAwsApi, instance_id: str) -> dict[str, object]:
    return dict(fake.direct.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0])


def _ec2_state(fake: FakeAwsApi, instance_id: str) -> str:
    state = _ec2(fake, instance_id)["State"]
    assert isinstance(state, dict)
    return str(state["Name"])


def test_a_detached_node_is_not_drained(aws_api: FakeAwsApi) -> None:
    detached, _ = _detach_one(aws_api)
    kept = asg_actuator(aws_api, SimulatedClock(T0)).kept_units("spot", [detached])
    assert f"{detached} ({detached}, EC2 state running)" in kept and "no longer lists" in kept
    assert f"aws ec2 terminate-instances --instance-ids {detached}" in kept
    assert f"attach-instances --auto-scaling-group-name gpu-spot --instance-ids {detached}" in kept


def test_a_detached_node_named_by_its_dns_name_is_not_drained(aws_api: FakeAwsApi) -> None:
    detached, _ = _detach_one(aws_api)
    node = str(_ec2(aws_api, detached)["PrivateDnsName"])
    kept = asg_actuator(aws_api, SimulatedClock(T0)).kept_units("spot", [node])
    assert f"{node} ({detached}, EC2 state running)" in kept


def test_a_detached_node_drained_is_not_reported_gone(aws_api: FakeAwsApi) -> None:
    detached, _ = _detach_one(aws_api)
    actuator = asg_actuator(aws_api, SimulatedClock(T0))

    with pytest.raises(TransientActuatorError, match="no longer lists") as refused:
        actuator.delete_nodes("spot", [detached], "drain")

    assert "already leaving" not in str(refused.value) and detached in str(refused.value)
    assert _ec2_state(aws_api, detached) == "running"
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 0


def test_the_other_nodes_of_the_drain_are_removed(aws_api: FakeAwsApi) -> None:
    detached, other = _detach_one(aws_api)
    actuator = asg_actuator(aws_api, SimulatedClock(T0))

    with pytest.raises(TransientActuatorError, match="no longer lists") as refused:
        actuator.delete_nodes("spot", [detached, other], "drain")

    assert f"terminating {other} ({other})" in str(refused.value)
    assert aws_api.group("gpu-spot")["DesiredCapacity"] == 0
    assert _ec2_state(aws_api, detached) == "running"


def test_a_detached_node_ec2_terminated_is_already_leaving(aws_api: FakeAwsApi) -> None:
    detached, _ = _detach_one(aws_api)
    aws_api.direct.ec2.terminate_instances(InstanceIds=[detached])
    actuator = asg_actuator(aws_api, SimulatedClock(T0))

    assert actuator.kept_units("spot", [detached]) == ""
    removed = actuator.delete_nodes("spot", [detached], "drain")
    assert (removed.status, removed.detail) == (ActionStatus.STARTED, f"nodes {detached} are already leaving the group")


def test_a_node_detached_between_the_read_and_the_termination_is_refused(aws_api: FakeAwsApi) -> None:
    aws_api.add_group("gpu-spot", nodes=2)
    first, _ = sorted(i["InstanceId"] for i in aws_api.group("gpu-spot")["Instances"])
    clients = aws_api.clients()
    groups = AutoScalingGroups(clients.autoscaling, clients.ec2)
    seen = groups.observe("spot", "gpu-spot", T0)  # the drain reads the group: the instance is in service

    aws_api.direct.autoscaling.detach_instances(
        AutoScalingGroupName="gpu-spot", InstanceIds=[first], ShouldDecrementDesiredCapacity=True
    )
    with pytest.raises(TransientActuatorError, match="no longer lists") as refused:
        groups.remove_nodes("spot", seen, [first])

    assert "had already left" not in str(refused.value)
    assert _ec2_state(aws_api, first) == "running"

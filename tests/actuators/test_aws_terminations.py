"""A drained node's instance that leaves its Auto Scaling group between the read and the termination (EC2 takes a
Spot instance back, Auto Scaling replaces an unhealthy one) is already gone, not a reason to block the pool. boto3
against moto behind the proxy of ``tests.fakes.aws_api``."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from actuators.aws_groups import AutoScalingGroups
from models import ActionStatus, TransientActuatorError
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import asg_actuator
from tests.fakes.aws_api import FakeAwsApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)


def _dns_names(aws_api: FakeAwsApi, group: str) -> dict[str, str]:
    ids = [i["InstanceId"] for i in aws_api.group(group)["Instances"]]
    found = aws_api.direct.ec2.describe_instances(InstanceIds=ids)["Reservations"]
    return {i["InstanceId"]: i["PrivateDnsName"] for r in found for i in r["Instances"]}


def test_a_drained_node_whose_instance_ec2_took_back_meanwhile_is_gone_not_a_blocked_pool(aws_api: FakeAwsApi) -> None:
    group = aws_api.add_group("gpu-spot", nodes=3)
    dns = _dns_names(aws_api, group)
    victim = sorted(dns)[1]
    clients = aws_api.clients()
    groups = AutoScalingGroups(clients.autoscaling, clients.ec2)
    seen = groups.observe("spot", group, T0)  # the drain reads the group: the instance is in service

    aws_api.reclaim(victim)  # ... and a Spot interruption takes it before the termination is sent
    detail = groups.remove_nodes("spot", seen, [dns[victim]])

    assert detail == f"{dns[victim]} ({victim}) had already left the group"
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 1
    after = aws_api.group(group)
    assert victim not in {i["InstanceId"] for i in after["Instances"]}
    assert (after["DesiredCapacity"], len(after["Instances"])) == (3, 3)  # the group replaces it; the plan decides


def test_a_termination_refused_for_an_instance_still_in_the_group_is_tried_again(aws_api: FakeAwsApi) -> None:
    group = aws_api.add_group("gpu-spot", nodes=2)
    dns = _dns_names(aws_api, group)
    victim = sorted(dns)[0]
    actuator = asg_actuator(aws_api, SimulatedClock(T0))
    aws_api.fail(
        "TerminateInstanceInAutoScalingGroup",
        "ValidationError",
        f"The instance {victim} is not in InService or Standby.",
    )
    with pytest.raises(TransientActuatorError, match="is not in InService or Standby"):
        actuator.delete_nodes("spot", [dns[victim]], "drain-1")
    assert aws_api.group(group)["DesiredCapacity"] == 2

    done = actuator.delete_nodes("spot", [dns[victim]], "drain-1-retry")
    assert done.status is ActionStatus.STARTED and done.detail == f"terminating {dns[victim]} ({victim})"
    assert aws_api.group(group)["DesiredCapacity"] == 1


def test_a_node_whose_instance_is_not_found_is_looked_for_again(aws_api: FakeAwsApi) -> None:
    group = aws_api.add_group("gpu-spot", nodes=1)
    actuator = asg_actuator(aws_api, SimulatedClock(T0))
    with pytest.raises(TransientActuatorError, match=r"no EC2 instance has the private DNS name"):
        actuator.delete_nodes("spot", ["ip-10-9-9-9.ec2.internal"], "drain-1")
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 0
    assert aws_api.group(group)["DesiredCapacity"] == 1

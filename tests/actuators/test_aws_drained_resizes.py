"""AWS pools whose nodes a drainer removes never shrink by a resize: the adapter reads the group again before it acts,
and a group that grew after the tick read it (someone raised its desired capacity) turned a scale-up planned on the
older read into a shrink, terminating the newest ready instance, busy or not, with no cordon and no eviction. Such a
resize is now rejected; the failed launches of the fresh read are still removed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from actuators.aws_asg import Ec2AutoScalingGroupActuator
from actuators.aws_eks import EksNodegroupActuator
from actuators.aws_groups import AutoScalingGroups
from actuators.aws_wiring import build_aws_actuators
from config.aws import AutoScalingGroupMapping, AwsSettings, NodegroupMapping
from models import ActionStatus
from models.clock import SimulatedClock
from tests.fakes.aws_api import REGION, FakeAwsApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)


def _asg(fake: FakeAwsApi, clock: SimulatedClock) -> Ec2AutoScalingGroupActuator:
    clients = fake.clients()
    mapping = AutoScalingGroupMapping(pool="spot", group="gpu-spot")
    groups = AutoScalingGroups(clients.autoscaling, clients.ec2)
    return Ec2AutoScalingGroupActuator(groups, [mapping], clock, drained=True)


def _eks(fake: FakeAwsApi, clock: SimulatedClock) -> EksNodegroupActuator:
    clients = fake.clients()
    groups = AutoScalingGroups(clients.autoscaling, clients.ec2)
    mapping = NodegroupMapping(pool="od", nodegroup="p5")
    return EksNodegroupActuator(clients.eks, groups, "ml", [mapping], clock, drained=True)


def _in_service(fake: FakeAwsApi, group: str) -> list[str]:
    return sorted(i["InstanceId"] for i in fake.group(group)["Instances"] if i["LifecycleState"] == "InService")


def test_a_scale_up_planned_before_the_group_grew_terminates_nothing(aws_api: FakeAwsApi) -> None:
    aws_api.add_group("gpu-spot", nodes=1)
    actuator = _asg(aws_api, SimulatedClock(T0))
    (state,) = actuator.list_pools()  # the tick's read
    assert (state.ready_units, state.target_units) == (1, 1)
    aws_api.direct.autoscaling.set_desired_capacity(AutoScalingGroupName="gpu-spot", DesiredCapacity=3)
    aws_api.settle()  # the group grew after the plan read it
    running = _in_service(aws_api, "gpu-spot")
    assert len(running) == 3

    result = actuator.resize("spot", state.target_units + 1, "spot->up")  # the plan's 1 -> 2

    assert result.status is ActionStatus.REJECTED
    assert "pool changed since the plan: it holds 3 nodes, more than the 2 asked" in result.detail
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 0
    assert aws_api.calls("SetDesiredCapacity") == 0
    assert aws_api.group("gpu-spot")["DesiredCapacity"] == 3
    assert _in_service(aws_api, "gpu-spot") == running
    assert actuator.resize("spot", state.target_units + 1, "spot->up") == result  # the same key, the same answer


def test_a_node_group_that_grew_after_the_plan_loses_no_node(aws_api: FakeAwsApi) -> None:
    group = aws_api.add_nodegroup("ml", "p5", nodes=1)
    actuator = _eks(aws_api, SimulatedClock(T0))
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units) == (1, 1)
    aws_api.direct.autoscaling.set_desired_capacity(AutoScalingGroupName=group, DesiredCapacity=3)
    aws_api.settle()
    running = _in_service(aws_api, group)

    result = actuator.resize("od", state.target_units + 1, "od->up")

    assert result.status is ActionStatus.REJECTED
    assert "pool changed since the plan: it holds 3 nodes, more than the 2 asked" in result.detail
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 0
    assert aws_api.calls("UpdateNodegroupConfig") == 0
    assert _in_service(aws_api, group) == running


def test_the_removal_of_failed_launches_still_goes_through(aws_api: FakeAwsApi) -> None:
    aws_api.add_group("gpu-spot", nodes=1)
    actuator = _asg(aws_api, SimulatedClock(T0))
    aws_api.arm_late_stockout()
    assert actuator.resize("spot", 4, "spot->up").status is ActionStatus.STARTED
    aws_api.settle()  # the group records a failed launch: the 3 asked for cannot be launched
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 3)

    result = actuator.resize("spot", state.target_units, "spot->clear-failed")

    assert result.status is ActionStatus.STARTED
    assert result.detail == "removed 3 instances that could not be launched"
    assert aws_api.group("gpu-spot")["DesiredCapacity"] == 1
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 0


def test_the_daemons_aws_adapters_are_drained(aws_api: FakeAwsApi, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    aws_api.add_group("gpu-spot", nodes=2)
    group = aws_api.add_nodegroup("ml", "p5", nodes=2)
    settings = AwsSettings(
        region=REGION,
        cluster="ml",
        endpoint=aws_api.url,
        nodegroups=(NodegroupMapping(pool="od", nodegroup="p5"),),
        auto_scaling_groups=(AutoScalingGroupMapping(pool="spot", group="gpu-spot"),),
    )
    routes = build_aws_actuators(settings, SimulatedClock(T0)).routes

    results = [routes["spot"].resize("spot", 1, "spot->down"), routes["od"].resize("od", 1, "od->down")]

    assert [r.status for r in results] == [ActionStatus.REJECTED, ActionStatus.REJECTED]
    assert all("it holds 2 nodes, more than the 1 asked" in r.detail for r in results)
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 0
    assert [len(_in_service(aws_api, g)) for g in ("gpu-spot", group)] == [2, 2]

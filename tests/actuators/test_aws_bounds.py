"""The AWS adapters within what AWS accepts, with boto3 against moto behind the proxy of ``tests.fakes.aws_api``: a
group's and a node group's minimum and maximum sizes, node group health issues that outlive their failure, and
EKS's update list read page by page."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from botocore.exceptions import ClientError

from models import ActionStatus, CapacityUnavailable, TransientActuatorError
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import asg_actuator, eks_actuator
from tests.fakes.aws_api import FakeAwsApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)
SHORTAGE = (
    "Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently do not have sufficient "
    "p5.48xlarge capacity in the Availability Zone you requested (us-east-1a)."
)


def _instances(fake: FakeAwsApi, group: str) -> list[str]:
    return sorted(i["InstanceId"] for i in fake.group(group)["Instances"])


def _aws_error(call: Callable[[], object]) -> dict[str, str]:
    """The AWS error a call through the proxy fails with."""
    with pytest.raises(ClientError) as raised:
        call()
    return dict(raised.value.response["Error"])


# -- the fake refuses what AWS refuses ---------------------------------------------------------------------------
def test_the_fake_refuses_a_desired_capacity_outside_the_bounds_and_a_termination_below_the_minimum(
    aws_api: FakeAwsApi,
) -> None:
    aws_api.add_group("gpu-spot", nodes=2, min_size=2, max_size=4)
    autoscaling = aws_api.clients().autoscaling
    below = _aws_error(lambda: autoscaling.set_desired_capacity(AutoScalingGroupName="gpu-spot", DesiredCapacity=1))
    assert below == {
        "Type": "Sender",
        "Code": "ValidationError",
        "Message": "New SetDesiredCapacity value 1 is below min value 2 for the AutoScalingGroup.",
    }
    above = _aws_error(lambda: autoscaling.set_desired_capacity(AutoScalingGroupName="gpu-spot", DesiredCapacity=5))
    assert above["Message"] == "New SetDesiredCapacity value 5 is above max value 4 for the AutoScalingGroup."
    victim = _instances(aws_api, "gpu-spot")[0]
    refused = _aws_error(
        lambda: autoscaling.terminate_instance_in_auto_scaling_group(
            InstanceId=victim, ShouldDecrementDesiredCapacity=True
        )
    )
    assert refused["Code"] == "ValidationError"
    assert refused["Message"].startswith("Currently, desiredSize equals minSize (2). Terminating instance without")
    assert victim in _instances(aws_api, "gpu-spot")


def test_the_fake_refuses_a_node_group_desired_size_outside_its_bounds(aws_api: FakeAwsApi) -> None:
    aws_api.add_nodegroup("ml", "p5", nodes=2, min_size=2, max_size=4)
    eks = aws_api.clients().eks
    where = {"clusterName": "ml", "nodegroupName": "p5"}
    below = _aws_error(lambda: eks.update_nodegroup_config(**where, scalingConfig={"desiredSize": 1}))
    assert below == {
        "Code": "InvalidParameterException",
        "Message": "Minimum capacity 2 can't be greater than desired size 1",
    }
    above = _aws_error(lambda: eks.update_nodegroup_config(**where, scalingConfig={"desiredSize": 5}))
    assert above["Message"] == "desiredSize can't be greater than maxSize"
    assert aws_api.calls("UpdateNodegroupConfig") == 2
    assert eks.list_updates(name="ml", nodegroupName="p5")["updateIds"] == []


def test_the_fake_pages_list_updates_at_100(aws_api: FakeAwsApi) -> None:
    aws_api.add_nodegroup("ml", "p5", nodes=1)
    aws_api.add_settled_updates("ml", "p5", 150)
    eks = aws_api.clients().eks
    first = eks.list_updates(name="ml", nodegroupName="p5")
    assert len(first["updateIds"]) == 100 and first["nextToken"]
    second = eks.list_updates(name="ml", nodegroupName="p5", nextToken=first["nextToken"])
    assert len(second["updateIds"]) == 50 and "nextToken" not in second
    assert len(set(first["updateIds"]) | set(second["updateIds"])) == 150
    small = eks.list_updates(name="ml", nodegroupName="p5", maxResults=7)
    assert len(small["updateIds"]) == 7 and small["nextToken"]
    assert _aws_error(lambda: eks.list_updates(name="ml", nodegroupName="p5", maxResults=101))["Code"] == (
        "InvalidParameterException"
    )


# -- Auto Scaling groups -----------------------------------------------------------------------------------------
def test_a_shrink_stops_at_the_group_minimum_and_says_so(aws_api: FakeAwsApi) -> None:
    aws_api.add_group("gpu-spot", nodes=4, min_size=2)
    clock = SimulatedClock(T0)
    actuator = asg_actuator(aws_api, clock)

    first = actuator.resize("spot", 0, "down")

    assert first.status is ActionStatus.STARTED
    assert "2 not removed" in first.detail and "minimum size 2" in first.detail and "min_units" in first.detail
    assert aws_api.group("gpu-spot")["DesiredCapacity"] == 2
    assert len(_instances(aws_api, "gpu-spot")) == 2
    again = actuator.resize("spot", 0, "down-again")  # nothing left to give: refused, the pool is not blocked
    assert again.status is ActionStatus.REJECTED
    assert "minimum size 2" in again.detail
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 2


def test_a_scale_up_stops_at_the_group_maximum_then_is_refused_for_it(aws_api: FakeAwsApi) -> None:
    aws_api.add_group("gpu-spot", nodes=1, max_size=4)
    clock = SimulatedClock(T0)
    actuator = asg_actuator(aws_api, clock)

    grown = actuator.resize("spot", 6, "up")

    assert grown.status is ActionStatus.STARTED
    assert "desired capacity 1 -> 4" in grown.detail and "2 not added" in grown.detail
    assert "maximum size 4" in grown.detail and "max_units" in grown.detail
    assert aws_api.group("gpu-spot")["DesiredCapacity"] == 4
    with pytest.raises(CapacityUnavailable, match="maximum size 4"):
        actuator.resize("spot", 6, "up-again")  # the demand goes to the next pool
    assert aws_api.calls("SetDesiredCapacity") == 1


def test_failed_launches_the_minimum_asks_for_stay_and_the_rest_go(aws_api: FakeAwsApi) -> None:
    aws_api.add_group("gpu-spot", nodes=1)
    clock = SimulatedClock(T0)
    aws_api.arm_late_stockout()
    asg_actuator(aws_api, clock).resize("spot", 3, "up")
    aws_api.settle()  # 2 launches failed for capacity
    aws_api.set_bounds("gpu-spot", min_size=2, max_size=16)  # meanwhile an operator raised MinSize to 2

    actuator = asg_actuator(aws_api, clock)
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 2)
    removed = actuator.resize("spot", state.target_units, "clear-failed")

    assert removed.status is ActionStatus.STARTED
    assert "removed 1 instances" in removed.detail and "minimum size 2" in removed.detail
    assert aws_api.group("gpu-spot")["DesiredCapacity"] == 2 - 1  # moto's own: the fake adds the one held launch
    (state,) = actuator.list_pools()
    assert (state.target_units, state.failed_units) == (1, 1)
    held = actuator.resize("spot", 1, "clear-failed-again")  # the group keeps retrying the one MinSize asks for
    assert held.status is ActionStatus.REJECTED and "minimum size 2" in held.detail


def test_a_drained_node_the_group_cannot_lose_is_kept_until_it_can(aws_api: FakeAwsApi) -> None:
    aws_api.add_group("gpu-spot", nodes=2, min_size=2)
    clock = SimulatedClock(T0)
    actuator = asg_actuator(aws_api, clock)
    victim = _instances(aws_api, "gpu-spot")[0]

    with pytest.raises(TransientActuatorError, match="minimum size 2") as kept:
        actuator.delete_nodes("spot", [victim], "drain-1")

    assert "min_units" in str(kept.value) and victim in str(kept.value)
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 0  # neither refused by AWS nor replaced
    assert victim in _instances(aws_api, "gpu-spot")
    aws_api.set_bounds("gpu-spot", min_size=1, max_size=16)  # the operator lowers MinSize: the drain goes on
    assert actuator.delete_nodes("spot", [victim], "drain-1").status is ActionStatus.STARTED
    assert victim not in _instances(aws_api, "gpu-spot")
    assert aws_api.group("gpu-spot")["DesiredCapacity"] == 1


# -- EKS managed node groups -------------------------------------------------------------------------------------
def test_a_node_group_grows_to_its_max_size_and_its_bounds_stay_the_operators(aws_api: FakeAwsApi) -> None:
    aws_api.add_nodegroup("ml", "p5", nodes=1, max_size=4)
    clock = SimulatedClock(T0)

    grown = eks_actuator(aws_api, clock).resize("od", 6, "up")

    assert grown.status is ActionStatus.STARTED
    assert "desired size 1 -> 4" in grown.detail and "EKS node group 'p5' has maximum size 4" in grown.detail
    scaling = aws_api.clients().eks.describe_nodegroup(clusterName="ml", nodegroupName="p5")["nodegroup"]
    assert scaling["scalingConfig"] == {"minSize": 0, "maxSize": 4, "desiredSize": 4}
    aws_api.settle()
    with pytest.raises(CapacityUnavailable, match="maximum size 4"):
        eks_actuator(aws_api, clock).resize("od", 6, "up-again")


def test_a_node_group_shrinks_to_its_min_size_and_keeps_a_drained_node_at_it(aws_api: FakeAwsApi) -> None:
    group = aws_api.add_nodegroup("ml", "p5", nodes=3, min_size=2)
    clock = SimulatedClock(T0)
    actuator = eks_actuator(aws_api, clock)

    shrunk = actuator.resize("od", 0, "down")

    assert shrunk.status is ActionStatus.STARTED and "EKS node group 'p5' has minimum size 2" in shrunk.detail
    assert len(_instances(aws_api, group)) == 2
    with pytest.raises(TransientActuatorError, match="minimum size 2"):
        actuator.delete_nodes("od", [_instances(aws_api, group)[0]], "drain-1")
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 1


def test_dropping_failed_nodes_never_lowers_the_node_group_min_size(aws_api: FakeAwsApi) -> None:
    group = aws_api.add_nodegroup("ml", "p5", nodes=1)
    clock = SimulatedClock(T0)
    aws_api.arm_late_stockout()
    eks_actuator(aws_api, clock).resize("od", 3, "up")
    aws_api.settle()  # 2 launches failed for capacity
    aws_api.set_bounds(group, min_size=2, max_size=16)

    actuator = eks_actuator(aws_api, clock)
    (state,) = actuator.list_pools()
    assert state.failed_units == 2
    removed = actuator.resize("od", state.target_units, "clear-failed")

    assert removed.status is ActionStatus.STARTED and "removed 1 nodes" in removed.detail
    found = aws_api.clients().eks.describe_nodegroup(clusterName="ml", nodegroupName="p5")["nodegroup"]
    assert found["scalingConfig"] == {"minSize": 2, "maxSize": 16, "desiredSize": 2}


def test_a_node_group_health_issue_stops_counting_once_cleared_or_contradicted(aws_api: FakeAwsApi) -> None:
    group = aws_api.add_nodegroup("ml", "p5", nodes=1)
    clock = SimulatedClock(T0)
    actuator = eks_actuator(aws_api, clock)
    aws_api.health_issue("p5", "AsgInstanceLaunchFailures", SHORTAGE)
    with pytest.raises(CapacityUnavailable, match="AsgInstanceLaunchFailures"):
        actuator.resize("od", 3, "up")  # a fresh report: growth refused, as after a failed launch
    assert aws_api.calls("UpdateNodegroupConfig") == 0

    clock.advance(timedelta(minutes=10))  # EKS still lists it, ten minutes after it was first seen
    aws_api.arm_late_stockout()  # the new instances stay unlaunched, and the group launched nothing since
    grown = actuator.resize("od", 3, "up-later")  # growth is refused only for ten minutes after the report
    assert grown.status is ActionStatus.STARTED
    aws_api.finish_operations()
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 2)  # still listed: failed

    aws_api.clear_health_issues("p5")
    assert actuator.list_pools()[0].failed_units == 0
    aws_api.health_issue("p5", "AsgInstanceLaunchFailures", SHORTAGE)  # cleared, then reported again: a new failure
    assert actuator.list_pools()[0].failed_units == 2
    aws_api.launch_activity(group)  # but the group has launched since: the report is old news
    assert actuator.list_pools()[0].failed_units == 0


def test_the_update_in_progress_is_found_past_the_first_page(aws_api: FakeAwsApi) -> None:
    aws_api.add_nodegroup("ml", "p5", nodes=1)
    aws_api.add_settled_updates("ml", "p5", 120)  # a long-lived node group's history: two pages
    clock = SimulatedClock(T0)
    first = eks_actuator(aws_api, clock).resize("od", 3, "up")

    after = eks_actuator(aws_api, clock)  # a restarted agent
    (state,) = after.list_pools()
    assert state.in_flight_operation is not None and state.in_flight_operation in first.detail
    with pytest.raises(TransientActuatorError, match="still in progress"):
        after.resize("od", 4, "up-more")
    assert aws_api.calls("UpdateNodegroupConfig") == 1
    before = aws_api.calls("DescribeUpdate")
    after.list_pools()  # settled updates are described once
    assert aws_api.calls("DescribeUpdate") - before == 1

"""A group's scaling activities are read past the first page: DescribeScalingActivities lists those in progress first
(each termination a termination lifecycle hook holds is one) and at most 100 a page, so after a release of many nodes
the failed launch that followed, and some of the agent's own terminations, are on a later page. An adapter started
afresh (a restart) knows its own terminations only from their activities. boto3 against moto behind the proxy of
``tests.fakes.aws_api``, which pages as AWS does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from models import ActionStatus
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import asg_actuator
from tests.fakes.aws_api import FakeAwsApi

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("released", [21, 101], ids=["past-20", "past-a-page"])
def test_failed_launches_behind_many_hooked_terminations_are_read(aws_api: FakeAwsApi, released: int) -> None:
    clock = SimulatedClock(T0)
    aws_api.now = clock.now()
    group = aws_api.add_group("gpu-spot", nodes=released + 2, max_size=released + 8)
    aws_api.hold_terminations()
    actuator = asg_actuator(aws_api, clock)
    ids = sorted(i["InstanceId"] for i in aws_api.group(group)["Instances"])
    assert actuator.delete_nodes("spot", ids[:released], "drained").status is ActionStatus.STARTED

    aws_api.arm_late_stockout()
    assert actuator.resize("spot", 4, "up").status is ActionStatus.STARTED  # 2 -> 4: both launches fail
    clock.advance(timedelta(minutes=1))
    aws_api.now = clock.now()
    aws_api.settle()

    listed = aws_api.clients().autoscaling.describe_scaling_activities(AutoScalingGroupName=group)
    first = [a["Description"] for a in listed["Activities"]]
    assert len(first) == min(released + 1, 100)
    assert not any(d.startswith("Launching") for d in first[:released])  # the failure comes after the terminations

    read = aws_api.calls("DescribeScalingActivities")
    (state,) = asg_actuator(aws_api, clock).list_pools()  # restarted: the hooked terminations are known from activities
    assert (state.ready_units, state.target_units, state.failed_units) == (2, 2, 2)
    assert aws_api.calls("DescribeScalingActivities") - read == (1 if released < 100 else 2)


def test_activities_older_than_a_failure_can_be_current_are_not_paged_through(aws_api: FakeAwsApi) -> None:
    """Six weeks of a busy group's activities are listed; past those in progress and the last ten minutes' nothing
    read can still be current, so one page is read, not every one."""
    clock = SimulatedClock(T0)
    aws_api.now = clock.now() - timedelta(hours=1)
    group = aws_api.add_group("gpu-spot", nodes=150, max_size=200)
    for _ in range(250):
        aws_api.launch_activity(group)
    aws_api.now = clock.now()
    read = aws_api.calls("DescribeScalingActivities")
    (state,) = asg_actuator(aws_api, clock).list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (150, 150, 0)
    assert aws_api.calls("DescribeScalingActivities") - read == 1

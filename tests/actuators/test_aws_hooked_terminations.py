"""The agent's own terminations, held by a termination lifecycle hook (``Terminating:Wait``; EKS managed node
groups always have one), are no replacements on their way: the desired capacity was lowered with them, so a launch
that fails after them leaves as many failed units as nodes missing. Read by the adapter that terminated them and by
one started afresh (a restart), which knows them from the termination activity's Cause. boto3 against moto behind
the proxy of ``tests.fakes.aws_api``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from models import ActionStatus
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import asg_actuator
from tests.fakes.aws_api import FakeAwsApi

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("restarted", [False, True])
def test_hooked_terminations_of_the_agent_do_not_hide_failed_launches(aws_api: FakeAwsApi, restarted: bool) -> None:
    clock = SimulatedClock(T0)
    aws_api.now = clock.now()
    group = aws_api.add_group("gpu-spot", nodes=4)
    aws_api.settle()
    aws_api.hold_terminations()
    actuator = asg_actuator(aws_api, clock)
    ids = sorted(i["InstanceId"] for i in aws_api.group(group)["Instances"])
    assert actuator.delete_nodes("spot", ids[:2], "drained").status is ActionStatus.STARTED  # desired 4 -> 2
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (2, 2, 0)

    aws_api.arm_late_stockout()
    assert actuator.resize("spot", 4, "up").status is ActionStatus.STARTED  # the 2 launches fail
    clock.advance(timedelta(minutes=1))
    aws_api.now = clock.now()
    aws_api.settle()

    reader = asg_actuator(aws_api, clock) if restarted else actuator
    (state,) = reader.list_pools()
    (listed,) = aws_api.clients().autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[group])[
        "AutoScalingGroups"
    ]
    held = sorted(i["InstanceId"] for i in listed["Instances"] if i["LifecycleState"] == "Terminating:Wait")
    assert (held, listed["DesiredCapacity"]) == (ids[:2], 4)  # the hook holds the 2 terminated: 2 + 2 + 2 listed
    assert (state.ready_units, state.target_units, state.failed_units) == (2, 2, 2)

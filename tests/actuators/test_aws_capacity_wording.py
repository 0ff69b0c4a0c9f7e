"""Launches an Auto Scaling group could not make for want of capacity or quota, in the words AWS uses for them, are
a stockout: failed units the adapter reads as capacity or quota (AWS's message passed on with them), a refused
scale-up, and a back-off with a stockout alert when the executor removes them. The AWS adapters own that reading
(``actuators.aws_errors``); the executor reads none of AWS's words itself. boto3 against moto behind the proxy of
``tests.fakes.aws_api``."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from agent.executor import MIN_BACKOFF, clear_failed_units
from agent.planning import PlannerMemory
from agent.planning.memory import BackoffReason
from models import (
    AcceleratorFamily,
    ActionStatus,
    AlertKind,
    CapacityTier,
    CapacityUnavailable,
    PoolKind,
    PoolSpec,
)
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import asg_actuator
from tests.fakes.aws_api import FakeAwsApi

T0 = datetime(2024, 5, 1, 15, 0, tzinfo=UTC)
LEAD = timedelta(minutes=20)
SPOT = PoolSpec(
    "spot", PoolKind.GPU_NODE_POOL, CapacityTier.SPOT, AcceleratorFamily.GPU, 8, 0, 8, 30.0, LEAD, ("training",), 0.05
)
# EC2's instance quota reached, as a launch of an Auto Scaling group meets it (InstanceLimitExceeded;
# hashicorp/terraform issue 1891, quintilesims/layer0 issue 273); EC2 short of the Dedicated Host or EBS capacity a
# launch needs (InsufficientHostCapacity, InsufficientVolumeCapacity: EC2 API Reference, "Error codes"), in the form
# Auto Scaling gives a code and its message ("Could not launch ... Instances. <code> - <message>",
# kubernetes/autoscaler issue 3241).
QUOTA = "Your quota allows for 0 more running instance(s). You requested at least 1. Launching EC2 instance failed."
HOST = (
    "Could not launch On-Demand Instances. InsufficientHostCapacity - There is not enough capacity to fulfill your "
    "Dedicated Host request. Launching EC2 instance failed."
)
VOLUME = (
    "Could not launch On-Demand Instances. InsufficientVolumeCapacity - There is not enough capacity to fulfill your "
    "EBS volume provision request. Launching EC2 instance failed."
)
# Auto Scaling's own words for a launch EC2 had no capacity for (Spinnaker's entity tags documentation, its
# ec2_instance_launch_error alert), for the Region's running instance quota reached ("<number> instance(s) are already
# running", ts-as-capacity-3) and for a Capacity Block the group launches into that has not started
# (ts-as-capacity-5): Auto Scaling User Guide, "Troubleshoot Amazon EC2 Auto Scaling: EC2 instance launch failures".
INSUFFICIENT = "Insufficient capacity. Launching EC2 instance failed."
RUNNING = "20 instance(s) are already running. Launching EC2 instance failed."
BLOCK = "Your Capacity Block reservation cr-0123456789abcdef0 is not active yet. Launching EC2 instance failed."


@pytest.mark.parametrize(
    "message",
    [QUOTA, HOST, VOLUME, INSUFFICIENT, RUNNING, BLOCK],
    ids=[
        "instance-quota",
        "host-capacity",
        "volume-capacity",
        "insufficient-capacity",
        "region-instance-quota",
        "capacity-block-not-active",
    ],
)
def test_launches_failed_for_capacity_or_quota_back_the_pool_off(aws_api: FakeAwsApi, message: str) -> None:
    clock = SimulatedClock(T0)
    aws_api.now = clock.now()
    aws_api.add_group("gpu-spot", nodes=1)
    aws_api.arm_late_stockout(message)
    assert asg_actuator(aws_api, clock).resize("spot", 3, "up").status is ActionStatus.STARTED
    clock.advance(timedelta(minutes=1))
    aws_api.now = clock.now()
    aws_api.settle()  # both launches fail with the message

    actuator = asg_actuator(aws_api, clock)
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 2)
    assert (state.failed_messages, state.failed_for_capacity) == ((message, message), True)

    cleared = clear_failed_units({"spot": state}, actuator, {"spot": SPOT}, PlannerMemory(), clock.now())
    assert cleared.memory.backoff_until == {"spot": clock.now() + max(MIN_BACKOFF, LEAD)}
    assert cleared.memory.backoff_reason == {"spot": BackoffReason.STOCKOUT}
    assert [alert.kind for alert in cleared.alerts] == [AlertKind.STOCKOUT]
    with pytest.raises(CapacityUnavailable, match=re.escape(message.split(".", maxsplit=1)[0])):
        actuator.resize("spot", 4, "up-again")
    assert aws_api.group("gpu-spot")["DesiredCapacity"] == 1  # the failed units went, nothing more was asked

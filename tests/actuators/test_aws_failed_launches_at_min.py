"""A scale-up of a pool whose failed launches its minimum size keeps asked for, with boto3 against moto behind the
proxy of ``tests.fakes.aws_api``: the desired capacity already covers it, so it fails for AWS's own reason and the
minimum size, not for the maximum size, and it is no stockout unless AWS's reason is one."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from actuators.base import Actuator
from models import ActuatorError, CapacityUnavailable, TransientActuatorError
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import asg_actuator, eks_actuator
from tests.fakes.aws_api import ICE_MESSAGE, FakeAwsApi

T0 = datetime(2024, 5, 1, 15, 0, tzinfo=UTC)
SUBNET = (
    "There are not enough free addresses in subnet 'subnet-1' to satisfy the requested number of instances. "
    "Launching EC2 instance failed."
)


def _held_at_min(fake: FakeAwsApi, eks: bool, message: str) -> tuple[Actuator, str]:
    """A pool of 1 node asked to grow to 3, whose 2 launches fail with ``message``, its minimum size then raised
    to 3 (the group keeps asking for them); the actuator and its pool."""
    clock = SimulatedClock(T0)
    fake.now = clock.now()
    if eks:
        group = fake.add_nodegroup("ml", "p5", nodes=1, min_size=0)
    else:
        group = fake.add_group("gpu-spot", nodes=1, min_size=0)
    fake.arm_late_stockout(message)
    make: Callable[[], Actuator] = (lambda: eks_actuator(fake, clock)) if eks else (lambda: asg_actuator(fake, clock))
    pool = "od" if eks else "spot"
    make().resize(pool, 3, "up")
    clock.advance(timedelta(minutes=1))
    fake.now = clock.now()
    fake.settle()
    fake.set_bounds(group, 3, 16)
    fake.finish_operations()
    return make(), pool


@pytest.mark.parametrize("eks", [False, True], ids=["auto-scaling-group", "eks-node-group"])
def test_failed_launches_the_minimum_keeps_fail_a_scale_up_for_their_own_reason(aws_api: FakeAwsApi, eks: bool) -> None:
    actuator, pool = _held_at_min(aws_api, eks, SUBNET)
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 2)
    assert not state.failed_for_capacity
    writes = aws_api.calls("SetDesiredCapacity") + aws_api.calls("UpdateNodegroupConfig")

    with pytest.raises(ActuatorError) as failed:
        actuator.resize(pool, 3, "again")

    assert type(failed.value) is TransientActuatorError  # not a stockout: no back-off to the next pool for it
    message = str(failed.value)
    assert SUBNET in message and "minimum size 3" in message and "already asks for 3" in message
    assert "maximum size" not in message and "raise it" not in message
    assert aws_api.calls("SetDesiredCapacity") + aws_api.calls("UpdateNodegroupConfig") == writes


@pytest.mark.parametrize("eks", [False, True], ids=["auto-scaling-group", "eks-node-group"])
def test_failed_launches_for_capacity_the_minimum_keeps_are_a_stockout(aws_api: FakeAwsApi, eks: bool) -> None:
    actuator, pool = _held_at_min(aws_api, eks, ICE_MESSAGE)
    with pytest.raises(CapacityUnavailable) as refused:
        actuator.resize(pool, 3, "again")
    assert "InsufficientInstanceCapacity" in str(refused.value) and "maximum size" not in str(refused.value)

"""A drained nodes' removal refused after some of them were terminated (a node whose instance was detached from its
Auto Scaling group) raised an error saying nothing was applied (``maybe_applied`` false), while the others were on
their way out: their drain's release lost its claim. It now says so when some were terminated, and each termination
AWS accepted counts as an accepted write of the change (``actuators.write_window.writes_sent``). boto3 against moto
behind the proxy of ``tests.fakes.aws_api``."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from actuators.write_window import writes_sent
from models import TransientActuatorError
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
    return first, second


def test_a_removal_refused_after_terminating_some_nodes_may_be_applied(aws_api: FakeAwsApi) -> None:
    detached, other = _detach_one(aws_api)
    actuator = asg_actuator(aws_api, SimulatedClock(T0))

    with writes_sent() as writes, pytest.raises(TransientActuatorError, match="no longer lists") as refused:
        actuator.delete_nodes("spot", [detached, other], "drain")

    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 1
    assert aws_api.group("gpu-spot")["DesiredCapacity"] == 0  # the other is going
    assert refused.value.maybe_applied, refused.value  # False before
    assert writes.accepted == ["spot"], writes


def test_a_removal_refused_before_any_termination_applied_nothing(aws_api: FakeAwsApi) -> None:
    detached, _ = _detach_one(aws_api)
    actuator = asg_actuator(aws_api, SimulatedClock(T0))

    with writes_sent() as writes, pytest.raises(TransientActuatorError, match="no longer lists") as refused:
        actuator.delete_nodes("spot", [detached], "drain")

    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 0
    assert not refused.value.maybe_applied and not writes.maybe_applied(refused.value), refused.value

"""Instances an Auto Scaling group retains (``Terminating:Retained``: a termination lifecycle action abandoned under an
instance lifecycle policy with ``TerminateHookAbandon`` ``retain``) keep running, billed, not counted in the desired
capacity, until someone terminates them. They are not leaving: a drained node on one is not taken for gone (its drain
is not started, its removal is refused naming the command that terminates it), and one is no replacement on its way,
so a launch failing meanwhile leaves a failed unit. boto3 against moto behind the proxy of ``tests.fakes.aws_api``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from actuators.aws_groups import AutoScalingGroups
from models import ActionStatus, TransientActuatorError
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import asg_actuator
from tests.fakes.aws_api import FakeAwsApi

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def _lifecycle(fake: FakeAwsApi) -> dict[str, str]:
    """Each instance's lifecycle state as the adapters' clients read it."""
    found = fake.clients().autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["gpu-spot"])
    return {i["InstanceId"]: i["LifecycleState"] for i in found["AutoScalingGroups"][0]["Instances"]}


def _ec2_state(fake: FakeAwsApi, instance_id: str) -> str:
    found = fake.direct.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    return str(found["State"]["Name"])


def _command(instance_id: str) -> str:
    return (
        f"aws autoscaling terminate-instance-in-auto-scaling-group --instance-id {instance_id} "
        "--no-should-decrement-desired-capacity"
    )


def _retained_one(fake: FakeAwsApi) -> str:
    """Group gpu-spot of three nodes, the first retained; the group launched a node in its place (settled)."""
    fake.now = T0
    fake.add_group("gpu-spot", nodes=3)
    victim = str(sorted(i["InstanceId"] for i in fake.group("gpu-spot")["Instances"])[0])
    fake.retain(victim)
    fake.settle()
    return victim


def test_a_retained_node_is_not_taken_for_gone_and_the_refusal_names_the_command(aws_api: FakeAwsApi) -> None:
    victim = _retained_one(aws_api)
    lifecycle = _lifecycle(aws_api)
    assert lifecycle.pop(victim) == "Terminating:Retained" and _ec2_state(aws_api, victim) == "running"
    assert sorted(lifecycle.values()) == ["InService"] * 3 and aws_api.group("gpu-spot")["DesiredCapacity"] == 3
    actuator = asg_actuator(aws_api, SimulatedClock(T0))
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (3, 3, 0)

    kept = actuator.kept_units("spot", [victim])
    assert f"{victim} ({victim}, Terminating:Retained)" in kept and _command(victim) in kept
    with pytest.raises(TransientActuatorError, match="retained by Auto Scaling group 'gpu-spot'") as refused:
        actuator.delete_nodes("spot", [victim], "drain")
    assert "already leaving" not in str(refused.value) and _command(victim) in str(refused.value)
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 0 and _ec2_state(aws_api, victim) == "running"

    # The operator runs the command the refusal names: the instance goes, and so does the refusal.
    aws_api.clients().autoscaling.terminate_instance_in_auto_scaling_group(
        InstanceId=victim, ShouldDecrementDesiredCapacity=False
    )
    assert victim not in _lifecycle(aws_api) and aws_api.group("gpu-spot")["DesiredCapacity"] == 3
    assert actuator.kept_units("spot", [victim]) == ""
    assert actuator.delete_nodes("spot", [victim], "drain-again").status is ActionStatus.STARTED


def test_a_retained_instance_is_warned_of_once_with_the_command(
    aws_api: FakeAwsApi, caplog: pytest.LogCaptureFixture
) -> None:
    victim = _retained_one(aws_api)
    actuator = asg_actuator(aws_api, SimulatedClock(T0))
    with caplog.at_level(logging.WARNING, logger="actuators.aws_groups"):
        actuator.list_pools()
        actuator.list_pools()
    told = [r.getMessage() for r in caplog.records if r.name == "actuators.aws_groups"]
    assert len(told) == 1
    assert f"instance {victim} (Terminating:Retained) retained by Auto Scaling group 'gpu-spot'" in told[0]
    assert "billed" in told[0] and _command(victim) in told[0]


def _interrupted_then_retained(fake: FakeAwsApi, clock: SimulatedClock, victim: str) -> None:
    """A Spot interruption of ``victim`` (its termination held by a hook, no desired capacity change), its hook
    abandoned and the instance retained; the launch in its place fails for capacity."""
    fake.arm_late_stockout()
    fake.interrupt("gpu-spot", victim)
    fake.retain(victim)


def _scaled_in_retained_then_scale_up_fails(fake: FakeAwsApi, clock: SimulatedClock, victim: str) -> None:
    """``victim`` terminated with the desired capacity lowered (3 -> 2) and retained; a scale-up back to 3 whose
    launch fails for capacity."""
    fake.retain(victim, shrunk=True)
    fake.arm_late_stockout()
    assert asg_actuator(fake, clock).resize("spot", 3, "up").status is ActionStatus.STARTED


@pytest.mark.parametrize("story", [_interrupted_then_retained, _scaled_in_retained_then_scale_up_fails])
def test_a_retained_instance_hides_no_failed_launch(
    aws_api: FakeAwsApi, story: Callable[[FakeAwsApi, SimulatedClock, str], None]
) -> None:
    """Read by an adapter started afresh (after a restart: it did not terminate the instance, and no activity read says
    the group shrank with it)."""
    clock = SimulatedClock(T0)
    aws_api.now = clock.now()
    aws_api.add_group("gpu-spot", nodes=3)
    victim = sorted(i["InstanceId"] for i in aws_api.group("gpu-spot")["Instances"])[0]
    story(aws_api, clock, victim)
    clock.advance(timedelta(minutes=1))
    aws_api.now = clock.now()
    aws_api.settle()
    assert _lifecycle(aws_api)[victim] == "Terminating:Retained"

    clients = aws_api.clients()
    seen = AutoScalingGroups(clients.autoscaling, clients.ec2).observe("spot", "gpu-spot", clock.now())
    assert (seen.desired, len(seen.instances), seen.replacing, seen.recreating) == (3, 2, 0, 0)
    assert seen.leaving == () and seen.out_of_service == ((victim, "Terminating:Retained"),)
    (state,) = asg_actuator(aws_api, clock).list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (2, 2, 1)
    assert state.failed_for_capacity and state.recreating_units == 0

"""An instance an Auto Scaling group still lists ``Terminated`` is leaving, but no replacement on its way: Auto Scaling
launched (or tried to launch) its replacement as its termination ended. Counted as one, it hid a failed unit of a
scale-up (the gap it left read as a replacement still to come) and, its replacement's launch failed, read as a unit
being recreated. A drained node on it is still "already leaving". boto3 against moto behind the proxy of
``tests.fakes.aws_api`` (its ``reclaim`` keeps the instance listed ``Terminated``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from actuators.aws_groups import AutoScalingGroups
from models import ActionStatus
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import asg_actuator, eks_actuator
from tests.fakes.aws_api import FakeAwsApi

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def _lifecycle(fake: FakeAwsApi, group: str) -> dict[str, str]:
    """Each instance's lifecycle state as the adapters' clients read it."""
    found = fake.clients().autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[group])
    return {i["InstanceId"]: i["LifecycleState"] for i in found["AutoScalingGroups"][0]["Instances"]}


def _advance(fake: FakeAwsApi, clock: SimulatedClock, minutes: int) -> None:
    clock.advance(timedelta(minutes=minutes))
    fake.now = clock.now()


def test_a_terminated_instance_replaced_hides_no_failed_unit_of_a_scale_up(aws_api: FakeAwsApi) -> None:
    """Four nodes; a Spot interruption of one, replaced (the new instance in service), the old one still listed
    ``Terminated``; then a scale-up to 5 whose launch fails for capacity. Read by an adapter started afresh."""
    clock = SimulatedClock(T0)
    aws_api.now = clock.now()
    aws_api.add_group("gpu-spot", nodes=4)
    victim = sorted(i["InstanceId"] for i in aws_api.group("gpu-spot")["Instances"])[0]
    aws_api.interrupt("gpu-spot", victim)
    _advance(aws_api, clock, 1)
    aws_api.reclaim(victim, listed_terminated=True)  # the termination ends; the group launches the replacement
    _advance(aws_api, clock, 5)
    aws_api.settle()
    aws_api.arm_late_stockout()
    assert asg_actuator(aws_api, clock).resize("spot", 5, "up").status is ActionStatus.STARTED
    _advance(aws_api, clock, 1)
    aws_api.settle()
    listed = _lifecycle(aws_api, "gpu-spot")
    assert listed.pop(victim) == "Terminated" and sorted(listed.values()) == ["InService"] * 4

    clients = aws_api.clients()
    seen = AutoScalingGroups(clients.autoscaling, clients.ec2).observe("spot", "gpu-spot", clock.now())
    assert (seen.desired, len(seen.instances), seen.replacing, seen.recreating) == (5, 4, 0, 0)
    assert seen.leaving == (victim,) and seen.out_of_service == ()
    actuator = asg_actuator(aws_api, clock)
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (4, 4, 1)  # 4, 5, 0 when it counted
    assert state.failed_for_capacity
    # a drained node on it is gone already: its removal asks AWS for nothing
    assert actuator.kept_units("spot", [victim]) == ""
    terminations = aws_api.calls("TerminateInstanceInAutoScalingGroup")
    assert actuator.delete_nodes("spot", [victim], "drain").status is ActionStatus.STARTED
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == terminations


def test_a_terminated_instance_whose_replacement_failed_is_no_unit_recreated(aws_api: FakeAwsApi) -> None:
    """Three nodes of an EKS managed node group; a Spot interruption of one whose replacement cannot be launched (no
    capacity), the old instance still listed ``Terminated``: a failed unit, not one being recreated."""
    clock = SimulatedClock(T0)
    aws_api.now = clock.now()
    group = aws_api.add_nodegroup("ml", "p5", nodes=3)
    victim = sorted(i["InstanceId"] for i in aws_api.group(group)["Instances"])[0]
    aws_api.interrupt(group, victim)
    _advance(aws_api, clock, 1)
    aws_api.arm_late_stockout()
    aws_api.reclaim(victim, listed_terminated=True)  # the termination ends; the replacement's launch fails
    _advance(aws_api, clock, 1)
    aws_api.settle()
    listed = _lifecycle(aws_api, group)
    assert listed.pop(victim) == "Terminated" and sorted(listed.values()) == ["InService"] * 2

    clients = aws_api.clients()
    seen = AutoScalingGroups(clients.autoscaling, clients.ec2).observe("od", group, clock.now())
    assert (seen.desired, len(seen.instances), seen.replacing, seen.recreating) == (3, 2, 0, 0)  # 1, 1 when counted
    (state,) = eks_actuator(aws_api, clock).list_pools()
    assert (state.ready_units, state.target_units, state.failed_units, state.recreating_units) == (2, 2, 1, 0)
    assert state.failed_for_capacity

"""An instance an Auto Scaling group replaces after a health check (a Spot interruption: "taken out of service in
response to an EC2 health check") is a unit recreated, not a scale-up: the group reports it in
``PoolState.recreating_units`` while the old instance terminates and while its replacement launches, so a new leader
that finds it in flight does not wait for it as a scale-up nor page it as stuck. A scale-up's own units stay waited
for. boto3 against moto behind the proxy of ``tests.fakes.aws_api`` (its ``interrupt`` and ``reclaim`` record the
activities AWS records)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.alerts import stalled_scale_up_events
from agent.scale_up_memory import unexplained
from models import AcceleratorFamily, CapacityTier, PoolKind, PoolSpec
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import asg_actuator, eks_actuator
from tests.fakes.aws_api import FakeAwsApi

T0 = datetime(2024, 5, 1, 15, 0, tzinfo=UTC)
LEAD = timedelta(minutes=10)
SPOT = PoolSpec(
    "spot", PoolKind.GPU_NODE_POOL, CapacityTier.SPOT, AcceleratorFamily.GPU, 8, 0, 8, 30.0, LEAD, ("training",), 0.05,
)  # fmt: skip


def _interrupted(aws_api: FakeAwsApi, group: str) -> str:
    """A minute before T0, a Spot interruption of one of the group's three instances, its termination held by a
    lifecycle hook (an hour by default): the group replaces it, its desired capacity unchanged."""
    aws_api.now = T0 - timedelta(minutes=1)
    victim = sorted(str(i["InstanceId"]) for i in aws_api.group(group)["Instances"])[2]
    aws_api.interrupt(group, victim)
    return victim


def test_a_replacement_found_by_a_new_leader_is_not_waited_for_nor_paged_as_a_stuck_scale_up(
    aws_api: FakeAwsApi,
) -> None:
    aws_api.now = T0 - timedelta(days=1)
    group = aws_api.add_group("gpu-spot", nodes=3)
    _interrupted(aws_api, group)
    clock = SimulatedClock(T0)
    (state,) = asg_actuator(aws_api, clock).list_pools()  # a new leader's first read, no scale-up saved
    assert (state.ready_units, state.target_units, state.recreating_units) == (2, 3, 1)
    assert unexplained(T0, {"spot": state}) == []  # 1 unit waited for as a scale-up 2 -> 3 before

    clock.advance(LEAD * 3)  # the hook still holds the old instance: the alert's 2 lead times have passed
    aws_api.now = clock.now()
    (later,) = asg_actuator(aws_api, clock).list_pools()
    assert (later.ready_units, later.target_units, later.recreating_units) == (2, 3, 1)
    pending = unexplained(T0, {"spot": state})
    assert stalled_scale_up_events(pending, {"spot": later}, {"spot": SPOT}, clock.now()) == []


def test_the_replacement_launching_is_recreated_and_once_in_service_nothing_is(aws_api: FakeAwsApi) -> None:
    aws_api.now = T0 - timedelta(days=1)
    group = aws_api.add_group("gpu-spot", nodes=3)
    victim = _interrupted(aws_api, group)
    aws_api.now = T0
    aws_api.reclaim(victim)  # the termination ends; the group launches the replacement
    actuator = asg_actuator(aws_api, SimulatedClock(T0))
    (state,) = actuator.list_pools()
    (listed,) = aws_api.clients().autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"]
    assert sorted(i["LifecycleState"] for i in listed["Instances"]) == ["InService", "InService", "Pending"]
    assert (state.ready_units, state.target_units, state.recreating_units) == (2, 3, 1)

    aws_api.settle()
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.recreating_units) == (3, 3, 0)


def test_a_scale_up_beside_a_replacement_is_still_waited_for(aws_api: FakeAwsApi) -> None:
    aws_api.now = T0 - timedelta(days=1)
    group = aws_api.add_group("gpu-spot", nodes=3)
    victim = _interrupted(aws_api, group)
    aws_api.now = T0
    aws_api.reclaim(victim)
    actuator = asg_actuator(aws_api, SimulatedClock(T0))
    actuator.resize("spot", 5, "up")  # two more asked for: launching beside the replacement
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.recreating_units) == (2, 5, 1)
    (waited,) = unexplained(T0, {"spot": state})
    assert (waited.from_units, waited.to_units) == (3, 5)  # the two of the scale-up, not the replacement


def test_an_instance_terminated_with_the_capacity_lowered_is_not_recreated(aws_api: FakeAwsApi) -> None:
    aws_api.now = T0 - timedelta(days=1)
    group = aws_api.add_group("gpu-spot", nodes=3)
    aws_api.hold_terminations()
    aws_api.now = T0
    actuator = asg_actuator(aws_api, SimulatedClock(T0))
    actuator.resize("spot", 4, "up")  # one launching for a scale-up ...
    victim = sorted(i["InstanceId"] for i in aws_api.group(group)["Instances"])[0]
    aws_api.clients().autoscaling.terminate_instance_in_auto_scaling_group(
        InstanceId=victim, ShouldDecrementDesiredCapacity=True
    )  # ... and one terminated with the desired capacity lowered ("shrinking the capacity"): no replacement
    (state,) = actuator.list_pools()
    assert (state.target_units, state.recreating_units) == (3, 0)


def test_a_node_group_reports_its_replacements_too(aws_api: FakeAwsApi) -> None:
    aws_api.now = T0 - timedelta(days=1)
    group = aws_api.add_nodegroup("ml", "p5", nodes=3)
    _interrupted(aws_api, group)
    (state,) = eks_actuator(aws_api, SimulatedClock(T0)).list_pools()
    assert (state.ready_units, state.target_units, state.recreating_units) == (2, 3, 1)
    assert unexplained(T0, {"od": state}) == []

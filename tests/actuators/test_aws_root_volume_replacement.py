"""An instance whose root volume an instance refresh replaces (``ReplacingRootVolume``, ``ReplacingRootVolume:Wait``
/``:Proceed``, ``RootVolumeReplaced``) keeps running in its group and counts toward its desired capacity: it is an
instance of the pool, not ready, never a launch that failed. So is one in a lifecycle state the adapters do not know.
A failed scale-up's units are removed down to the instances listed, never below: lowering the desired capacity under
them would have the group terminate a running node, busy or not, undrained. An instance whose root volume is replaced
is no scale-up's either (``PoolState.refreshing_units``): a new leader does not adopt it as one, nor page it as stalled,
while a scale-up during the refresh is still waited for. Both AWS adapters, boto3 against moto behind the proxy of
``tests.fakes.aws_api``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.alerts import stalled_scale_up_events
from agent.planning.memory import PendingScaleUp
from agent.scale_up_memory import unexplained
from models import AcceleratorFamily, ActionStatus, CapacityTier, CapacityUnavailable, PoolKind, PoolSpec
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import asg_actuator, eks_actuator
from tests.fakes.aws_api import FakeAwsApi

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
# The root volume replacement's states, and one the API does not have today (it has gained values over the years).
STATES = ["ReplacingRootVolume", "ReplacingRootVolume:Wait", "ReplacingRootVolume:Proceed", "RootVolumeReplaced"]
UNKNOWN = "Rebooting:Wait"
LEAD = timedelta(minutes=10)


def _spec(pool: str) -> PoolSpec:
    gpu = (PoolKind.GPU_NODE_POOL, CapacityTier.SPOT, AcceleratorFamily.GPU)
    return PoolSpec(pool, *gpu, 8, 0, 8, 30.0, LEAD, ("training",), 0.05)


def _listed(fake: FakeAwsApi, group: str) -> tuple[int, dict[str, str]]:
    """The group's desired capacity and each instance's lifecycle state, as the adapters' clients read them."""
    found = fake.clients().autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[group])
    (listed,) = found["AutoScalingGroups"]
    return int(listed["DesiredCapacity"]), {i["InstanceId"]: i["LifecycleState"] for i in listed["Instances"]}


def _root_volume_during_failed_scale_up(fake: FakeAwsApi, clock: SimulatedClock, state: str, eks: bool) -> str:
    """Three nodes; a scale-up to 4 whose launch fails for capacity; a minute later, the oldest node's root volume
    replaced by an instance refresh (listed ``state``). Returns the group's name."""
    fake.now = clock.now()
    group = fake.add_nodegroup("ml", "p5", nodes=3) if eks else fake.add_group("gpu-spot", nodes=3)
    fake.arm_late_stockout()
    actuator = eks_actuator(fake, clock) if eks else asg_actuator(fake, clock)
    assert actuator.resize("od" if eks else "spot", 4, "up").status is ActionStatus.STARTED
    clock.advance(timedelta(minutes=1))
    fake.now = clock.now()
    fake.settle()
    victim = sorted(i["InstanceId"] for i in fake.group(group)["Instances"])[0]
    if state in STATES:
        fake.replace_root_volume(victim, state)
    else:
        fake.list_as(victim, state)
    return group


@pytest.mark.parametrize("eks", [False, True], ids=["auto-scaling-group", "eks-node-group"])
@pytest.mark.parametrize("state", [*STATES, UNKNOWN])
def test_a_node_in_the_group_but_not_ready_counts_and_is_never_dropped(
    aws_api: FakeAwsApi, state: str, eks: bool
) -> None:
    clock = SimulatedClock(T0)
    group = _root_volume_during_failed_scale_up(aws_api, clock, state, eks)
    desired, before = _listed(aws_api, group)
    assert desired == 4 and sorted(before.values()) == sorted(["InService", "InService", state])
    actuator = eks_actuator(aws_api, clock) if eks else asg_actuator(aws_api, clock)
    pool = "od" if eks else "spot"

    (seen,) = actuator.list_pools()
    assert (seen.ready_units, seen.target_units, seen.failed_units) == (2, 3, 1)  # the failed launch only
    with pytest.raises(CapacityUnavailable, match=r"1 (instances|nodes) could not be launched"):
        actuator.resize(pool, 4, "up-again")
    aws_api.settle()

    desired, after = _listed(aws_api, group)
    assert desired == 3  # the failed unit went, and no more
    assert after == before  # every node still there, none terminated by the group


@pytest.mark.parametrize("eks", [False, True], ids=["auto-scaling-group", "eks-node-group"])
def test_a_root_volume_refresh_found_by_a_new_leader_is_neither_adopted_nor_paged(
    aws_api: FakeAwsApi, eks: bool
) -> None:
    """Three nodes; an instance refresh replaces root volumes one at a time, each held by a lifecycle hook. A new
    leader's first read finds one not ready; 25 minutes on (over twice the lead time) the refresh holds the next."""
    clock = SimulatedClock(T0)
    aws_api.now = clock.now()
    group = aws_api.add_nodegroup("ml", "p5", nodes=3) if eks else aws_api.add_group("gpu-spot", nodes=3)
    pool = "od" if eks else "spot"
    ids = sorted(i["InstanceId"] for i in aws_api.group(group)["Instances"])
    aws_api.replace_root_volume(ids[0], "ReplacingRootVolume:Wait")
    actuator = eks_actuator(aws_api, clock) if eks else asg_actuator(aws_api, clock)
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.refreshing_units, state.recreating_units) == (2, 3, 1, 0)
    adopted = unexplained(T0, {pool: state})
    assert adopted == []  # a scale-up 2 -> 3 before

    aws_api.replace_root_volume(ids[0], "InService")
    aws_api.replace_root_volume(ids[1], "ReplacingRootVolume")
    clock.advance(timedelta(minutes=25))
    aws_api.now = clock.now()
    (later,) = actuator.list_pools()
    assert (later.ready_units, later.target_units, later.refreshing_units) == (2, 3, 1)
    # the agent's own scale-up to 3 asked as the refresh began: its wait ends with the node refreshed, never paged
    own = PendingScaleUp(pool, T0, 2, 3)
    assert stalled_scale_up_events([own], {pool: later}, {pool: _spec(pool)}, clock.now()) == []


def test_a_scale_up_during_a_root_volume_refresh_is_still_waited_for_and_paged(aws_api: FakeAwsApi) -> None:
    """Three nodes, one replacing its root volume; someone scales the group to 4 and the launch hangs (Pending past
    the lead time). The new leader adopts the one unit in flight, 3 -> 4, and pages it once two lead times pass."""
    clock = SimulatedClock(T0)
    aws_api.now = clock.now()
    aws_api.add_group("gpu-spot", nodes=3)
    ids = sorted(i["InstanceId"] for i in aws_api.group("gpu-spot")["Instances"])
    aws_api.replace_root_volume(ids[0], "ReplacingRootVolume")
    aws_api.clients().autoscaling.set_desired_capacity(AutoScalingGroupName="gpu-spot", DesiredCapacity=4)
    actuator = asg_actuator(aws_api, clock)
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.refreshing_units) == (2, 4, 1)
    adopted = unexplained(T0, {"spot": state})
    assert [(p.from_units, p.to_units, p.inherited) for p in adopted] == [(3, 4, True)]

    clock.advance(LEAD * 2 + timedelta(minutes=1))
    aws_api.now = clock.now()
    (later,) = actuator.list_pools()
    assert (later.ready_units, later.target_units, later.refreshing_units) == (2, 4, 1)
    (event,) = stalled_scale_up_events(adopted, {"spot": later}, {"spot": _spec("spot")}, clock.now())
    assert "to 4 units" in event.summary

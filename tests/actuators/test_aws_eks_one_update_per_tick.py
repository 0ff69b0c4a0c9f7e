"""EKS node group updates the agent sends within one tick, with boto3 against moto behind the proxy of
``tests.fakes.aws_api``: EKS takes one update of a node group at a time, so a resize that removes failed nodes and
grows sends one update with the final size, and a scale-up after the agent's own removal of failed nodes waits for
it instead of failing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from actuators.aws_eks import EksNodegroupActuator
from models import ActionStatus, TransientActuatorError
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import eks_actuator
from tests.fakes.aws_api import FakeAwsApi

T0 = datetime(2024, 5, 1, 15, 0, tzinfo=UTC)
SUBNET = (
    "There are not enough free addresses in subnet 'subnet-1' to satisfy the requested number of instances. "
    "Launching EC2 instance failed."
)


def _two_failed(fake: FakeAwsApi, clock: SimulatedClock) -> EksNodegroupActuator:
    """Node group p5 of 1 ready node asked for 3, whose 2 launches failed for want of subnet addresses (now freed);
    a restarted agent over it."""
    fake.now = clock.now()
    fake.add_nodegroup("ml", "p5", nodes=1)
    fake.arm_late_stockout(SUBNET)
    eks_actuator(fake, clock).resize("od", 3, "up")
    clock.advance(timedelta(minutes=1))
    fake.now = clock.now()
    fake.settle()
    fake.restock()
    actuator = eks_actuator(fake, clock)
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 2)
    return actuator


def _desired(fake: FakeAwsApi) -> int:
    found = fake.clients().eks.describe_nodegroup(clusterName="ml", nodegroupName="p5")["nodegroup"]
    return int(found["scalingConfig"]["desiredSize"])


def test_failed_nodes_removed_and_growth_are_one_update(aws_api: FakeAwsApi) -> None:
    actuator = _two_failed(aws_api, SimulatedClock(T0))
    before = aws_api.calls("UpdateNodegroupConfig")

    grown = actuator.resize("od", 5, "up-again")

    assert grown.status is ActionStatus.STARTED
    assert grown.detail.startswith("desired size 3 -> 5 (update ")
    assert "in place of 2 nodes that could not be launched" in grown.detail
    assert aws_api.calls("UpdateNodegroupConfig") - before == 1
    assert _desired(aws_api) == 5  # not left at 1 by a second update refused
    aws_api.settle()
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (5, 5, 0)


def test_a_scale_up_after_the_agents_own_removal_waits_for_it(aws_api: FakeAwsApi) -> None:
    clock = SimulatedClock(T0)
    actuator = _two_failed(aws_api, clock)
    cleared = actuator.resize("od", 1, "clear-failed")  # the tick first removes the failed nodes
    assert cleared.status is ActionStatus.STARTED

    waiting = actuator.resize("od", 3, "plan-up")  # then the plan's scale-up, in the same tick

    assert waiting.status is ActionStatus.REJECTED  # not a failure of the pool
    assert "this agent's update" in waiting.detail and "still in progress" in waiting.detail
    aws_api.finish_operations()
    clock.advance(timedelta(minutes=1))
    assert actuator.resize("od", 3, "next-tick").status is ActionStatus.STARTED
    assert _desired(aws_api) == 3


def test_the_agents_own_update_stuck_in_progress_is_told(aws_api: FakeAwsApi) -> None:
    clock = SimulatedClock(T0)
    actuator = _two_failed(aws_api, clock)
    actuator.resize("od", 1, "clear-failed")
    clock.advance(timedelta(minutes=5))  # EKS still has it in progress

    with pytest.raises(TransientActuatorError, match="still in progress on this node group"):
        actuator.resize("od", 3, "plan-up")


def test_someone_elses_update_in_progress_still_fails_the_change(aws_api: FakeAwsApi) -> None:
    clock = SimulatedClock(T0)
    aws_api.now = clock.now()
    aws_api.add_nodegroup("ml", "p5", nodes=1)
    actuator = eks_actuator(aws_api, clock)
    actuator.resize("od", 2, "up")
    aws_api.finish_operations()
    aws_api.start_update("ml", "p5")  # an operator's

    with pytest.raises(TransientActuatorError, match="still in progress on this node group"):
        actuator.resize("od", 3, "more")

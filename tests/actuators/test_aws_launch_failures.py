"""A launch that fails for any reason is no node on its way. A capacity reservation used up is a stockout, as an
Availability Zone out of capacity is: failed units, a refused scale-up, a back-off. Any other failed launch (a subnet
out of free addresses, a launch template gone), and an EKS health issue that stops launches, leaves failed units that
carry AWS's message: removed with no stockout, and told of and backed off once they keep failing for the pool's lead
time (``agent.executor_failures``). boto3 against moto behind the proxy of ``tests.fakes.aws_api``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.executor import clear_failed_units
from agent.planning import PlannerMemory
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
from tests.actuators.aws_adapters import asg_actuator, eks_actuator
from tests.fakes.aws_api import FakeAwsApi

T0 = datetime(2024, 5, 1, 15, 0, tzinfo=UTC)
LEAD = timedelta(minutes=10)
SPOT = PoolSpec(
    "spot", PoolKind.GPU_NODE_POOL, CapacityTier.SPOT, AcceleratorFamily.GPU, 8, 0, 8, 30.0, LEAD, ("training",), 0.05
)
OD = PoolSpec(
    "od", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 8, 55.0, LEAD, ("training",)
)
# EC2's answer when a targeted capacity reservation is used up, as an Auto Scaling activity's StatusMessage
# (scylladb/scylla-cluster-tests issue 8839, openshift/openshift-docs pull request 96641).
RESERVATION = (
    "The requested reservation does not have sufficient compatible and available capacity for this request. "
    "Launching EC2 instance failed."
)
SUBNET = (
    "There are not enough free addresses in subnet 'subnet-1' to satisfy the requested number of instances. "
    "Launching EC2 instance failed."
)


def _failed_launches(aws_api: FakeAwsApi, clock: SimulatedClock, message: str, eks: bool = False) -> None:
    """One node; a scale-up to 3 whose 2 launches fail with ``message``; a minute passes."""
    aws_api.now = clock.now()
    if eks:
        aws_api.add_nodegroup("ml", "p5", nodes=1)
    else:
        aws_api.add_group("gpu-spot", nodes=1)
    aws_api.arm_late_stockout(message)
    actuator = eks_actuator(aws_api, clock) if eks else asg_actuator(aws_api, clock)
    assert actuator.resize("od" if eks else "spot", 3, "up").status is ActionStatus.STARTED
    clock.advance(timedelta(minutes=1))
    aws_api.now = clock.now()
    aws_api.settle()


def test_a_used_up_capacity_reservation_is_a_stockout(aws_api: FakeAwsApi) -> None:
    clock = SimulatedClock(T0)
    _failed_launches(aws_api, clock, RESERVATION)
    actuator = asg_actuator(aws_api, clock)
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 2)
    assert (state.failed_messages, state.failed_for_capacity) == ((RESERVATION,) * 2, True)
    with pytest.raises(CapacityUnavailable, match="requested reservation does not have sufficient"):
        actuator.resize("spot", 4, "up-again")
    assert aws_api.group("gpu-spot")["DesiredCapacity"] == 1  # the failed units went, nothing more was asked


def test_a_subnet_out_of_addresses_leaves_failed_units_told_with_aws_message(aws_api: FakeAwsApi) -> None:
    clock = SimulatedClock(T0)
    _failed_launches(aws_api, clock, SUBNET)
    actuator = asg_actuator(aws_api, clock)
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 2)
    assert state.failed_messages == (SUBNET, SUBNET)

    cleared = clear_failed_units({"spot": state}, actuator, {"spot": SPOT}, PlannerMemory(), clock.now())
    assert [r.status for r in cleared.results] == [ActionStatus.STARTED]
    assert (cleared.memory.backoff_until, cleared.alerts) == ({}, ())  # no stockout: the first failure is retried
    assert aws_api.group("gpu-spot")["DesiredCapacity"] == 1

    # asked for again, they fail again; still failing a lead time later, the pool is told of and backed off
    assert asg_actuator(aws_api, clock).resize("spot", 3, "up-2").status is ActionStatus.STARTED
    clock.advance(LEAD)
    aws_api.now = clock.now()
    aws_api.settle()
    actuator = asg_actuator(aws_api, clock)
    (state,) = actuator.list_pools()
    again = clear_failed_units({"spot": state}, actuator, {"spot": SPOT}, cleared.memory, clock.now())
    (alert,) = again.alerts
    assert alert.kind is AlertKind.ACTUATOR_FAILURE
    assert SUBNET in alert.summary
    assert again.memory.backoff_until == {"spot": clock.now() + LEAD}


def test_eks_reservation_issue_is_a_stockout(aws_api: FakeAwsApi) -> None:
    clock = SimulatedClock(T0)
    _failed_launches(aws_api, clock, RESERVATION, eks=True)
    aws_api.health_issue(
        "p5",
        "AsgInstanceLaunchFailures",
        "Could not launch On-Demand Instances. ReservationCapacityExceeded - " + RESERVATION,
    )
    actuator = eks_actuator(aws_api, clock)
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 2)
    assert state.failed_for_capacity
    assert state.failed_messages == (RESERVATION,) * 2
    with pytest.raises(CapacityUnavailable, match="reservation"):
        actuator.resize("od", 4, "up-again")


NO_ADDRESSES = (
    "One or more of the subnets of your node group does not have enough available IP addresses for new nodes."
)
NO_TEMPLATE = "We couldn't find the Amazon EC2 launch template for your managed node group."


@pytest.mark.parametrize(
    ("code", "message"), [("InsufficientFreeAddresses", NO_ADDRESSES), ("Ec2LaunchTemplateNotFound", NO_TEMPLATE)]
)
def test_eks_issue_that_stops_launches_leaves_failed_units(aws_api: FakeAwsApi, code: str, message: str) -> None:
    """No failed activity names the reason (the group's launches are not even attempted): the issue does."""
    clock = SimulatedClock(T0)
    aws_api.now = clock.now()
    aws_api.add_nodegroup("ml", "p5", nodes=1)
    aws_api.arm_late_stockout()
    assert eks_actuator(aws_api, clock).resize("od", 3, "up").status is ActionStatus.STARTED
    aws_api.finish_operations()  # the update ends; no launch activity is recorded
    aws_api.health_issue("p5", code, message)
    actuator = eks_actuator(aws_api, clock)
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 2)
    assert state.failed_messages == (f"{code}: {message}",) * 2

    cleared = clear_failed_units({"od": state}, actuator, {"od": OD}, PlannerMemory(), clock.now())
    assert [r.status for r in cleared.results] == [ActionStatus.STARTED]
    assert (cleared.memory.backoff_until, cleared.alerts) == ({}, ())

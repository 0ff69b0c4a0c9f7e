"""EKS node group health issues that stop launches and stay listed, with boto3 against moto behind the proxy of
``tests.fakes.aws_api``: while EKS lists one and the group launched nothing since, the nodes it kept from launching
are failed units however long ago the agent first saw it, not nodes in flight."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from models import CapacityUnavailable
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import eks_actuator
from tests.fakes.aws_api import FakeAwsApi

T0 = datetime(2024, 5, 1, 15, 0, tzinfo=UTC)
NO_TEMPLATE = "We couldn't find the Amazon EC2 launch template for your managed node group."
QUOTA = (
    "Could not launch On-Demand Instances. InstanceLimitExceeded - You have requested more instances (7) than your "
    "current instance limit of 6 allows for the specified instance type."
)


def _at(fake: FakeAwsApi, clock: SimulatedClock, minutes: int) -> None:
    clock.advance(T0 + timedelta(minutes=minutes) - clock.now())
    fake.now = clock.now()


@pytest.mark.parametrize("minutes", [0, 9, 10, 11, 30, 240])
def test_a_launch_template_gone_keeps_its_nodes_failed_while_listed(aws_api: FakeAwsApi, minutes: int) -> None:
    clock = SimulatedClock(T0)
    aws_api.now = clock.now()
    aws_api.add_nodegroup("ml", "p5", nodes=1)
    aws_api.arm_late_stockout()  # the two nodes asked for never launch
    actuator = eks_actuator(aws_api, clock)  # one agent, running all along
    actuator.resize("od", 3, "up")
    aws_api.finish_operations()
    aws_api.health_issue("p5", "Ec2LaunchTemplateNotFound", NO_TEMPLATE)
    actuator.list_pools()  # first seen at T0
    _at(aws_api, clock, minutes)

    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 2)  # not 2 in flight
    assert state.failed_messages == (f"Ec2LaunchTemplateNotFound: {NO_TEMPLATE}",) * 2
    assert not state.failed_for_capacity


def test_a_quota_still_listed_after_the_back_off_fails_the_next_scale_up_again(aws_api: FakeAwsApi) -> None:
    clock = SimulatedClock(T0)
    aws_api.now = clock.now()
    aws_api.add_nodegroup("ml", "p5", nodes=1)
    aws_api.arm_late_stockout()
    actuator = eks_actuator(aws_api, clock)
    actuator.resize("od", 3, "up")
    aws_api.finish_operations()
    aws_api.health_issue("p5", "AsgInstanceLaunchFailures", QUOTA)
    (state,) = actuator.list_pools()
    assert (state.failed_units, state.failed_for_quota) == (2, True)
    actuator.resize("od", state.target_units, "clear")  # the failed units removed: desired size 1
    aws_api.finish_operations()

    _at(aws_api, clock, 11)  # the pool's back-off (its 10-minute lead time) is over: the agent asks again
    assert actuator.resize("od", 3, "up-again").detail.startswith("desired size 1 -> 3")
    aws_api.finish_operations()
    _at(aws_api, clock, 12)  # EKS still lists the quota and nothing launched

    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 2)
    assert state.failed_for_capacity and state.failed_for_quota  # told again, and backed off again
    with pytest.raises(CapacityUnavailable, match="InstanceLimitExceeded") as refused:
        actuator.resize("od", 5, "more")
    assert refused.value.quota

"""AWS refusals that a state of the cluster or the group explains, and which pass by themselves: the pool is tried
again on a later tick instead of blocked until a person unblocks it. boto3 against moto behind the proxy of
``tests.fakes.aws_api``."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from models import ActionStatus, TransientActuatorError
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import eks_actuator
from tests.fakes.aws_api import FakeAwsApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)


def test_a_node_group_update_refused_during_a_control_plane_upgrade_is_retried(aws_api: FakeAwsApi) -> None:
    group = aws_api.add_nodegroup("ml", "p5", nodes=1)
    actuator = eks_actuator(aws_api, SimulatedClock(T0))
    aws_api.fail("UpdateNodegroupConfig", "InvalidRequestException", "Cluster 'ml' is not in ACTIVE status", 400)
    with pytest.raises(TransientActuatorError, match="InvalidRequestException: Cluster 'ml' is not in ACTIVE status"):
        actuator.resize("od", 3, "during-upgrade")
    assert aws_api.group(group)["DesiredCapacity"] == 1

    # the upgrade is over: the next tick's change goes through
    assert actuator.resize("od", 3, "after-upgrade").status is ActionStatus.STARTED
    assert aws_api.group(group)["DesiredCapacity"] == 3

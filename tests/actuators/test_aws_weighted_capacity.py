"""An Auto Scaling group sized in weighted capacity units, with boto3 against moto behind the proxy of
``tests.fakes.aws_api``: its desired capacity is not a count of nodes, so its pool is refused, never read or resized
as one."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from models import PermanentActuatorError
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import asg_actuator
from tests.fakes.aws_api import FakeAwsApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)


def _mixed_group(fake: FakeAwsApi, weight: str, desired: int) -> None:
    """Group ``gpu-spot`` of two GPU instance types, each override weighing ``weight`` units."""
    fake.add_group("seed", nodes=0)  # creates the launch template "gpu"
    fake.direct.autoscaling.create_auto_scaling_group(
        AutoScalingGroupName="gpu-spot",
        MinSize=0,
        MaxSize=64,
        DesiredCapacity=desired,
        AvailabilityZones=["us-east-1a"],
        MixedInstancesPolicy={
            "LaunchTemplate": {
                "LaunchTemplateSpecification": {"LaunchTemplateName": "gpu"},
                "Overrides": [
                    {"InstanceType": "p4d.24xlarge", "WeightedCapacity": weight},
                    {"InstanceType": "p5.48xlarge", "WeightedCapacity": weight},
                ],
            },
            "InstancesDistribution": {"OnDemandPercentageAboveBaseCapacity": 0},
        },
    )
    fake.settle()


def test_a_group_weighing_its_instances_is_left_unread_with_what_to_change(aws_api: FakeAwsApi) -> None:
    _mixed_group(aws_api, weight="8", desired=16)  # 16 units at 8 a node: 2 nodes, both ready
    assert len(aws_api.group("gpu-spot")["Instances"]) == 2
    actuator = asg_actuator(aws_api, SimulatedClock(T0))

    assert list(actuator.list_pools()) == []  # not read as 2 ready of a target of 16
    refused = actuator.unread_pools()["spot"]
    assert isinstance(refused, PermanentActuatorError)
    message = str(refused)
    assert "'gpu-spot'" in message
    assert "p4d.24xlarge WeightedCapacity 8" in message
    assert "WeightedCapacity of its MixedInstancesPolicy overrides" in message
    assert "DesiredCapacityType to 'units'" in message


def test_a_resize_of_a_weighted_group_changes_nothing(aws_api: FakeAwsApi) -> None:
    _mixed_group(aws_api, weight="8", desired=16)
    actuator = asg_actuator(aws_api, SimulatedClock(T0))
    with pytest.raises(PermanentActuatorError, match="WeightedCapacity"):
        actuator.resize("spot", 17, "up")  # would have been read as 1 node more than 16
    assert aws_api.calls("SetDesiredCapacity") == 0
    assert aws_api.group("gpu-spot")["DesiredCapacity"] == 16


def test_weights_of_one_are_instance_counts(aws_api: FakeAwsApi) -> None:
    _mixed_group(aws_api, weight="1", desired=3)
    (state,) = asg_actuator(aws_api, SimulatedClock(T0)).list_pools()
    assert (state.ready_units, state.target_units) == (3, 3)

"""The AWS adapters built on a fake AWS API the way the daemon builds them: one spot Auto Scaling group and one
EKS managed node group."""

from __future__ import annotations

from actuators.aws_asg import Ec2AutoScalingGroupActuator
from actuators.aws_eks import EksNodegroupActuator
from actuators.aws_groups import AutoScalingGroups
from config.aws import AutoScalingGroupMapping, NodegroupMapping
from models.clock import SimulatedClock
from tests.fakes.aws_api import FakeAwsApi


def asg_actuator(fake: FakeAwsApi, clock: SimulatedClock, group: str = "gpu-spot") -> Ec2AutoScalingGroupActuator:
    clients = fake.clients()
    mapping = AutoScalingGroupMapping(pool="spot", group=group)
    return Ec2AutoScalingGroupActuator(AutoScalingGroups(clients.autoscaling, clients.ec2), [mapping], clock)


def eks_actuator(fake: FakeAwsApi, clock: SimulatedClock) -> EksNodegroupActuator:
    clients = fake.clients()
    groups = AutoScalingGroups(clients.autoscaling, clients.ec2)
    return EksNodegroupActuator(clients.eks, groups, "ml", [NodegroupMapping(pool="od", nodegroup="p5")], clock)

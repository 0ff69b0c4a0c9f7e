"""Contract harnesses for the AWS adapters: boto3 against moto, behind the proxy of ``tests.fakes.aws_api`` (one
moto server per test process, reset for each harness)."""

from __future__ import annotations

from actuators.aws_asg import Ec2AutoScalingGroupActuator
from actuators.aws_eks import EksNodegroupActuator
from actuators.aws_groups import AutoScalingGroups
from actuators.base import Actuator
from config.aws import AutoScalingGroupMapping, NodegroupMapping
from models.clock import SimulatedClock
from tests.contract.harnesses import INITIAL, POOL, START, Harness
from tests.fakes.aws_api import shared_aws

EKS_CLUSTER = "ml"


class _AwsHarness(Harness):
    group = ""

    def __init__(self) -> None:
        self.clock = SimulatedClock(START)
        self.fake = shared_aws(START)

    def settle(self) -> None:
        self.fake.settle()

    def finish_operations(self) -> None:
        self.fake.finish_operations()

    def stockout(self) -> None:
        self.fake.stockout(self.group)

    def late_stockout(self) -> None:
        self.fake.arm_late_stockout()

    def _groups(self) -> AutoScalingGroups:
        clients = self.fake.clients()
        return AutoScalingGroups(clients.autoscaling, clients.ec2)


class AutoScalingGroupHarness(_AwsHarness):
    def __init__(self) -> None:
        super().__init__()
        self.group = self.fake.add_group("gpu-p5-spot", nodes=INITIAL)
        self.actuator = self.restarted()

    def restarted(self) -> Actuator:
        mapping = AutoScalingGroupMapping(pool=POOL, group=self.group)
        return Ec2AutoScalingGroupActuator(self._groups(), [mapping], self.clock)

    def creates(self) -> int:
        return self.fake.calls("SetDesiredCapacity")


class EksNodegroupHarness(_AwsHarness):
    def __init__(self) -> None:
        super().__init__()
        self.group = self.fake.add_nodegroup(EKS_CLUSTER, "p5", nodes=INITIAL)
        self.actuator = self.restarted()

    def restarted(self) -> Actuator:
        mapping = NodegroupMapping(pool=POOL, nodegroup="p5")
        return EksNodegroupActuator(self.fake.clients().eks, self._groups(), EKS_CLUSTER, [mapping], self.clock)

    def creates(self) -> int:
        return self.fake.calls("UpdateNodegroupConfig")

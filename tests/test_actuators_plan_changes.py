"""The refusal of a drained pool's resize below what it holds now ("pool changed since the plan") is worded once
(``actuators.plan_changes``) for every adapter, in its own unit, one unit or several: a pool of one node said it
held "1 nodes". The real adapters over the fake GKE API and moto behind the fake AWS API."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from actuators.aws_asg import Ec2AutoScalingGroupActuator
from actuators.aws_eks import EksNodegroupActuator
from actuators.aws_groups import AutoScalingGroups
from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.gke_tpu_slices import GkeTpuSliceActuator
from actuators.plan_changes import changed_since_plan
from config.aws import AutoScalingGroupMapping, NodegroupMapping
from config.cloud import NodePoolMapping
from models import ActionResult, ActionStatus
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER, SLICES
from tests.fakes.aws_api import FakeAwsApi
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)
HELD_ONE_NODE = (
    "pool changed since the plan: it holds 1 node, more than the 0 asked, and its nodes are removed only by their "
    "drains; nothing else is removed, re-planning next tick"
)


def _refused(result: ActionResult) -> str:
    assert result.status is ActionStatus.REJECTED
    return result.detail


def test_a_gke_node_pool_of_one_node(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=1)
    clients = google_clients(gke_api.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100")
    actuator = GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], SimulatedClock(T0), drained=True)

    assert _refused(actuator.resize("gpu", 0, "down")) == HELD_ONE_NODE
    assert gke_api.calls("POST", "/deleteInstances") == 0


@pytest.mark.parametrize("kind", ["asg", "eks"])
def test_an_aws_group_of_one_node(aws_api: FakeAwsApi, kind: str) -> None:
    clients = aws_api.clients()
    groups = AutoScalingGroups(clients.autoscaling, clients.ec2)
    clock = SimulatedClock(T0)
    actuator: Ec2AutoScalingGroupActuator | EksNodegroupActuator
    if kind == "asg":
        aws_api.add_group("gpu-spot", nodes=1)
        mapping = AutoScalingGroupMapping(pool="pool", group="gpu-spot")
        actuator = Ec2AutoScalingGroupActuator(groups, [mapping], clock, drained=True)
    else:
        aws_api.add_nodegroup("ml", "p5", nodes=1)
        nodegroup = NodegroupMapping(pool="pool", nodegroup="p5")
        actuator = EksNodegroupActuator(clients.eks, groups, "ml", [nodegroup], clock, drained=True)

    assert _refused(actuator.resize("pool", 0, "down")) == HELD_ONE_NODE
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 0


def test_a_tpu_slice_group_of_one_slice(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("v5e-0", nodes=SLICES.hosts_per_slice)
    clients = google_clients(gke_api.url)
    actuator = GkeTpuSliceActuator(clients.gke, CLUSTER, [SLICES], SimulatedClock(T0), drained=True)

    assert _refused(actuator.resize(SLICES.pool, 0, "down")) == (
        "pool changed since the plan: it holds 1 slice, more than the 0 asked, and its slices are deleted only by "
        "their drains; nothing else is deleted, re-planning next tick"
    )
    assert gke_api.calls("DELETE", "/nodePools/") == 0


def test_several_units_and_what_went_first() -> None:
    assert changed_since_plan(3, 2, "slice", "deleting failed slices v5e-2", verb="deleted") == (
        "deleting failed slices v5e-2; pool changed since the plan: it holds 3 slices, more than the 2 asked, and "
        "its slices are deleted only by their drains; nothing else is deleted, re-planning next tick"
    )

"""An AWS group at its minimum size cannot lose a node: TerminateInstanceInAutoScalingGroup with the decrement is
refused there, and without it the group launches a replacement (tests/fakes/REFERENCE.md). A drain of such a node is
therefore not started: it is rejected at once, naming the bound, with nothing cordoned and nothing evicted, instead
of cordoning and emptying the node, retrying its removal until the drain timeout, uncordoning it and starting over
once it was idle for the stabilization window again. Driven by the agent's drains on the fake Kubernetes API, the
adapters on moto behind the fake AWS API, as the daemon builds them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client as k8s

from actuators.aws_asg import Ec2AutoScalingGroupActuator
from actuators.aws_eks import EksNodegroupActuator
from actuators.aws_groups import AutoScalingGroups
from actuators.kubernetes_drain import DRAIN_ANNOTATION, KubernetesNodeDrainer
from agent.drains import NodeDrains
from config.aws import EKS_NODEGROUP_LABEL, AutoScalingGroupMapping, NodegroupMapping
from kube import KubernetesApi
from models import ActionStatus, Resize
from models.clock import SimulatedClock
from tests.fakes import kube_objects as objs
from tests.fakes.aws_api import FakeAwsApi
from tests.fakes.kube_api import FakeKubeApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)
WINDOW = timedelta(minutes=10)
ASG_LABEL = "leadtime.io/auto-scaling-group"


@dataclass
class Rig:
    aws: FakeAwsApi
    kube: FakeKubeApi
    group: str  # the Auto Scaling group
    bounds: Callable[[int], None]  # sets the minimum size the way its owner does
    clock: SimulatedClock
    drains: NodeDrains
    nodes: list[str]  # the group's nodes, by instance
    remover: Ec2AutoScalingGroupActuator | EksNodegroupActuator

    def idle_for_the_window(self) -> tuple[str, ...]:
        """Observe the pool, and again once the window has passed: its idle nodes then."""
        (state,) = self.remover.list_pools()
        self.drains.observe({"pool": state}, self.clock.now())
        self.clock.advance(WINDOW)
        seen, _ = self.drains.observe({"pool": state}, self.clock.now())
        return seen["pool"].idle_nodes

    def cordoned(self) -> list[str]:
        return sorted(n for n in self.nodes if (self.kube.get("nodes", n) or {})["spec"].get("unschedulable"))


def _rig(aws: FakeAwsApi, kube: FakeKubeApi, client: k8s.ApiClient, kind: str) -> Rig:
    """Two nodes at a minimum size of 2, each with a web pod (a ReplicaSet's), drained as the daemon drains them."""
    clock = SimulatedClock(T0)
    kube.clock = clock.now  # evicted pods finish terminating as the clock passes their grace period
    clients = aws.clients()
    groups = AutoScalingGroups(clients.autoscaling, clients.ec2)
    remover: Ec2AutoScalingGroupActuator | EksNodegroupActuator
    if kind == "asg":
        group = aws.add_group("gpu-spot", nodes=2, min_size=2)
        mapping = AutoScalingGroupMapping(pool="pool", group=group)
        remover = Ec2AutoScalingGroupActuator(groups, [mapping], clock, drained=True)
        label, value = ASG_LABEL, group

        def bounds(min_size: int) -> None:
            aws.set_bounds(group, min_size=min_size, max_size=16)

    else:
        group = aws.add_nodegroup("ml", "p5", nodes=2, min_size=2)
        remover = EksNodegroupActuator(
            clients.eks, groups, "ml", [NodegroupMapping(pool="pool", nodegroup="p5")], clock, drained=True
        )
        label, value = EKS_NODEGROUP_LABEL, "p5"

        def bounds(min_size: int) -> None:
            config = {"minSize": min_size, "maxSize": 16, "desiredSize": 2}
            aws.clients().eks.update_nodegroup_config(clusterName="ml", nodegroupName="p5", scalingConfig=config)
            aws.set_bounds(group, min_size=min_size, max_size=16)

    ids = [i["InstanceId"] for i in aws.group(group)["Instances"]]
    found = aws.direct.ec2.describe_instances(InstanceIds=ids)["Reservations"]
    dns = {i["InstanceId"]: i["PrivateDnsName"] for r in found for i in r["Instances"]}
    nodes = [dns[i] for i in ids]
    for instance_id, name in dns.items():
        kube.put("nodes", objs.node(name, "unused", labels={label: value}, instance=instance_id))
        kube.put("pods", objs.pod(f"web-{name}", name, labels={"app": "web"}, owner_kind="ReplicaSet"))
    drainer = KubernetesNodeDrainer(
        KubernetesApi(client), clock, {"pool": value}, remover, timedelta(minutes=15), pool_label=label
    )
    drains = NodeDrains({"pool": drainer}, WINDOW)
    return Rig(aws, kube, group, bounds, clock, drains, nodes, remover)


@pytest.mark.parametrize("kind", ["asg", "eks"])
def test_a_drain_at_the_groups_minimum_is_not_started(
    aws_api: FakeAwsApi, kube_api: FakeKubeApi, kube_client: k8s.ApiClient, kind: str
) -> None:
    rig = _rig(aws_api, kube_api, kube_client, kind)
    victim = rig.nodes[0]
    assert victim in rig.idle_for_the_window()

    refused = rig.drains.scale_down(Resize("pool", 2, 1, "idle", "r1"), rig.clock.now(), [victim])

    (result,) = refused.results
    assert result.status is ActionStatus.REJECTED
    assert "minimum size 2" in result.detail and "min_units" in result.detail and victim in result.detail
    assert not refused.failing and not rig.drains.pending
    assert rig.cordoned() == []
    assert kube_api.get("pods", f"web-{victim}", "default") is not None  # nothing evicted
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 0
    assert aws_api.group(rig.group)["DesiredCapacity"] == 2


@pytest.mark.parametrize("kind", ["asg", "eks"])
def test_a_drain_goes_ahead_once_the_group_may_shrink(
    aws_api: FakeAwsApi, kube_api: FakeKubeApi, kube_client: k8s.ApiClient, kind: str
) -> None:
    rig = _rig(aws_api, kube_api, kube_client, kind)
    victim = rig.nodes[0]
    assert victim in rig.idle_for_the_window()
    refused = rig.drains.scale_down(Resize("pool", 2, 1, "idle", "r1"), rig.clock.now(), [victim])
    assert [r.status for r in refused.results] == [ActionStatus.REJECTED]
    rig.bounds(1)  # the operator lowers the minimum size

    assert victim in rig.idle_for_the_window()  # a node whose drain was refused is held for a window
    started = rig.drains.scale_down(Resize("pool", 2, 1, "idle", "r2"), rig.clock.now(), [victim])

    assert [r.status for r in started.results] == [ActionStatus.STARTED]  # its web pod shuts down first
    assert rig.cordoned() == [victim]
    rig.clock.advance(timedelta(minutes=1))
    step = rig.drains.continue_pending(rig.clock.now())
    assert [r.status for r in step.results] == [ActionStatus.DONE] and not rig.drains.pending
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 1
    assert aws_api.group(rig.group)["DesiredCapacity"] == 1


def test_a_drain_taken_over_at_the_minimum_is_ended_and_its_node_uncordoned(
    aws_api: FakeAwsApi, kube_api: FakeKubeApi, kube_client: k8s.ApiClient
) -> None:
    """A drain another agent started (its node cordoned and marked) on a group that is at its minimum now."""
    rig = _rig(aws_api, kube_api, kube_client, "asg")
    victim = rig.nodes[1]
    KubernetesApi(kube_client).nodes.patch(
        victim, {"spec": {"unschedulable": True}, "metadata": {"annotations": {DRAIN_ANNOTATION: "d0"}}}
    )
    rig.drains.observe({}, rig.clock.now())
    assert [p.node for p in rig.drains.pending] == [victim]

    step = rig.drains.continue_pending(rig.clock.now())

    assert [r.status for r in step.results] == [ActionStatus.REJECTED]
    assert rig.cordoned() == [] and not rig.drains.pending
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 0

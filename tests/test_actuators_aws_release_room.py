"""A release of several nodes of an AWS group starts only the drains the group can lose above its minimum size: the
room is asked for each node with the pool's drains already under way, which take it first. Before, each node was
asked about alone, so a group of 3 at minimum size 2 released by 2 started both drains, cordoned and emptied both
nodes, and the second's removal was refused every tick until its drain timed out (DrainFailed each time), its pods
evicted for nothing. Now the second is rejected at once with nothing cordoned or evicted, as a single drain at the
minimum is. Driven by the agent's drains on the fake Kubernetes API, the adapters on moto behind the fake AWS API,
as the daemon builds them."""

from __future__ import annotations

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


class Rig:
    """Three nodes of a group at minimum size 2, each with a web pod (a ReplicaSet's), drained as the daemon drains
    them."""

    def __init__(self, aws: FakeAwsApi, kube: FakeKubeApi, client: k8s.ApiClient, kind: str) -> None:
        self.aws, self.kube, self.clock = aws, kube, SimulatedClock(T0)
        kube.clock = self.clock.now  # evicted pods finish terminating as the clock passes their grace period
        clients = aws.clients()
        groups = AutoScalingGroups(clients.autoscaling, clients.ec2)
        self.remover: Ec2AutoScalingGroupActuator | EksNodegroupActuator
        if kind == "asg":
            self.group = aws.add_group("gpu-spot", nodes=3, min_size=2)
            mapping = AutoScalingGroupMapping(pool="pool", group=self.group)
            self.remover = Ec2AutoScalingGroupActuator(groups, [mapping], self.clock, drained=True)
            label, value = ASG_LABEL, self.group
        else:
            self.group = aws.add_nodegroup("ml", "p5", nodes=3, min_size=2)
            nodegroups = [NodegroupMapping(pool="pool", nodegroup="p5")]
            self.remover = EksNodegroupActuator(clients.eks, groups, "ml", nodegroups, self.clock, drained=True)
            label, value = EKS_NODEGROUP_LABEL, "p5"
        ids = [i["InstanceId"] for i in aws.group(self.group)["Instances"]]
        found = aws.direct.ec2.describe_instances(InstanceIds=ids)["Reservations"]
        dns = {i["InstanceId"]: i["PrivateDnsName"] for r in found for i in r["Instances"]}
        self.nodes = [dns[i] for i in ids]
        for instance_id, name in dns.items():
            kube.put("nodes", objs.node(name, "unused", labels={label: value}, instance=instance_id))
            kube.put("pods", objs.pod(f"web-{name}", name, labels={"app": "web"}, owner_kind="ReplicaSet"))
        self.api = KubernetesApi(client)
        drainer = KubernetesNodeDrainer(
            self.api, self.clock, {"pool": value}, self.remover, timedelta(minutes=15), pool_label=label
        )
        self.drains = NodeDrains({"pool": drainer}, WINDOW)

    def idle_for_the_window(self) -> tuple[str, ...]:
        (state,) = self.remover.list_pools()
        self.drains.observe({"pool": state}, self.clock.now())
        self.clock.advance(WINDOW)
        seen, _ = self.drains.observe({"pool": state}, self.clock.now())
        return seen["pool"].idle_nodes

    def cordoned(self) -> list[str]:
        return sorted(n for n in self.nodes if (self.kube.get("nodes", n) or {})["spec"].get("unschedulable"))

    def with_pods(self) -> list[str]:
        return sorted(n for n in self.nodes if self.kube.get("pods", f"web-{n}", "default") is not None)


@pytest.mark.parametrize("kind", ["asg", "eks"])
def test_a_release_of_two_from_a_group_that_can_lose_one_starts_one_drain(
    aws_api: FakeAwsApi, kube_api: FakeKubeApi, kube_client: k8s.ApiClient, kind: str
) -> None:
    rig = Rig(aws_api, kube_api, kube_client, kind)
    idle = rig.idle_for_the_window()
    assert len(idle) == 3
    first, second = idle[:2]

    release = rig.drains.scale_down(Resize("pool", 3, 1, "idle", "r1"), rig.clock.now(), [first, second])

    assert [r.status for r in release.results] == [ActionStatus.STARTED, ActionStatus.REJECTED]
    assert first in release.results[0].detail  # its web pod shuts down first
    rejected = release.results[1].detail
    assert rejected.startswith("not drained: ") and second in rejected
    assert "minimum size 2" in rejected and f"drain under way of {first} takes" in rejected
    assert not release.failing
    assert [p.node for p in rig.drains.pending] == [first]
    assert rig.cordoned() == [first]
    assert second in rig.with_pods()  # nothing evicted from the node the group keeps

    rig.clock.advance(timedelta(minutes=1))
    step = rig.drains.continue_pending(rig.clock.now())

    assert [r.status for r in step.results] == [ActionStatus.DONE] and not rig.drains.pending
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 1
    assert aws_api.group(rig.group)["DesiredCapacity"] == 2
    assert second not in rig.cordoned() and second in rig.with_pods()  # serving all along


def test_a_drain_taken_over_takes_the_room_before_a_new_one(
    aws_api: FakeAwsApi, kube_api: FakeKubeApi, kube_client: k8s.ApiClient
) -> None:
    """A drain another agent started (its node cordoned and marked), not stepped here yet, counts as under way."""
    rig = Rig(aws_api, kube_api, kube_client, "asg")
    taken = rig.nodes[2]
    rig.api.nodes.patch(taken, {"spec": {"unschedulable": True}, "metadata": {"annotations": {DRAIN_ANNOTATION: "d0"}}})
    idle = rig.idle_for_the_window()
    assert taken not in idle and len(idle) == 2

    release = rig.drains.scale_down(Resize("pool", 3, 2, "idle", "r1"), rig.clock.now(), [idle[0]])

    (result,) = release.results
    assert result.status is ActionStatus.REJECTED and f"drain under way of {taken} takes" in result.detail
    assert rig.cordoned() == [taken] and len(rig.with_pods()) == 3

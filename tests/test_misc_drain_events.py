"""A drain rejected before it began (an AWS group at its minimum size cannot lose the node: the drainer cordons and
evicts nothing) is told as what happened, ``DrainRejected`` and a ``ScaleDownRejected`` of its pool, not as a node
``Cordoned``, a drain started and a scale-down under way. Driven by the agent's drains on the fake Kubernetes API,
the Auto Scaling group adapter on moto behind the fake AWS API, as the daemon builds them; a drain that does begin
is told as before."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client as k8s

from actuators.aws_asg import Ec2AutoScalingGroupActuator
from actuators.aws_groups import AutoScalingGroups
from actuators.kubernetes_drain import KubernetesNodeDrainer
from agent.decision_events import DecisionEvent
from config.aws import AutoScalingGroupMapping
from kube import KubernetesApi
from models import Resize
from models.clock import SimulatedClock
from tests.daemon.decision_event_rig import _release_events
from tests.fakes import kube_objects as objs
from tests.fakes.aws_api import FakeAwsApi
from tests.fakes.kube_api import FakeKubeApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)
LABEL = "leadtime.io/auto-scaling-group"


def _drain_one(aws: FakeAwsApi, kube: FakeKubeApi, client: k8s.ApiClient, min_size: int) -> list[DecisionEvent]:
    """A group of two idle nodes at ``min_size``, each with a web pod (a ReplicaSet's): the events of the tick whose
    plan shrinks it by one, draining its first node."""
    clock = SimulatedClock(T0)
    kube.clock = clock.now
    clients = aws.clients()
    group = aws.add_group("gpu-spot", nodes=2, min_size=min_size)
    remover = Ec2AutoScalingGroupActuator(
        AutoScalingGroups(clients.autoscaling, clients.ec2),
        [AutoScalingGroupMapping(pool="pool", group=group)],
        clock,
        drained=True,
    )
    ids = [i["InstanceId"] for i in aws.group(group)["Instances"]]
    found = aws.direct.ec2.describe_instances(InstanceIds=ids)["Reservations"]
    dns = {i["InstanceId"]: i["PrivateDnsName"] for r in found for i in r["Instances"]}
    for instance_id, name in dns.items():
        kube.put("nodes", objs.node(name, "unused", labels={LABEL: group}, instance=instance_id))
        kube.put("pods", objs.pod(f"web-{name}", name, labels={"app": "web"}, owner_kind="ReplicaSet"))
    drainer = KubernetesNodeDrainer(
        KubernetesApi(client), clock, {"pool": group}, remover, timedelta(minutes=15), pool_label=LABEL
    )
    (state,) = remover.list_pools()
    return _release_events(drainer, state, clock, dns[ids[0]], Resize("pool", 2, 1, "1 unit idle", "pool@t->1"))


def _spec(kube: FakeKubeApi, node: str) -> dict[str, Any]:
    stored = kube.get("nodes", node)
    assert stored is not None
    spec: dict[str, Any] = stored["spec"]
    return spec


def test_a_drain_rejected_before_it_began_is_told_as_rejected_only(
    aws_api: FakeAwsApi, kube_api: FakeKubeApi, kube_client: k8s.ApiClient
) -> None:
    events = _drain_one(aws_api, kube_api, kube_client, min_size=2)

    assert [(e.subject_kind, e.reason, e.warning) for e in events] == [
        ("pool", "ScaleDownRejected", True),
        ("node", "DrainRejected", True),
    ]
    pool, node = events
    assert pool.message.startswith("pool pool: did not scale down from 2 to 1 units: not drained: ")
    assert "minimum size 2" in pool.message and "min_units" in pool.message
    assert node.message.startswith("pool pool: not drained: ")
    assert not _spec(kube_api, node.subject).get("unschedulable")  # nothing cordoned


def test_a_drain_that_begins_is_told_cordoned_and_started(
    aws_api: FakeAwsApi, kube_api: FakeKubeApi, kube_client: k8s.ApiClient
) -> None:
    events = _drain_one(aws_api, kube_api, kube_client, min_size=1)

    assert [(e.subject_kind, e.reason) for e in events] == [
        ("pool", "ScaleDown"),
        ("node", "Cordoned"),
        ("node", "DrainStarted"),
        ("node", "DrainWaiting"),  # its web pod shuts down within its grace period
    ]
    node = events[1].subject
    assert events[0].message == f"pool pool: scale down from 2 to 1 units by draining {node}: 1 unit idle"
    assert _spec(kube_api, node)["unschedulable"] is True

"""A drained node whose instance already left its instance group is removed, not a permanent error: a drain taken
over (or retried) after its deleteInstances landed found the node, whose Node object outlives its VM for a while, in
no group of the pool, and ``delete_nodes`` refused it as "not instances of this pool", which blocked the pool until
someone unblocked it. A node that is an instance of another node pool's group is still refused."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client as k8s

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.kubernetes_drain import DRAIN_ANNOTATION, KubernetesNodeDrainer
from agent.drains import NodeDrains
from config.cloud import NodePoolMapping
from kube import KubernetesApi
from models import ActionResult, ActionStatus, PermanentActuatorError
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

START = datetime(2024, 5, 1, tzinfo=UTC)


def _adapter(fake: FakeGkeApi, clock: SimulatedClock) -> GkeNodePoolActuator:
    clients = google_clients(fake.url)
    mappings = [NodePoolMapping(pool="a", node_pool="a100"), NodePoolMapping(pool="h", node_pool="h100")]
    return GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, mappings, clock, drained=True)


def _names(fake: FakeGkeApi, pool: str) -> list[str]:
    return [i.name for m in fake.pools[pool].migs for i in m.instances]


def test_a_node_whose_instance_is_gone_is_removed_already(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=3)
    first = _names(gke_api, "a100")[0]
    actuator = _adapter(gke_api, SimulatedClock(START))
    actuator.delete_nodes("a", [first], "drain-1")  # lands
    gke_api.advance()  # the VM is deleted
    deletes = gke_api.calls("POST", "/deleteInstances")

    result = _adapter(gke_api, SimulatedClock(START)).delete_nodes("a", [first], "drain-1")  # another replica

    assert result.status is ActionStatus.DONE
    assert result.detail == f"{first} gone from its instance group (deleted already)"
    assert gke_api.calls("POST", "/deleteInstances") == deletes  # nothing asked again
    assert gke_api.pools["a100"].migs[0].target_size == 2


def test_the_nodes_still_there_are_deleted_and_the_gone_ones_named(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=3)
    first, second, third = _names(gke_api, "a100")
    actuator = _adapter(gke_api, SimulatedClock(START))
    actuator.delete_nodes("a", [first], "earlier")
    gke_api.advance()

    result = actuator.delete_nodes("a", [first, second], "now")

    assert result.status is ActionStatus.STARTED
    assert result.detail == f"deleting 1 nodes: {second}; {first} gone from its instance group (deleted already)"
    assert [(i.name, i.action) for i in gke_api.pools["a100"].migs[0].instances] == [
        (second, "DELETING"),
        (third, "NONE"),
    ]


def test_a_node_of_another_node_pool_is_refused(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=2, zones=("us-central1-a", "us-central1-b"))
    gke_api.add_pool("h100", nodes=2, zones=("us-central1-a", "us-central1-b"))
    other = _names(gke_api, "h100")[1]

    with pytest.raises(PermanentActuatorError, match=f"nodes {other} \\(node pool h100\\) are instances of another"):
        _adapter(gke_api, SimulatedClock(START)).delete_nodes("a", [other], "wrong")

    assert gke_api.calls("POST", "/deleteInstances") == 0


class _DiesAfterTheDelete:
    """A leader whose deleteInstances landed, and which died before it took the drain's annotation off."""

    def __init__(self, actuator: GkeNodePoolActuator) -> None:
        self._actuator = actuator

    def delete_nodes(self, pool_id: str, nodes: Sequence[str], key: str) -> ActionResult:
        self._actuator.delete_nodes(pool_id, nodes, key)
        raise SystemExit("the leader is gone")


def test_a_drain_taken_over_after_its_instance_left_finishes(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    gke_api.add_pool("a100", nodes=3)
    nodes = _names(gke_api, "a100")
    for name in nodes:
        kube_api.put("nodes", objs.node(name, "a100"))
    clock = SimulatedClock(START)
    kube_api.clock = clock.now
    api = KubernetesApi(kube_client)
    leader = KubernetesNodeDrainer(api, clock, {"a": "a100"}, _DiesAfterTheDelete(_adapter(gke_api, clock)))
    assert (
        leader.drain("a", nodes[0], f"r1#{nodes[0]}").status is ActionStatus.STARTED
    )  # cordoned and empty: removed at the drain's next step, once its pods are read again
    with pytest.raises(SystemExit):
        leader.drain("a", nodes[0], f"r1#{nodes[0]}")
    gke_api.advance()  # the VM is deleted; its Node object lingers, still marked as draining
    assert nodes[0] not in _names(gke_api, "a100")
    clock.advance(timedelta(seconds=20))

    successor = KubernetesNodeDrainer(api, clock, {"a": "a100"}, _adapter(gke_api, clock))
    drains = NodeDrains({"a": successor}, timedelta(0))
    drains.observe({}, clock.now())
    taken_over = drains.continue_pending(clock.now())  # its first step, the node cordoned and empty
    assert [r.status for r in taken_over.results] == [ActionStatus.STARTED]
    clock.advance(timedelta(minutes=1))
    drains.observe({}, clock.now())
    outcome = drains.continue_pending(clock.now())

    assert [r.status for r in outcome.results] == [ActionStatus.DONE]
    assert "gone from its instance group" in outcome.results[0].detail
    assert outcome.permanent == {}
    lingering = kube_api.get("nodes", nodes[0])
    assert lingering is not None
    assert DRAIN_ANNOTATION not in (lingering["metadata"].get("annotations") or {})

"""GKE autoscaling modes hold for drains as for resizes.

``refuse`` (the default): a pool with GKE autoscaling on is not touched, and its drains were: ``delete_nodes`` never
read the autoscaling, so the drainer cordoned, emptied and deleted its idle nodes. The drain is now refused before
anything is cordoned, with the permanent error a resize gets (the executor blocks the pool and alerts), and a drain
that reaches the deletion all the same (started before autoscaling was turned on) is refused there.

``move-bounds``: the bounds a scale-up moved (7-7) stayed there while drains took the pool to 3, so GKE's autoscaler
would neither take the pool below 7 nor leave it there for long, and the next target, 3, was "already at target".
The bounds now follow each deletion, and a resize to the pool's size moves bounds left off it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

import pytest
from kubernetes import client as k8s

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.kubernetes_drain import DRAIN_ANNOTATION, KubernetesNodeDrainer
from config.cloud import NodePoolMapping
from kube import KubernetesApi
from models import ActionStatus, PermanentActuatorError, TransientActuatorError
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

START = datetime(2024, 5, 1, tzinfo=UTC)
ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
AUTOSCALING_ON = {"enabled": True, "totalMinNodeCount": 1, "totalMaxNodeCount": 8}
REFUSED = "GKE autoscaling is on for node pool 'a100'; turn it off, or set gke_autoscaling: move-bounds"


def _adapter(fake: FakeGkeApi, mode: Literal["refuse", "move-bounds"] = "refuse") -> GkeNodePoolActuator:
    clients = google_clients(fake.url)
    mapping = NodePoolMapping(pool="a", node_pool="a100", gke_autoscaling=mode)
    return GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], SimulatedClock(START), drained=True)


def _names(fake: FakeGkeApi) -> list[str]:
    return [i.name for m in fake.pools["a100"].migs for i in m.instances if i.action != "DELETING"]


def _bounds(fake: FakeGkeApi) -> tuple[int, int]:
    autoscaling = fake.pools["a100"].spec["autoscaling"]
    return autoscaling["totalMinNodeCount"], autoscaling["totalMaxNodeCount"]


def _drainer(kube_api: FakeKubeApi, kube_client: k8s.ApiClient, actuator: GkeNodePoolActuator) -> KubernetesNodeDrainer:
    clock = SimulatedClock(START)
    kube_api.clock = clock.now
    return KubernetesNodeDrainer(KubernetesApi(kube_client), clock, {"a": "a100"}, actuator)


def _unschedulable(kube_api: FakeKubeApi, name: str) -> bool:
    node = kube_api.get("nodes", name)
    assert node is not None
    return bool(node["spec"].get("unschedulable"))


# -- refuse ----------------------------------------------------------------------------------------------------------
def test_a_drain_of_a_pool_gke_autoscales_is_refused_before_its_node_is_cordoned(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    gke_api.add_pool("a100", nodes=3, autoscaling=AUTOSCALING_ON)
    idle = _names(gke_api)[0]
    for name in _names(gke_api):
        kube_api.put("nodes", objs.node(name, "a100"))
    drainer = _drainer(kube_api, kube_client, _adapter(gke_api))

    with pytest.raises(PermanentActuatorError, match=REFUSED):
        drainer.drain("a", idle, f"release#{idle}")

    assert not _unschedulable(kube_api, idle)
    assert kube_api.calls("patch", "nodes") <= 1  # no cordon: at most the uncordon given to a drain taken over
    assert gke_api.calls("POST", "/deleteInstances") == 0


def test_a_drain_taken_over_on_a_pool_gke_now_autoscales_is_ended_and_its_node_uncordoned(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    gke_api.add_pool("a100", nodes=3, autoscaling=AUTOSCALING_ON)  # turned on after another replica began a drain
    draining = _names(gke_api)[0]
    node = objs.node(draining, "a100", unschedulable=True)
    node["metadata"]["annotations"] = {DRAIN_ANNOTATION: "r1"}
    kube_api.put("nodes", node)
    drainer = _drainer(kube_api, kube_client, _adapter(gke_api))

    with pytest.raises(PermanentActuatorError, match=REFUSED):
        drainer.drain("a", draining, "r1")

    assert not _unschedulable(kube_api, draining)
    after = kube_api.get("nodes", draining)
    assert after is not None and DRAIN_ANNOTATION not in (after["metadata"].get("annotations") or {})
    assert gke_api.calls("POST", "/deleteInstances") == 0


def test_deleting_drained_nodes_of_a_pool_gke_autoscales_is_refused(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=3, autoscaling=AUTOSCALING_ON)

    with pytest.raises(PermanentActuatorError, match=REFUSED):
        _adapter(gke_api).delete_nodes("a", _names(gke_api)[:1], "drain-1")

    assert gke_api.calls("POST", "/deleteInstances") == 0
    assert len(_names(gke_api)) == 3


def test_without_gke_autoscaling_a_drain_still_deletes_its_node(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=3, autoscaling={"enabled": False, "totalMinNodeCount": 1, "totalMaxNodeCount": 8})
    actuator = _adapter(gke_api)
    first = _names(gke_api)[0]

    assert actuator.kept_units("a", [first]) == ""
    assert actuator.delete_nodes("a", [first], "drain-1").status is ActionStatus.STARTED
    assert gke_api.calls("POST", ":setAutoscaling") == 0


# -- move-bounds -----------------------------------------------------------------------------------------------------
def test_the_bounds_follow_the_pool_as_drains_take_it_down(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=3, zones=ZONES, autoscaling={"enabled": True, "totalMaxNodeCount": 12})
    actuator = _adapter(gke_api, "move-bounds")
    actuator.resize("a", 7, "up")
    gke_api.advance()
    assert _bounds(gke_api) == (7, 7)
    assert actuator.kept_units("a", _names(gke_api)[:1]) == ""

    result = actuator.delete_nodes("a", _names(gke_api)[:4], "drains")

    assert result.status is ActionStatus.STARTED
    assert "autoscaler bounds 7-7 -> 3-3" in result.detail
    assert _bounds(gke_api) == (3, 3)
    gke_api.advance()
    (state,) = actuator.list_pools()
    assert state.target_units == 3
    assert actuator.resize("a", 3, "next-plan").detail == "already at target"


def test_a_deletion_waits_for_an_operation_on_the_pool_so_the_bounds_can_follow(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=3, zones=ZONES, autoscaling={"enabled": True, "totalMaxNodeCount": 12})
    actuator = _adapter(gke_api, "move-bounds")
    actuator.resize("a", 7, "up")  # its bounds' operation still runs
    victim = _names(gke_api)[0]

    with pytest.raises(TransientActuatorError, match="still running on this pool"):
        actuator.delete_nodes("a", [victim], "drain-1")
    assert gke_api.calls("POST", "/deleteInstances") == 0

    gke_api.finish_operations()
    result = actuator.delete_nodes("a", [victim], "drain-1")  # the drain's next step, the same key
    assert result.status is ActionStatus.STARTED
    assert _bounds(gke_api) == (6, 6)


def test_bounds_not_moved_after_a_deletion_are_moved_on_the_next_try(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=3, zones=ZONES, autoscaling={"enabled": True, "totalMaxNodeCount": 12})
    actuator = _adapter(gke_api, "move-bounds")
    actuator.resize("a", 7, "up")
    gke_api.advance()
    victim = _names(gke_api)[0]
    gke_api.fail_next(status=503, message="backend unavailable", path=":setAutoscaling")

    with pytest.raises(TransientActuatorError, match="bounds are still 7-7, not moved to the pool's 6 nodes"):
        actuator.delete_nodes("a", [victim], "drain-1")

    result = actuator.delete_nodes("a", [victim], "drain-1")
    assert result.status is ActionStatus.STARTED
    assert "autoscaler bounds 7-7 -> 6-6" in result.detail
    assert gke_api.calls("POST", "/deleteInstances") == 1  # the node was deleted once
    assert _bounds(gke_api) == (6, 6)


def test_a_resize_to_the_pools_size_moves_bounds_left_off_it(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool(
        "a100", nodes=3, zones=ZONES, autoscaling={"enabled": True, "totalMinNodeCount": 7, "totalMaxNodeCount": 7}
    )
    actuator = _adapter(gke_api, "move-bounds")

    result = actuator.resize("a", 3, "hold")

    assert result.status is ActionStatus.STARTED
    assert result.detail.startswith("autoscaler bounds 7-7 -> 3-3")
    assert _bounds(gke_api) == (3, 3)
    assert [m.target_size for m in gke_api.pools["a100"].migs] == [1, 1, 1]
    gke_api.advance()
    assert actuator.resize("a", 3, "hold-again").detail == "already at target"

"""``move-bounds`` at zero nodes: GKE refuses autoscaling on with a maximum of 0.

A drain that deleted a pool's last node moved the bounds to 0-0 after ``deleteInstances`` went out; proto3 JSON
leaves the zeros out, so the body was ``{"enabled": true}`` and GKE answers 400 "Node_pool_autoscaling.max_node_count
and node_pool_autoscaling.total_max_node_count cannot be both set to zero." The 400 was permanent: the drain was given
up (its node, on its way out, uncordoned) and the pool blocked. A resize to 0 of a pool at 0 with bounds left off it
sent the same 0-0. The bounds at zero nodes are now 0-1, and a bounds failure after a deletion is only transient.
"""

from __future__ import annotations

from typing import Any

import pytest
from google.api_core import exceptions as google_exceptions
from kubernetes import client as k8s

from models import ActionStatus, TransientActuatorError
from tests.actuators.test_gke_autoscaling_under_drains import _adapter, _drainer, _names, _unschedulable
from tests.contract.harnesses import CLUSTER
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import ZERO_MAX_REFUSAL, FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

ONE_NODE = {"enabled": True, "totalMinNodeCount": 1, "totalMaxNodeCount": 1}


def _bounds(fake: FakeGkeApi) -> tuple[int, int]:
    """The pool's total bounds as GKE holds them: a 0 is left out of proto3 JSON."""
    autoscaling: dict[str, Any] = fake.pools["a100"].spec["autoscaling"]
    return autoscaling.get("totalMinNodeCount", 0), autoscaling.get("totalMaxNodeCount", 0)


def test_the_fake_refuses_autoscaling_with_a_maximum_of_zero_as_gke_does(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=1, autoscaling=dict(ONE_NODE))
    clients = google_clients(gke_api.url)
    pool = f"{CLUSTER}/nodePools/a100"
    zero = {"enabled": True, "total_min_node_count": 0, "total_max_node_count": 0}

    with pytest.raises(google_exceptions.BadRequest, match="cannot be both set to zero"):
        clients.gke.set_node_pool_autoscaling(request={"name": pool, "autoscaling": zero})

    assert _bounds(gke_api) == (1, 1)


def test_draining_the_last_node_leaves_bounds_0_1(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=1, autoscaling=dict(ONE_NODE))
    actuator = _adapter(gke_api, "move-bounds")

    result = actuator.delete_nodes("a", _names(gke_api), "drain-last")

    assert result.status is ActionStatus.STARTED
    assert "autoscaler bounds 1-1 -> 0-1" in result.detail
    assert _bounds(gke_api) == (0, 1)
    assert gke_api.calls("POST", "/deleteInstances") == 1
    gke_api.advance()
    (state,) = actuator.list_pools()
    assert state.target_units == 0
    assert actuator.resize("a", 0, "next-plan").detail == "already at target"
    assert gke_api.calls("POST", ":setAutoscaling") == 1


def test_a_resize_to_zero_of_a_pool_at_zero_moves_bounds_left_off_it_to_0_1(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=0, autoscaling={"enabled": True, "totalMinNodeCount": 3, "totalMaxNodeCount": 3})
    actuator = _adapter(gke_api, "move-bounds")

    result = actuator.resize("a", 0, "hold")

    assert result.status is ActionStatus.STARTED
    assert result.detail.startswith("autoscaler bounds 3-3 -> 0-1")
    assert _bounds(gke_api) == (0, 1)
    gke_api.advance()
    assert actuator.resize("a", 0, "hold-again").detail == "already at target"


def test_a_scale_up_from_zero_moves_bounds_0_1_to_the_target(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=0, autoscaling={"enabled": True, "totalMaxNodeCount": 1})
    actuator = _adapter(gke_api, "move-bounds")

    result = actuator.resize("a", 2, "up")

    assert result.status is ActionStatus.STARTED
    assert _bounds(gke_api) == (2, 2)
    assert [m.target_size for m in gke_api.pools["a100"].migs] == [2]


def test_a_bounds_refusal_after_the_deletion_is_transient_and_the_drain_goes_on(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    gke_api.add_pool("a100", nodes=1, autoscaling=dict(ONE_NODE))
    (idle,) = _names(gke_api)
    kube_api.put("nodes", objs.node(idle, "a100"))
    drainer = _drainer(kube_api, kube_client, _adapter(gke_api, "move-bounds"))
    gke_api.fail_next(status=400, message=ZERO_MAX_REFUSAL, path=":setAutoscaling")

    assert (
        drainer.drain("a", idle, f"release#{idle}").status is ActionStatus.STARTED
    )  # cordoned and empty: removed at the drain's next step, once its pods are read again
    with pytest.raises(TransientActuatorError, match="bounds are still 1-1, not moved to the pool's 0 nodes"):
        drainer.drain("a", idle, f"release#{idle}")
    assert _unschedulable(kube_api, idle)  # not given up: the node is on its way out
    assert gke_api.calls("POST", "/deleteInstances") == 1

    result = drainer.drain("a", idle, f"release#{idle}")  # the drain's next step, the same key

    assert result.status is ActionStatus.DONE
    assert "autoscaler bounds 1-1 -> 0-1" in result.detail
    assert gke_api.calls("POST", "/deleteInstances") == 1
    assert _bounds(gke_api) == (0, 1)

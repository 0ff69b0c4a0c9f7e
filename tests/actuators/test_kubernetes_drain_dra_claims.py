"""A pod that gets its GPUs through Dynamic Resource Allocation keeps its node from being idle.

A node whose GPUs a DRA driver manages advertises them as ResourceSlices, not as ``nvidia.com/gpu``, and the pod
asks for them through ``spec.resourceClaims`` (used by its containers' ``resources.claims``), requesting no
extended resource: by the extended resources alone the node looked idle, a release drained it, evicted the training
job and deleted the node. Against the fake Kubernetes and GKE APIs, with the real clients."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from models import ActionStatus
from tests.actuators import kubernetes_drain_rig as rig
from tests.actuators.kubernetes_drain_rig import Cluster, _cordoned, _evictions
from tests.fakes import kube_objects as objs

cluster = rig.cluster

CLAIMS = {
    "from a template": {"name": "gpus", "resourceClaimTemplateName": "eight-a100"},
    "a claim made before": {"name": "gpus", "resourceClaimName": "shared-a100"},
}


def _dra_node(c: Cluster, node: str) -> None:
    """The node as a DRA driver leaves it: no ``nvidia.com/gpu`` in its capacity or allocatable."""
    found = objs.node(node, "a100")
    for field in ("allocatable", "capacity"):
        found["status"][field].pop("nvidia.com/gpu")
    c.kube.put("nodes", found)


def _claiming_job(name: str, node: str, claim: dict[str, Any]) -> dict[str, Any]:
    pod = objs.pod(name, node, owner_kind="Job")
    pod["spec"]["resourceClaims"] = [claim]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": claim["name"]}]
    return pod


@pytest.mark.parametrize("claim", list(CLAIMS.values()), ids=list(CLAIMS))
def test_a_node_whose_pod_claims_devices_is_busy(cluster: Cluster, claim: dict[str, Any]) -> None:
    c = cluster
    node = c.nodes[1]
    _dra_node(c, node)
    c.kube.put("pods", _claiming_job("train-0", node, claim))

    assert node not in c.drainer.idle_nodes("a", timedelta(0))
    assert c.drainer.idle_nodes("a", timedelta(0)) == [c.nodes[0], c.nodes[2]]
    assert c.drainer.pool_nodes("a")[-1] == node  # busy: after the idle nodes for a forced release


def test_a_drain_rejects_a_claiming_pod_bound_after_the_check(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    _dra_node(c, node)
    assert node in c.drainer.idle_nodes("a", timedelta(0))
    c.kube.put("pods", _claiming_job("train-0", node, CLAIMS["from a template"]))  # bound since the survey

    result = c.drainer.drain("a", node, f"r1/drain/{node}")

    assert result.status is ActionStatus.REJECTED
    assert "no longer idle: default/train-0 started on it" in result.detail
    assert _evictions(c, "train-0") == 0
    assert _evictions(c, f"web-{node}") == 0
    assert not _cordoned(c, node)
    assert c.gke.calls("POST", "deleteInstances") == 0

"""KubernetesNodeDrainer on the fake Kubernetes API: which pods block a drain (annotated not to be disrupted, nothing
recreates them, their local storage would be lost) and which their owners let go (evicted, the node removed)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from models import (
    ActionStatus,
)
from tests.actuators import kubernetes_drain_rig as rig
from tests.actuators.kubernetes_drain_rig import JOB, Cluster, _cordoned, _evictions
from tests.fakes import kube_objects as objs

cluster = rig.cluster  # the fake Kubernetes and GKE APIs, a pool "a" of three nodes

SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
LOCAL_VOLUMES = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
NO_CONTROLLER = "no controller recreates it"
SCRATCH_LOST = "local storage emptyDir 'scratch' would be lost"


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"annotations": {SAFE_TO_EVICT: "false"}, **JOB}, f'annotated {SAFE_TO_EVICT}: "false"'),
        (
            {"annotations": {"karpenter.sh/do-not-disrupt": "true"}, **JOB},
            'annotated karpenter.sh/do-not-disrupt: "true"',
        ),
        (  # safe-to-evict "true" lets a bare pod go, not one that must not be disrupted
            {"annotations": {SAFE_TO_EVICT: "true", "karpenter.sh/do-not-disrupt": "true"}},
            'annotated karpenter.sh/do-not-disrupt: "true"',
        ),
        ({}, NO_CONTROLLER),  # a bare pod: evicting it deletes it for good
        ({"phase": "Pending"}, NO_CONTROLLER),  # bound to the node, not started yet: deleted all the same
        ({"owner_kind": "ReplicaSet", "controller": False}, NO_CONTROLLER),  # an owner that only garbage-collects it
        ({"volumes": [objs.empty_dir("scratch")], **JOB}, SCRATCH_LOST),
        ({"volumes": [objs.host_path("models")], **JOB}, "local storage hostPath 'models' would be lost"),
        (
            {
                "volumes": [objs.empty_dir("scratch"), objs.host_path("models")],
                "annotations": {LOCAL_VOLUMES: "models"},
            },
            f"{NO_CONTROLLER}, {SCRATCH_LOST}",  # only the volume the annotation names is spared
        ),
    ],
    ids=[
        "safe-to-evict-false",
        "do-not-disrupt",
        "do-not-disrupt-over-safe-to-evict",
        "bare",
        "bare-pending",
        "owner-not-controller",
        "empty-dir",
        "host-path",
        "local-volume-not-listed",
    ],
)
def test_pods_that_must_not_be_disrupted_block_the_drain(cluster: Cluster, options: dict[str, Any], why: str) -> None:
    node = cluster.nodes[2]
    cluster.kube.put("pods", objs.pod("precious", node, **options))
    result = cluster.drainer.drain("a", node, "d")
    assert result.status is ActionStatus.REJECTED
    assert result.detail == f"pods that must not be disrupted: default/precious ({why}); node {node} uncordoned"
    assert not _cordoned(cluster, node)
    assert cluster.kube.calls("create", "pods", "eviction") == 0
    assert cluster.kube.get("pods", "precious", "default") is not None
    assert cluster.gke.calls("POST", "deleteInstances") == 0


@pytest.mark.parametrize(
    "options",
    [
        {"annotations": {SAFE_TO_EVICT: "true"}},  # a bare pod its owner lets go
        {"annotations": {SAFE_TO_EVICT: "true"}, "volumes": [objs.empty_dir("scratch"), objs.host_path("models")]},
        {
            "annotations": {LOCAL_VOLUMES: "scratch, models"},
            "volumes": [objs.empty_dir("scratch"), objs.host_path("models")],
            **JOB,
        },
        {"volumes": [objs.empty_dir("shm", medium="Memory")], **JOB},  # tmpfs: not local storage
        {"owner_kind": "StatefulSet", "phase": "Pending"},
    ],
    ids=["bare-safe-to-evict", "local-storage-safe-to-evict", "local-volumes-listed", "memory-empty-dir", "pending"],
)
def test_pods_their_owners_let_go_are_evicted(cluster: Cluster, options: dict[str, Any]) -> None:
    node = cluster.nodes[0]
    cluster.kube.put("pods", objs.pod("scratchy", node, accelerators=8, **options))
    assert cluster.drainer.drain("a", node, "d", forced=True).status is ActionStatus.STARTED  # busy: forced
    assert _evictions(cluster, "scratchy") == 1
    cluster.clock.advance(timedelta(seconds=30))
    assert cluster.drainer.drain("a", node, "d").status is ActionStatus.DONE
    assert cluster.kube.get("pods", "scratchy", "default") is None
    assert cluster.gke.calls("POST", "deleteInstances") == 1

"""A pod whose accelerators are in an init container keeps its node busy, as the scheduler reserves them.

A native sidecar (an init container with ``restartPolicy: Always``: an inference server's) runs beside the app
containers for the pod's life, and a run-once init container (a GPU health check, a model warm-up) holds its
accelerators while the pod is in its init phase; the scheduler reserves both for the pod. Read by its app containers
alone, such a pod asked for nothing: its node read idle, and a drain evicted the pod. Against the fake Kubernetes and
GKE APIs, with the real clients."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from models import ActionStatus
from tests.actuators import kubernetes_drain_rig as rig
from tests.actuators.kubernetes_drain_rig import JOB, Cluster, _cordoned, _evictions
from tests.fakes import kube_objects as objs

cluster = rig.cluster  # the fake Kubernetes and GKE APIs, a pool "a" of three nodes, each running a web pod

GPU = objs.GPU_RESOURCE


def _container(name: str, gpus: int, sidecar: bool = False, limit_only: bool = False) -> dict[str, Any]:
    amount = {GPU: str(gpus)}
    resources = {"limits": amount} if limit_only else {"requests": amount, "limits": amount}
    container: dict[str, Any] = {"name": name, "image": "busybox", "resources": resources}
    if sidecar:
        container["restartPolicy"] = "Always"
    return container


def _job_pod(name: str, node: str, app: int, init: list[dict[str, Any]], phase: str = "Running") -> dict[str, Any]:
    """A Job's pod asking ``app`` GPUs in its app container, with these init containers (in this order)."""
    pod = objs.pod(name, node, accelerators=app, phase=phase, **JOB)
    pod["spec"]["initContainers"] = init
    return pod


IN_INIT_CONTAINERS = {
    "a sidecar": {"init": [_container("server", 8, sidecar=True)]},
    "a run-once init container, the pod in its init phase": {"init": [_container("warmup", 8)], "phase": "Pending"},
    "a sidecar's limit, no request": {"init": [_container("server", 8, sidecar=True, limit_only=True)]},
}


@pytest.mark.parametrize("where", list(IN_INIT_CONTAINERS.values()), ids=list(IN_INIT_CONTAINERS))
def test_accelerators_in_an_init_container_keep_the_node_busy(cluster: Cluster, where: dict[str, Any]) -> None:
    c = cluster
    node = c.nodes[0]
    c.kube.put("pods", _job_pod("infer-0", node, app=0, **where))

    assert c.drainer.idle_nodes("a", timedelta(0)) == c.nodes[1:]
    assert c.drainer.pool_nodes("a") == [*c.nodes[1:], node]  # busy: after the idle nodes for a forced release


def test_a_drain_rejects_a_sidecar_pod_bound_after_the_check(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[0]
    assert node in c.drainer.idle_nodes("a", timedelta(0))
    c.kube.put("pods", _job_pod("infer-0", node, app=0, init=[_container("server", 8, sidecar=True)]))

    result = c.drainer.drain("a", node, f"r1/drain/{node}")

    assert result.status is ActionStatus.REJECTED
    assert "no longer idle: default/infer-0 started on it" in result.detail
    assert (_evictions(c, "infer-0"), _evictions(c, f"web-{node}")) == (0, 0)
    assert not _cordoned(c, node)
    assert c.gke.calls("POST", "deleteInstances") == 0


def test_a_forced_release_weighs_each_pod_by_what_the_scheduler_reserves(cluster: Cluster) -> None:
    """One pod a node; the busy nodes go by the accelerators their pods hold (then by name). The scheduler's
    reservation: the app containers plus every sidecar, or an init container plus the sidecars listed before it,
    whichever is more."""
    c = cluster
    with_sidecar, warmed_up, app_only = c.nodes
    late_sidecar = "z-late-sidecar"
    c.kube.put("nodes", objs.node(late_sidecar, "a100"))
    c.kube.put("pods", _job_pod("serve", with_sidecar, app=4, init=[_container("proxy", 1, sidecar=True)]))  # 5
    c.kube.put("pods", _job_pod("train", warmed_up, app=4, init=[_container("check", 8)]))  # 8: the check's
    c.kube.put("pods", _job_pod("plain", app_only, app=6, init=[]))  # 6
    # 7: the run-once container ran before the sidecar started (the demand query's sidecars-plus-larger rule says 8)
    late = [_container("warmup", 7), _container("proxy", 1, sidecar=True)]
    c.kube.put("pods", _job_pod("late", late_sidecar, app=2, init=late))

    assert c.drainer.pool_nodes("a") == [with_sidecar, app_only, late_sidecar, warmed_up]

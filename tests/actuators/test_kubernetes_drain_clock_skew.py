"""A pod past its grace period by the agent's clock, on a node whose kubelet is alive, is still work.

The API server writes a pod's ``deletionTimestamp`` by its own clock; the agent reads it by its own, which may run
ahead. A pod on a Ready node is still shutting down (a training job saving its checkpoint on SIGTERM) for as long as
its kubelet has not finished it, whatever the agent's clock says. Read as past its grace period, such a pod left its
node idle, offered for a drain first, and an ERROR slice short of hosts whose job's pod had just been told to stop
was a failed slice, its node pool deleted at once, mid-checkpoint. Only a node that is not Ready (the node lifecycle
controller marks it Unknown once its kubelet is silent) leaves a pod to be dropped, a minute past its grace period
(``test_kubernetes_drain_dead_node``). Against the fake Kubernetes and GKE APIs, with the real clients; the API
server's clock (and so its kubelets') runs three minutes behind the agent's."""

from __future__ import annotations

from datetime import timedelta

import pytest
from kubernetes import client as k8s

from actuators.pod_rules import ABANDONED_AFTER
from kube import KubernetesApi
from models import ActionStatus
from tests.actuators import kubernetes_drain_rig as rig
from tests.actuators.kubernetes_drain_rig import JOB, Cluster, _pod
from tests.actuators.test_gke_broken_slices import _lose_hosts
from tests.actuators.test_gke_slice_errors import Rig
from tests.actuators.test_gke_slice_errors import rig as slice_rig  # noqa: F401  (the fixture)
from tests.contract.harnesses import POOL
from tests.fakes import kube_objects as objs
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.kube_api.evictions import NODE_MONITOR_GRACE_PERIOD

cluster = rig.cluster  # the fake Kubernetes and GKE APIs, a pool "a" of three nodes, each running a web pod

SKEW = timedelta(minutes=3)  # the agent's clock runs this far ahead of the API server's


# A kubelet that is alive but reports its node not ready (its container runtime, network plugin or GPU driver at fault)
# posts Ready False; it still finishes its pods (tests/fakes/REFERENCE.md).
NOT_READY = {
    "type": "Ready",
    "status": "False",
    "reason": "KubeletNotReady",
    "message": "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady",
}


def _not_ready(kube: FakeKubeApi, name: str) -> None:
    node = kube.get("nodes", name)
    assert node is not None
    node["status"]["conditions"] = [NOT_READY]
    kube.put("nodes", node)


@pytest.mark.parametrize("ready", [True, False], ids=["Ready", "Ready False: its kubelet alive"])
def test_a_pod_checkpointing_on_a_live_node_keeps_it_busy_whatever_the_agents_clock_says(
    cluster: Cluster, ready: bool
) -> None:
    c = cluster
    live = c.nodes[2]
    c.kube.clock = lambda: c.clock.now() - SKEW
    if not ready:
        _not_ready(c.kube, live)
    c.kube.put("pods", _pod("train-0", live, grace=600, accelerators=8, **JOB))
    c.api.pods.evict("train-0", "default")  # SIGTERM: ten minutes to save its checkpoint

    c.clock.advance(timedelta(minutes=9))  # nine of them gone: two minutes past its deadline by the agent's clock
    assert c.kube.get("pods", "train-0", "default") is not None  # its kubelet is still shutting it down
    assert c.drainer.idle_nodes("a", timedelta(0)) == c.nodes[:2]
    assert c.drainer.pool_nodes("a")[-1] == live  # busy: last for a forced release

    c.clock.advance(timedelta(minutes=1))  # its kubelet finishes it at its deadline, by the API server's clock
    assert c.kube.get("pods", "train-0", "default") is None
    assert c.drainer.idle_nodes("a", timedelta(0)) == c.nodes


@pytest.mark.parametrize("ready", [True, False], ids=["Ready", "Ready False: its kubelet alive"])
def test_an_error_slice_whose_job_pod_checkpoints_on_a_live_host_is_not_deleted(
    slice_rig: Rig,  # noqa: F811
    kube_client: k8s.ApiClient,
    ready: bool,
) -> None:
    """The slice's instance groups lost all hosts but the last, whose kubelet is alive and runs the job's pod; the
    job restarts (its pod is deleted, two minutes to save its checkpoint) just before the agent reads the slice."""
    slices = slice_rig
    agent_now = slices.kube.clock  # the rig's clock, which the agent reads
    slices.kube.clock = lambda: agent_now() - SKEW
    host = slices.hosts("v5e-1")[-1]
    if not ready:
        _not_ready(slices.kube, host)
    slices.kube.put("pods", _pod(f"train-{host}", host, grace=120, accelerators=4, resource=objs.TPU_RESOURCE, **JOB))
    _lose_hosts(slices, "v5e-1", keep=1)
    slices.gke.report_error("v5e-1", conditions=())
    KubernetesApi(kube_client).pods.evict(f"train-{host}", "default")

    (state,) = slices.actuator.list_pools()
    assert [name for name, _ in state.broken_units] == ["v5e-1"]  # a ready slice at work, short of hosts
    assert state.failed_units == 0
    slices.actuator.resize(POOL, state.target_units, "clear-failed")
    assert slices.gke.pools["v5e-1"].status == "ERROR"  # kept: never deleted mid-checkpoint
    assert slices.gke.calls("DELETE", "/nodePools/") == 0
    assert slices.kube.get("pods", f"train-{host}", "default") is not None


def test_a_pod_on_a_node_cut_off_from_the_api_server_is_work_for_its_grace_period_by_the_agents_clock(
    cluster: Cluster,
) -> None:
    """The node's kubelet is cut off from the API server (its node Unknown) but alive: it stops the pod at the end
    of its grace period. The agent's clock runs three minutes ahead, so by it the pod's ``deletionTimestamp``, two
    minutes after its deletion by the API server's clock, is a minute past already when the pod is first seen."""
    c = cluster
    cut_off = c.nodes[2]
    c.kube.clock = lambda: c.clock.now() - SKEW
    c.kube.put("pods", _pod("train-0", cut_off, grace=120, accelerators=8, **JOB))
    c.kube.stop_kubelet(cut_off, since=c.kube.clock() - NODE_MONITOR_GRACE_PERIOD)  # Unknown from now
    c.api.pods.evict("train-0", "default")  # the taint eviction: two minutes to save its checkpoint
    assert c.drainer.idle_nodes("a", timedelta(0)) == c.nodes[:2]

    c.clock.advance(timedelta(minutes=2))  # the checkpoint's last seconds
    assert c.drainer.idle_nodes("a", timedelta(0)) == c.nodes[:2]
    assert c.drainer.pool_nodes("a")[-1] == cut_off
    c.clock.advance(ABANDONED_AFTER)  # seen left behind for its grace period and a minute: nothing runs there now
    assert c.kube.get("pods", "train-0", "default") is not None
    assert c.drainer.idle_nodes("a", timedelta(0)) == c.nodes


def test_an_overdue_drain_waits_for_a_pod_its_live_kubelet_still_shuts_down(cluster: Cluster) -> None:
    """A web pod with twenty minutes to shut down; the drain's timeout is fifteen. By the agent's clock the pod is
    past its grace period at 17 minutes (its ``deletionTimestamp``, stamped by the API server's clock); its kubelet
    finishes it at 20."""
    c = cluster
    node = c.nodes[2]
    c.kube.clock = lambda: c.clock.now() - SKEW
    web = c.kube.get("pods", f"web-{node}", "default")
    assert web is not None
    web["spec"]["terminationGracePeriodSeconds"] = 20 * 60
    c.kube.put("pods", web)
    start = c.clock.now()
    assert c.drainer.drain("a", node, "d").status is ActionStatus.STARTED

    for minutes in (16, 17.5, 19.5):
        c.clock.advance(start + timedelta(minutes=minutes) - c.clock.now())
        waiting = c.drainer.drain("a", node, "d")
        assert waiting.status is ActionStatus.STARTED
        assert "to finish terminating (after 0:15:00: waited for while a kubelet may still finish them)" in (
            waiting.detail
        )
        assert c.kube.get("pods", f"web-{node}", "default") is not None
        assert c.gke.calls("POST", "deleteInstances") == 0

    c.clock.advance(timedelta(minutes=1))  # its kubelet has finished it
    removed = c.drainer.drain("a", node, "d")
    assert removed.status is ActionStatus.DONE and "still terminating" not in removed.detail
    assert c.gke.calls("POST", "deleteInstances") == 1

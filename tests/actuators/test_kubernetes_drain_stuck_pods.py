"""A drain ends even when a live kubelet never finishes a pod it evicted.

A kubelet that is alive (its node ``Ready`` True, or False: it still posts the node's status, so the node is never
marked Unknown) may still never finish a pod: a container stuck in the kernel (in the GPU driver after an Xid error,
on a hung NFS mount) that SIGKILL does not end, or a container runtime that is down. The drain waited for such a pod
past its timeout for ever: the node cordoned and paid for, counted in the pool, its drain STARTED a week later. A
pod this drainer has seen terminating, by its own clock, for its grace period and ``STUCK_AFTER`` more is stuck: the
kubelet kills its containers at the grace period's end. At the drain's timeout, a node left only with such pods is
removed, the detail naming them; one still within that wait is waited for (a checkpoint that finishes within its
grace period is never cut short: ``test_kubernetes_drain_clock_skew``). Against the fake Kubernetes and GKE APIs,
with the real clients; the API server's clock runs three minutes behind the agent's, so a pod's
``deletionTimestamp`` read by the agent's clock says nothing of when it is stuck."""

from __future__ import annotations

from datetime import timedelta

import pytest

from actuators.pod_rules import STUCK_AFTER
from models import ActionStatus
from tests.actuators import kubernetes_drain_rig as rig
from tests.actuators.kubernetes_drain_rig import Cluster
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.kube_api.evictions import DEFAULT_TERMINATION_GRACE_SECONDS

cluster = rig.cluster  # the fake Kubernetes and GKE APIs, a pool "a" of three nodes, each running a web pod

SKEW = timedelta(minutes=3)  # the agent's clock runs this far ahead of the API server's
TIMEOUT = timedelta(minutes=15)  # the rig's drain timeout
# A live kubelet that reports its node not ready: its container runtime is down (tests/fakes/REFERENCE.md).
NOT_READY = {
    "type": "Ready",
    "status": "False",
    "reason": "KubeletNotReady",
    "message": "container runtime is down: PLEG is not healthy",
}


def _not_ready(kube: FakeKubeApi, name: str) -> None:
    node = kube.get("nodes", name)
    assert node is not None
    node["status"]["conditions"] = [NOT_READY]
    kube.put("nodes", node)


def _ready(kube: FakeKubeApi, name: str) -> str:
    node = kube.get("nodes", name)
    assert node is not None
    return str(next(c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready"))


@pytest.mark.parametrize("ready", [True, False], ids=["Ready", "Ready False"])
@pytest.mark.parametrize(
    "grace", [timedelta(seconds=DEFAULT_TERMINATION_GRACE_SECONDS), timedelta(minutes=20)], ids=["30s", "20m"]
)
def test_a_drain_whose_pod_a_live_kubelet_never_finishes_removes_the_node_once_the_pod_is_stuck(
    cluster: Cluster, ready: bool, grace: timedelta
) -> None:
    c = cluster
    node = c.nodes[2]
    c.kube.clock = lambda: c.clock.now() - SKEW
    if not ready:
        _not_ready(c.kube, node)
    web = c.kube.get("pods", f"web-{node}", "default")
    assert web is not None
    web["spec"]["terminationGracePeriodSeconds"] = int(grace.total_seconds())
    c.kube.put("pods", web)
    c.kube.hang_pods(node)  # its kubelet posts the node's status but never finishes the pod
    start = c.clock.now()
    first = c.drainer.drain("a", node, "d")  # evicts the web pod, seen terminating from now
    assert first.status is ActionStatus.STARTED and "to finish terminating" in first.detail

    ends = max(TIMEOUT, grace + STUCK_AFTER)  # the drain's timeout, or the pod stuck, whichever comes last
    for before in (TIMEOUT - timedelta(seconds=1), ends - timedelta(seconds=1)):
        c.clock.advance(start + before - c.clock.now())
        waiting = c.drainer.drain("a", node, "d")
        assert waiting.status is ActionStatus.STARTED, before
        assert f"[('default', 'web-{node}')] on {node} to finish terminating" in waiting.detail
        assert c.gke.calls("POST", "deleteInstances") == 0
        assert _ready(c.kube, node) == ("True" if ready else "False")  # never Unknown: its kubelet is alive

    c.clock.advance(start + ends - c.clock.now())
    assert c.kube.get("pods", f"web-{node}", "default") is not None  # still terminating: nothing finished it
    removed = c.drainer.drain("a", node, "d")
    assert removed.status is ActionStatus.DONE
    assert f"removed with [('default', 'web-{node}')] still terminating after 0:15:00, stuck terminating past" in (
        removed.detail
    )
    assert "their kubelet did not finish them" in removed.detail
    assert c.gke.calls("POST", "deleteInstances") == 1
    assert node not in [name for name, action in c.instances() if action == "NONE"]
    assert c.drainer.drain("a", node, "d") == removed  # settled: the key answers the same again

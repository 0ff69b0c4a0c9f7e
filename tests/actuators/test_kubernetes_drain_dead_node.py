"""A node whose kubelet is gone is not kept for ever by the pods it can no longer finish.

When a GPU node dies, the node lifecycle controller's taint eviction deletes its pods gracefully, but no kubelet is
left to finish them: they stay listed, Terminating, until PodGC removes them, which it does only once the node is
deleted or tainted out-of-service. Counted as accelerator work, such a pod kept its node busy: never idle, never
drained, paid for as long as no person removed it. A pod the agent has seen Terminating on a node the node lifecycle
controller marked Unknown (its kubelet silent for the node monitor's grace period) for the pod's grace period and a
minute, by its own clock, is not work now, so the node reads idle and its drain removes it at the drain's timeout
(``test_kubernetes_drain_shutdown``); a pod seen so for less keeps its node busy, and so does any on a node whose
kubelet is alive (``test_kubernetes_drain_clock_skew``). A broken TPU slice whose job's pod is stuck so is deleted as
a failed slice. Against the fake Kubernetes and GKE APIs, with the real clients."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client as k8s

from actuators.gke_tpu_slices import GkeTpuSliceActuator
from actuators.pod_rules import ABANDONED_AFTER
from actuators.slice_drain import KubernetesSliceDrainer
from kube import KubernetesApi
from models import ActionStatus
from models.clock import SimulatedClock
from tests.actuators import kubernetes_drain_rig as rig
from tests.actuators.kubernetes_drain_rig import JOB, Cluster, _pod
from tests.actuators.test_gke_broken_slices import _lose_hosts
from tests.actuators.test_gke_slice_errors import Rig
from tests.contract.harnesses import CLUSTER, POOL, SLICES
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.kube_api.evictions import NODE_MONITOR_GRACE_PERIOD

cluster = rig.cluster  # the fake Kubernetes and GKE APIs, a pool "a" of three nodes, each running a web pod

GRACE = timedelta(seconds=120)  # the training job's checkpoint on SIGTERM


def test_a_dead_node_whose_gpu_pod_is_stuck_terminating_is_idle_once_its_grace_period_is_over(
    cluster: Cluster,
) -> None:
    c = cluster
    dead = c.nodes[2]
    c.kube.put("pods", _pod("train-0", dead, grace=int(GRACE.total_seconds()), accelerators=8, **JOB))
    c.kube.stop_kubelet(dead)
    c.api.pods.evict("train-0", "default")  # the taint eviction: the same graceful delete

    c.clock.advance(GRACE / 2)  # Unknown since 50 s: first seen left behind now, by a drainer that looks every tick
    ready = c.kube.get("nodes", dead)["status"]["conditions"]  # type: ignore[index]
    assert [(r["type"], r["status"], r["reason"]) for r in ready] == [("Ready", "Unknown", "NodeStatusUnknown")]
    assert c.drainer.idle_nodes("a", timedelta(0)) == c.nodes[:2]  # within its grace period: it may be saving work
    assert c.drainer.pool_nodes("a")[-1] == dead

    c.clock.advance(GRACE)  # a minute past its deadline, but seen left behind for its grace period only: still busy
    assert c.drainer.idle_nodes("a", timedelta(0)) == c.nodes[:2]

    c.clock.advance(ABANDONED_AFTER)  # seen so for its grace period and a minute: nothing runs there any more
    assert c.kube.get("pods", "train-0", "default") is not None
    assert c.drainer.idle_nodes("a", timedelta(0)) == c.nodes  # idle from now, as the others have been since before
    c.clock.advance(timedelta(minutes=10))
    assert dead in c.drainer.idle_nodes("a", timedelta(minutes=10))

    key = f"r1/drain/{dead}"
    first = c.drainer.drain("a", dead, key)  # an idle node's drain, not forced
    assert first.status is ActionStatus.STARTED and "to finish terminating" in first.detail
    c.clock.advance(timedelta(minutes=15))
    removed = c.drainer.drain("a", dead, key)
    assert removed.status is ActionStatus.DONE
    assert "('default', 'train-0')" in removed.detail and "still terminating after 0:15:00" in removed.detail
    assert c.gke.calls("POST", "deleteInstances") == 1
    assert c.kube.get("pods", "train-0", "default") is not None  # never deleted by force


@pytest.fixture
def clocked_slices(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> tuple[Rig, SimulatedClock]:
    """The slice rig of ``test_gke_slice_errors`` (two running 4-host slices of group v5e), with its clock."""
    clock = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    kube_api.clock = clock.now
    clients = google_clients(gke_api.url)
    actuator = GkeTpuSliceActuator(clients.gke, CLUSTER, [SLICES], clock, migs=clients.migs)
    slices = Rig(kube_api, gke_api, actuator, KubernetesSliceDrainer(KubernetesApi(kube_client), clock, actuator))
    for i in range(2):
        name = f"v5e-{i}"
        gke_api.add_pool(name, nodes=SLICES.hosts_per_slice)
        for host in slices.hosts(name):
            kube_api.put("nodes", objs.node(host, name, accelerators=4, resource=objs.TPU_RESOURCE))
    return slices, clock


def test_an_error_slice_whose_job_pod_is_stuck_terminating_on_a_dead_host(
    clocked_slices: tuple[Rig, SimulatedClock],
) -> None:
    """The slice rig's clock reads 2024-05-01T00:00:00Z; the host's kubelet stopped an hour ago (its node is
    Unknown) and the pod was deleted an hour ago, but by the API server's clock, which the agent does not trust: the
    slice is broken (at work) until the agent has seen the pod left behind for its grace period and a minute."""
    slices, clock = clocked_slices
    host = slices.hosts("v5e-1")[-1]
    train = objs.pod(f"train-{host}", host, accelerators=4, resource=objs.TPU_RESOURCE, **JOB)
    train["metadata"].update(
        deletionTimestamp="2024-04-30T23:00:00Z", deletionGracePeriodSeconds=int(GRACE.total_seconds())
    )
    slices.kube.put("pods", train)
    slices.kube.stop_kubelet(host, since=datetime(2024, 4, 30, 22, 59, tzinfo=UTC))
    _lose_hosts(slices, "v5e-1", keep=1)
    slices.gke.report_error("v5e-1", conditions=())

    for wait in (timedelta(0), GRACE + ABANDONED_AFTER - timedelta(seconds=1)):
        clock.advance(wait)
        (state,) = slices.actuator.list_pools()
        assert [name for name, _ in state.broken_units] == ["v5e-1"]
        assert state.failed_units == 0
    clock.advance(timedelta(seconds=1))
    (state,) = slices.actuator.list_pools()
    assert (state.broken_units, state.failed_units) == ((), 1)
    slices.actuator.resize(POOL, state.target_units, "clear-failed")
    assert slices.gke.pools["v5e-1"].status == "STOPPING"


def test_a_kubelet_back_before_its_pod_is_abandoned_starts_the_wait_again(cluster: Cluster) -> None:
    """The node's kubelet is silent, comes back for half a minute (its node Ready again), then goes silent again:
    the pod is seen left behind from then on, not from when it was first seen so."""
    c = cluster
    node = c.nodes[2]
    c.kube.put("pods", _pod("train-0", node, grace=int(GRACE.total_seconds()), accelerators=8, **JOB))
    c.kube.stop_kubelet(node, since=c.clock.now() - NODE_MONITOR_GRACE_PERIOD)  # Unknown from now
    c.api.pods.evict("train-0", "default")
    assert c.drainer.idle_nodes("a", timedelta(0)) == c.nodes[:2]  # first seen left behind

    c.clock.advance(timedelta(minutes=1))
    c.kube.start_kubelet(node)  # back: Ready, and it finishes the pod at its deadline
    assert c.drainer.idle_nodes("a", timedelta(0)) == c.nodes[:2]
    c.clock.advance(timedelta(seconds=30))
    c.kube.stop_kubelet(node, since=c.clock.now() - NODE_MONITOR_GRACE_PERIOD)  # silent again, before the deadline
    assert c.drainer.idle_nodes("a", timedelta(0)) == c.nodes[:2]

    c.clock.advance(timedelta(seconds=90))  # its grace period and a minute since first seen: not since seen again
    assert c.kube.get("pods", "train-0", "default") is not None
    assert c.drainer.idle_nodes("a", timedelta(0)) == c.nodes[:2]
    c.clock.advance(timedelta(seconds=90))  # since seen again
    assert c.drainer.idle_nodes("a", timedelta(0)) == c.nodes

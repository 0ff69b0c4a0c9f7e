"""A node whose kubelet is gone is not kept for ever by the pods it can no longer finish.

When a GPU node dies, the node lifecycle controller's taint eviction deletes its pods gracefully, but no kubelet is
left to finish them: they stay listed, Terminating, until PodGC removes them, which it does only once the node is
deleted or tainted out-of-service. Counted as accelerator work, such a pod kept its node busy: never idle, never
drained, paid for as long as no person removed it. A pod a minute past its grace period on a node the node lifecycle
controller marked Unknown (its kubelet silent for the node monitor's grace period) is not work now, so the node reads
idle and its drain removes it at the drain's timeout (``test_kubernetes_drain_shutdown``); a pod still within its
grace period (checkpointing), or within that minute, keeps its node busy (a Ready node's pods:
``test_kubernetes_drain_clock_skew``). A broken TPU slice whose job's pod is stuck so is deleted as a failed slice.
Against the fake Kubernetes and GKE APIs, with the real clients."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from actuators.pod_rules import ABANDONED_AFTER
from models import ActionStatus
from tests.actuators import kubernetes_drain_rig as rig
from tests.actuators.kubernetes_drain_rig import JOB, Cluster, _pod
from tests.actuators.test_gke_broken_slices import _lose_hosts
from tests.actuators.test_gke_slice_errors import Rig
from tests.actuators.test_gke_slice_errors import rig as slice_rig  # noqa: F401  (the fixture)
from tests.contract.harnesses import POOL
from tests.fakes import kube_objects as objs

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

    c.clock.advance(GRACE / 2)  # within its grace period: it may be saving its work, so the node is busy
    assert c.drainer.idle_nodes("a", timedelta(0)) == c.nodes[:2]
    assert c.drainer.pool_nodes("a")[-1] == dead

    c.clock.advance(GRACE / 2)  # past it, by a clock that may run ahead of the API server's: still busy
    ready = c.kube.get("nodes", dead)["status"]["conditions"]  # type: ignore[index]
    assert [(r["type"], r["status"], r["reason"]) for r in ready] == [("Ready", "Unknown", "NodeStatusUnknown")]
    assert c.drainer.idle_nodes("a", timedelta(0)) == c.nodes[:2]

    c.clock.advance(ABANDONED_AFTER)  # a minute past it: nothing runs there any more, though the pod is still listed
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


def _stuck(pod: dict[str, Any], deleted_at: str, grace: timedelta) -> dict[str, Any]:
    pod["metadata"].update(deletionTimestamp=deleted_at, deletionGracePeriodSeconds=int(grace.total_seconds()))
    return pod


@pytest.mark.parametrize(
    ("deleted_at", "broken"),
    [("2024-04-30T23:00:00Z", False), ("2024-05-01T00:01:00Z", True)],
    ids=["past its grace period: a failed slice, deleted", "within it: still broken, kept"],
)
def test_an_error_slice_whose_job_pod_is_stuck_terminating_on_a_dead_host(
    slice_rig: Rig,  # noqa: F811
    deleted_at: str,
    broken: bool,
) -> None:
    """The slice rig's clock reads 2024-05-01T00:00:00Z; the host's kubelet stopped an hour ago (its node is
    Unknown); the pod was deleted an hour ago, or is still checkpointing for a minute."""
    slices = slice_rig
    host = slices.hosts("v5e-1")[-1]
    train = objs.pod(f"train-{host}", host, accelerators=4, resource=objs.TPU_RESOURCE, **JOB)
    slices.kube.put("pods", _stuck(train, deleted_at, GRACE))
    slices.kube.stop_kubelet(host, since=datetime(2024, 4, 30, 22, 59, tzinfo=UTC))
    _lose_hosts(slices, "v5e-1", keep=1)
    slices.gke.report_error("v5e-1", conditions=())

    (state,) = slices.actuator.list_pools()
    assert [name for name, _ in state.broken_units] == (["v5e-1"] if broken else [])
    assert state.failed_units == (0 if broken else 1)
    slices.actuator.resize(POOL, state.target_units, "clear-failed")
    assert slices.gke.pools["v5e-1"].status == ("ERROR" if broken else "STOPPING")

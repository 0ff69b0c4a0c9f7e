"""KubernetesNodeDrainer on the fake Kubernetes API: evicted pods are waited for until they have shut down (their
grace period, a pod already terminating, a kubelet that never finishes them), and only then is the node removed."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from models import (
    ActionStatus,
)
from tests.actuators import kubernetes_drain_rig as rig
from tests.actuators.kubernetes_drain_rig import JOB, Cluster, _cordoned, _evictions, _pod

cluster = rig.cluster  # the fake Kubernetes and GKE APIs, a pool "a" of three nodes


def test_a_node_is_removed_only_once_its_evicted_pods_have_shut_down(cluster: Cluster) -> None:
    node = cluster.nodes[1]
    cluster.kube.put("pods", _pod("train", node, grace=120, accelerators=8, owner_kind="Job"))  # checkpoints

    first = cluster.drainer.drain("a", node, "d", forced=True)  # a busy node: a forced release's drain
    assert first.status is ActionStatus.STARTED
    assert "('default', 'train')" in first.detail and "to finish terminating" in first.detail
    terminating = cluster.kube.get("pods", "train", "default")
    assert terminating is not None  # SIGTERM sent: the pod saves its work while the node stays
    assert terminating["metadata"]["deletionGracePeriodSeconds"] == 120
    assert cluster.kube.get("pods", f"web-{node}", "default") is not None  # 30 s by default
    assert cluster.gke.calls("POST", "deleteInstances") == 0

    cluster.clock.advance(timedelta(seconds=60))
    waiting = cluster.drainer.drain("a", node, "d")
    assert waiting.status is ActionStatus.STARTED
    assert cluster.kube.get("pods", f"web-{node}", "default") is None
    assert (_evictions(cluster, "train"), _evictions(cluster, f"web-{node}")) == (1, 1)  # waited for, not re-evicted
    assert cluster.gke.calls("POST", "deleteInstances") == 0 and _cordoned(cluster, node)

    cluster.clock.advance(timedelta(seconds=60))
    done = cluster.drainer.drain("a", node, "d")
    assert done.status is ActionStatus.DONE
    assert done.detail.startswith(f"node {node} drained")
    assert cluster.gke.calls("POST", "deleteInstances") == 1
    assert cluster.kube.calls("delete", "pods") == 0


def test_a_pod_already_terminating_is_waited_for_and_never_evicted(cluster: Cluster) -> None:
    node = cluster.nodes[0]
    leaving = _pod("leaving", node, grace=300, annotations={"karpenter.sh/do-not-disrupt": "true"})
    leaving["metadata"].update(deletionTimestamp="2024-05-01T00:05:00Z", deletionGracePeriodSeconds=300)
    cluster.kube.put("pods", leaving)  # deleted by someone else before the drain: going anyway, so no blocker

    result = cluster.drainer.drain("a", node, "d")
    assert result.status is ActionStatus.STARTED
    assert _evictions(cluster, "leaving") == 0
    cluster.clock.advance(timedelta(minutes=5))
    assert cluster.drainer.drain("a", node, "d").status is ActionStatus.DONE
    assert _evictions(cluster, "leaving") == 0


def test_pods_a_lost_kubelet_never_finishes_do_not_hold_the_node_past_the_timeout(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    node = cluster.nodes[2]
    cluster.kube.stop_kubelet(node, since=cluster.clock.now() - timedelta(minutes=1))  # its node Unknown already
    assert cluster.drainer.drain("a", node, "d").status is ActionStatus.STARTED
    cluster.clock.advance(timedelta(minutes=14))
    still = cluster.drainer.drain("a", node, "d")
    assert still.status is ActionStatus.STARTED and "to finish terminating" in still.detail
    assert cluster.gke.calls("POST", "deleteInstances") == 0

    caplog.set_level(logging.WARNING, logger="actuators.kubernetes_drain")
    cluster.clock.advance(timedelta(minutes=1))
    removed = cluster.drainer.drain("a", node, "d")
    assert removed.status is ActionStatus.DONE
    assert f"[('default', 'web-{node}')] still terminating after 0:15:00" in removed.detail
    assert cluster.gke.calls("POST", "deleteInstances") == 1
    assert cluster.kube.get("pods", f"web-{node}", "default") is not None  # never deleted by force
    assert any("still terminating" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


def test_a_pod_within_its_grace_period_is_waited_for_past_the_timeout(cluster: Cluster) -> None:
    node = cluster.nodes[2]
    cluster.kube.put("pods", _pod("train", node, grace=20 * 60, accelerators=8, **JOB))  # a long checkpoint
    assert cluster.drainer.drain("a", node, "d", forced=True).status is ActionStatus.STARTED
    cluster.clock.advance(timedelta(minutes=15))
    past_timeout = cluster.drainer.drain("a", node, "d")
    assert past_timeout.status is ActionStatus.STARTED  # neither cut off nor uncordoned
    assert _cordoned(cluster, node) and cluster.gke.calls("POST", "deleteInstances") == 0
    cluster.clock.advance(timedelta(minutes=5))
    assert cluster.drainer.drain("a", node, "d").status is ActionStatus.DONE

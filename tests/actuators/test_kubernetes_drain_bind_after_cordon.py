"""An empty node is not removed at the drain step that cordons it: the scheduler binds a pod it placed before the
cordon without checking ``spec.unschedulable`` (a volume to provision first delays the bind by seconds), so such a
pod would land on a node being deleted. On the fake Kubernetes and GKE APIs with the real client: the first step
answers STARTED, and the next one removes the node only if its pods, read again, are still none to move; a pod bound
meanwhile is accelerator work (the drain is rejected, the node uncordoned) or is evicted like any other."""

from __future__ import annotations

from datetime import timedelta

from models import ActionStatus
from tests.actuators import kubernetes_drain_rig
from tests.actuators.kubernetes_drain_rig import JOB, Cluster, _cordoned
from tests.fakes import kube_objects as objs

cluster = kubernetes_drain_rig.cluster  # the fake Kubernetes and GKE APIs, a pool "a" of three nodes


def _empty(c: Cluster, node: str) -> None:
    c.kube.delete("pods", f"web-{node}", "default")  # its DaemonSet pod alone is left


def test_an_empty_node_is_cordoned_first_and_removed_at_the_next_step(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    _empty(c, node)

    first = c.drainer.drain("a", node, "r1/drain/" + node)

    assert first.status is ActionStatus.STARTED
    assert "cordoned and empty" in first.detail
    assert _cordoned(c, node)
    assert c.gke.calls("POST", "deleteInstances") == 0
    c.clock.advance(timedelta(minutes=1))
    assert c.drainer.drain("a", node, "r1/drain/" + node).status is ActionStatus.DONE
    assert c.gke.calls("POST", "deleteInstances") == 1
    assert dict(c.instances())[node] == "DELETING"


def test_a_training_pod_bound_just_after_the_cordon_rejects_the_drain_and_the_node_stays(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    _empty(c, node)
    assert c.drainer.drain("a", node, "r1/drain/" + node).status is ActionStatus.STARTED
    c.kube.put("pods", objs.pod("train-0", node, accelerators=8, **JOB))  # placed before the cordon, bound after

    c.clock.advance(timedelta(minutes=1))
    result = c.drainer.drain("a", node, "r1/drain/" + node)

    assert result.status is ActionStatus.REJECTED
    assert "train-0" in result.detail
    assert c.gke.calls("POST", "deleteInstances") == 0
    assert not _cordoned(c, node)
    assert c.kube.get("pods", "train-0", "default") is not None


def test_a_web_pod_bound_just_after_the_cordon_is_evicted_before_the_node_goes(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    _empty(c, node)
    assert c.drainer.drain("a", node, "r1/drain/" + node).status is ActionStatus.STARTED
    c.kube.put("pods", objs.pod("web-late", node, labels={"app": "web"}, owner_kind="ReplicaSet"))

    c.clock.advance(timedelta(minutes=1))
    assert c.drainer.drain("a", node, "r1/drain/" + node).status is ActionStatus.STARTED  # evicted, terminating
    assert c.gke.calls("POST", "deleteInstances") == 0
    c.clock.advance(timedelta(minutes=1))
    assert c.drainer.drain("a", node, "r1/drain/" + node).status is ActionStatus.DONE
    assert c.kube.get("pods", "web-late", "default") is None
    assert c.gke.calls("POST", "deleteInstances") == 1

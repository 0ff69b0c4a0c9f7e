"""Which units a drainer lists as left cordoned while the cloud deleted them (``leadtime.io/drain-left-deleting``),
on the fake Kubernetes and GKE APIs: never one with a drain of ours in progress. The leader ends the drain that left
such a unit once the cloud keeps it, with that drain's key (``NodeDrainer.cancel``: the unit uncordoned, every drain
mark taken off); listed while a later drain of ours is on it (its mark left beside the later drain's, as a drain's
cordon left it before it took the mark off), the later drain was undone with it."""

from __future__ import annotations

from actuators.drain_mark_names import DRAIN_ANNOTATION, LEFT_DELETING_ANNOTATION
from models import ActionStatus
from tests.actuators import kubernetes_drain_rig
from tests.actuators.kubernetes_drain_rig import Cluster, _cordoned

cluster = kubernetes_drain_rig.cluster  # the fake Kubernetes and GKE APIs, a pool "a" of three nodes


def _mark(c: Cluster, node: str, annotations: dict[str, str]) -> None:
    """``node`` cordoned, with these annotations."""
    found = c.kube.get("nodes", node)
    assert found is not None
    found["spec"]["unschedulable"] = True
    found["metadata"].setdefault("annotations", {}).update(annotations)
    c.kube.put("nodes", found)


def _annotations(c: Cluster, node: str) -> dict[str, str]:
    found = c.kube.get("nodes", node) or {}
    annotations: dict[str, str] = found.get("metadata", {}).get("annotations") or {}
    return annotations


def test_a_unit_with_a_drain_of_ours_in_progress_is_never_listed_as_left_deleting(cluster: Cluster) -> None:
    drained, left = cluster.nodes[0], cluster.nodes[1]
    later, earlier = f"a@t1->2/drain/{drained}", f"a@t0->2/drain/{drained}"
    _mark(cluster, drained, {DRAIN_ANNOTATION: later, LEFT_DELETING_ANNOTATION: earlier})  # both marks on it
    _mark(cluster, left, {LEFT_DELETING_ANNOTATION: f"a@t0->1/drain/{left}"})

    assert cluster.drainer.draining_nodes("a") == {drained: later}
    assert cluster.drainer.left_deleting("a") == {left: f"a@t0->1/drain/{left}"}  # the drained unit listed before
    assert _cordoned(cluster, drained) and _annotations(cluster, drained)[DRAIN_ANNOTATION] == later


def test_a_drain_that_cordons_a_unit_takes_the_left_deleting_mark_off(cluster: Cluster) -> None:
    node = cluster.nodes[2]
    found = cluster.kube.get("nodes", node)
    assert found is not None
    found["metadata"].setdefault("annotations", {})[LEFT_DELETING_ANNOTATION] = f"a@t0->2/drain/{node}"
    cluster.kube.put("nodes", found)  # uncordoned by a person; the mark's take-off not done yet
    cluster.kube.fail_next(1, 500, verb="patch", resource="nodes")  # the drain's read of the pool's drains: it fails

    key = f"a@t1->2/drain/{node}"
    assert cluster.drainer.drain("a", node, key, forced=True).status is ActionStatus.STARTED
    assert _cordoned(cluster, node)
    marks = _annotations(cluster, node)
    assert marks[DRAIN_ANNOTATION] == key
    assert LEFT_DELETING_ANNOTATION not in marks  # left beside the drain's key before
    cluster.drainer.draining_nodes("a")
    assert cluster.drainer.left_deleting("a") == {}

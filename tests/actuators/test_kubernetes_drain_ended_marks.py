"""The marks a drain leaves on its nodes after a person ends it with ``kubectl uncordon`` (which patches
``spec.unschedulable`` alone, leaving our annotations): on the fake Kubernetes and GKE APIs with the real client, a
later cordon of the node by anyone else is not taken over as our drain: an idle node is not emptied and deleted, a
busy one is not uncordoned, and an old forced drain's mark does not evict a running training Job. The marks are
taken off once read on a schedulable node (by a dry run too: tests/actuators/test_dry_run_clears_ended_drain_marks.py);
a replica that may not write remembers the drain as ended instead, and writes nothing."""

from __future__ import annotations

from datetime import timedelta

from actuators.drain_mark_names import DRAIN_ANNOTATION, FORCED_ANNOTATION
from agent.drains import NodeDrains
from models import ActionStatus, PoolState
from tests.actuators import kubernetes_drain_rig
from tests.actuators.kubernetes_drain_rig import Cluster, _cordoned
from tests.fakes import kube_objects as objs

cluster = kubernetes_drain_rig.cluster  # the fake Kubernetes and GKE APIs, a pool "a" of three nodes
WINDOW = timedelta(minutes=10)


def _kubectl_cordon(c: Cluster, node: str, unschedulable: bool) -> None:
    """``kubectl cordon`` / ``kubectl uncordon``: a patch of ``spec.unschedulable`` alone."""
    c.api.nodes.patch(node, {"spec": {"unschedulable": unschedulable}})


def _marks(c: Cluster, node: str) -> dict[str, str]:
    found = c.kube.get("nodes", node)
    assert found is not None
    annotations = found["metadata"].get("annotations") or {}
    return {k: v for k, v in annotations.items() if k in (DRAIN_ANNOTATION, FORCED_ANNOTATION)}


def _pools(c: Cluster) -> dict[str, PoolState]:
    return {s.pool_id: s for s in c.actuator.list_pools()}


def _held_by_a_budget(c: Cluster, app: str) -> None:
    c.kube.put("poddisruptionbudgets", objs.pdb(app, {"app": app}, min_available=3, expected_pods=3), group="policy")


def _ticks(c: Cluster, drains: NodeDrains, count: int) -> list[tuple[ActionStatus, str]]:
    results = []
    for _ in range(count):
        drains.observe(_pools(c), c.clock.now())
        results += [(r.status, r.detail) for r in drains.continue_pending(c.clock.now()).results]
        c.clock.advance(timedelta(seconds=31))
    return results


def test_an_idle_node_a_person_cordons_after_uncordoning_our_drain_is_not_taken_over(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    _held_by_a_budget(c, "web")
    assert c.drainer.drain("a", node, "rel-1/drain/" + node).status is ActionStatus.STARTED
    _kubectl_cordon(c, node, False)  # a person ends the drain
    drains = NodeDrains({"a": c.drainer}, WINDOW)
    drains.observe(_pools(c), c.clock.now())
    assert drains.pending == ()
    assert _marks(c, node) == {}  # the ended drain's marks are taken off when read

    c.kube.delete("poddisruptionbudgets", "web", "default", group="policy")
    c.clock.advance(timedelta(hours=3))
    _kubectl_cordon(c, node, True)  # later, a person cordons the node to look at a GPU
    assert _ticks(c, drains, 2) == []
    assert drains.pending == ()
    assert c.kube.get("pods", f"web-{node}", "default") is not None
    assert c.gke.calls("POST", "deleteInstances") == 0
    assert _cordoned(c, node)  # the person's cordon stays


def test_a_busy_node_a_person_cordons_after_uncordoning_our_drain_stays_cordoned(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    _held_by_a_budget(c, "web")
    assert c.drainer.drain("a", node, "rel-1/drain/" + node).status is ActionStatus.STARTED
    _kubectl_cordon(c, node, False)
    drains = NodeDrains({"a": c.drainer}, WINDOW)
    drains.observe(_pools(c), c.clock.now())
    c.kube.put("pods", objs.pod("train-0", node, accelerators=8, owner_kind="Job"))
    c.clock.advance(timedelta(hours=3))
    _kubectl_cordon(c, node, True)  # a person takes the node out of service (a bad GPU)
    assert _ticks(c, drains, 1) == []
    assert _cordoned(c, node)


def test_an_old_forced_mark_does_not_evict_a_training_job_on_a_node_cordoned_days_later(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    c.kube.put("pods", objs.pod("train-0", node, accelerators=8, owner_kind="Job", labels={"app": "train"}))
    c.kube.put("poddisruptionbudgets", objs.pdb("train", {"app": "train"}, min_available=1), group="policy")
    key = "hard-stop-1/drain/" + node
    assert c.drainer.drain("a", node, key, forced=True).status is ActionStatus.STARTED
    assert _marks(c, node) == {DRAIN_ANNOTATION: key, FORCED_ANNOTATION: key}
    _kubectl_cordon(c, node, False)  # a person stops the hard stop on the team's training node
    drains = NodeDrains({"a": c.drainer}, WINDOW)
    drains.observe(_pools(c), c.clock.now())
    assert _marks(c, node) == {}

    c.kube.delete("poddisruptionbudgets", "train", "default", group="policy")
    c.clock.advance(timedelta(days=2))
    _kubectl_cordon(c, node, True)  # days later, someone cordons it for maintenance, the job still running
    assert _ticks(c, drains, 2) == []
    assert c.kube.get("pods", "train-0", "default") is not None
    assert c.gke.calls("POST", "deleteInstances") == 0
    assert _cordoned(c, node)


def test_a_replica_that_may_not_write_remembers_the_drain_as_ended_and_leaves_the_marks(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    _held_by_a_budget(c, "web")
    key = "rel-1/drain/" + node
    assert c.drainer.drain("a", node, key).status is ActionStatus.STARTED
    c.drainer.guard_writes(lambda: False)  # no longer leading
    _kubectl_cordon(c, node, False)
    patches = c.kube.calls("patch", "nodes")
    assert c.drainer.draining_nodes("a") == {}
    assert c.kube.calls("patch", "nodes") == patches
    assert _marks(c, node) == {DRAIN_ANNOTATION: key}

    _kubectl_cordon(c, node, True)  # someone else's cordon, with the ended drain's marks still on the node
    assert c.drainer.draining_nodes("a") == {}
    assert c.drainer.unforced_drains("a") == set()

    c.drainer.guard_writes(lambda: True)  # leading again: the ended drain's marks go, the person's cordon stays
    assert c.drainer.draining_nodes("a") == {}
    assert _marks(c, node) == {}
    assert _cordoned(c, node)


def test_a_drain_in_progress_keeps_its_marks(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    _held_by_a_budget(c, "web")
    key = "rel-1/drain/" + node
    assert c.drainer.drain("a", node, key).status is ActionStatus.STARTED
    assert c.drainer.draining_nodes("a") == {node: key}
    assert _marks(c, node) == {DRAIN_ANNOTATION: key}
    assert c.drainer.unforced_drains("a") == {node}

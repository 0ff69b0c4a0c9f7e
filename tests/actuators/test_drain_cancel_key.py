"""Ending a drain (``KubernetesNodeDrainer.cancel``) checks the key it is given against the drain mark its node
carries: a caller holding the key of a drain that ended since, after which another replica started a new drain of the
same node, is refused (the new drain goes on, its node cordoned and marked) instead of ending the new drain. A node
without a drain mark, or one a person uncordoned (the marks of an ended drain), is ended as before. On the fake
Kubernetes and GKE APIs with the real client, two drainers standing for two replicas."""

from __future__ import annotations

from datetime import timedelta

from actuators.drain_mark_names import DRAIN_ANNOTATION, LEFT_DELETING_ANNOTATION
from actuators.kubernetes_drain import KubernetesNodeDrainer
from agent.drains import NodeDrains
from models import ActionStatus, PoolState, Resize
from models.plan import drain_key
from tests.actuators import kubernetes_drain_rig
from tests.actuators.kubernetes_drain_rig import Cluster, _cordoned
from tests.fakes import kube_objects as objs

cluster = kubernetes_drain_rig.cluster  # the fake Kubernetes and GKE APIs, a pool "a" of three nodes
OLD, NEW = "rel-1/drain/old", "rel-2/drain/new"


def _annotations(c: Cluster, node: str) -> dict[str, str]:
    found = c.kube.get("nodes", node)
    assert found is not None
    return dict(found["metadata"].get("annotations") or {})


def _other_replica(c: Cluster) -> KubernetesNodeDrainer:
    """A second drainer over the same cluster and pool: another replica of the agent, which leads after a change."""
    return KubernetesNodeDrainer(c.api, c.clock, {"a": "a100"}, c.actuator, timedelta(minutes=15))


def _held_by_a_budget(c: Cluster) -> None:
    """The web pods may not be evicted now: a drain of their node stays in progress, cordoned and marked."""
    budget = objs.pdb("web", {"app": "web"}, min_available=3, expected_pods=3)
    c.kube.put("poddisruptionbudgets", budget, group="policy")


def _pools(c: Cluster) -> dict[str, PoolState]:
    return {s.pool_id: s for s in c.actuator.list_pools()}


def test_an_old_key_does_not_end_the_drain_another_replica_started_since(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    _held_by_a_budget(c)
    assert c.drainer.drain("a", node, OLD).status is ActionStatus.STARTED
    c.api.nodes.patch(node, {"spec": {"unschedulable": False}})  # a person ends that drain (kubectl uncordon)
    other = _other_replica(c)
    assert other.draining_nodes("a") == {}  # the ended drain's marks are taken off when read
    assert other.drain("a", node, NEW, forced=True).status is ActionStatus.STARTED  # a budget's hard stop

    refused = c.drainer.cancel("a", node, OLD)

    assert refused.status is ActionStatus.REJECTED, refused
    assert refused.detail == (
        f"not ended: node {node} carries the mark of another drain ({DRAIN_ANNOTATION}={NEW} on {node}), not of the "
        f"drain with key {OLD}, which no longer holds it; that drain goes on (to end it by hand: kubectl uncordon "
        f"{node})"
    )
    assert _cordoned(c, node) and _annotations(c, node)[DRAIN_ANNOTATION] == NEW
    assert other.draining_nodes("a") == {node: NEW}
    assert other.drain("a", node, NEW, forced=True).status is ActionStatus.STARTED  # it goes on
    ended = other.cancel("a", node, NEW)  # its own key ends it
    assert ended.status is ActionStatus.DONE, ended
    assert not _cordoned(c, node) and DRAIN_ANNOTATION not in _annotations(c, node)


def test_an_old_key_of_a_node_left_deleting_does_not_end_a_drain_of_another_key(cluster: Cluster) -> None:
    """The mark a drain leaves on a node the cloud still deleted when it ended names that drain: only its key ends
    it (the leader watching the node uncordons it once the cloud keeps it)."""
    c = cluster
    node = c.nodes[0]
    left = {"spec": {"unschedulable": True}, "metadata": {"annotations": {LEFT_DELETING_ANNOTATION: NEW}}}
    c.api.nodes.patch(node, left)

    refused = c.drainer.cancel("a", node, OLD)
    assert refused.status is ActionStatus.REJECTED, refused
    assert f"{LEFT_DELETING_ANNOTATION}={NEW} on {node}" in refused.detail
    assert _cordoned(c, node) and _annotations(c, node)[LEFT_DELETING_ANNOTATION] == NEW

    ended = c.drainer.cancel("a", node, NEW)  # the cloud keeps the node (its instance runs): uncordoned
    assert ended.status is ActionStatus.DONE, ended
    assert not _cordoned(c, node) and LEFT_DELETING_ANNOTATION not in _annotations(c, node)


def test_a_node_without_a_drain_mark_or_with_the_marks_of_an_ended_drain_is_ended_as_before(cluster: Cluster) -> None:
    c = cluster
    bare, uncordoned = c.nodes[0], c.nodes[2]
    c.api.nodes.patch(bare, {"spec": {"unschedulable": True}})  # no mark at all
    ended = c.drainer.cancel("a", bare, OLD)
    assert ended.status is ActionStatus.DONE, ended
    assert not _cordoned(c, bare)

    marks = {DRAIN_ANNOTATION: NEW}  # a drain a person ended with kubectl uncordon: its mark left on a schedulable node
    c.api.nodes.patch(uncordoned, {"metadata": {"annotations": marks}})
    ended = c.drainer.cancel("a", uncordoned, OLD)
    assert ended.status is ActionStatus.DONE, ended
    assert not _cordoned(c, uncordoned) and DRAIN_ANNOTATION not in _annotations(c, uncordoned)


def test_a_scale_up_on_a_replica_that_remembers_an_ended_drain_does_not_take_back_the_new_one(cluster: Cluster) -> None:
    """A replica's take-back ends the drains it remembers by their keys. Its memory of a drain that ended since (a
    person uncordoned the node, and another replica drained it again) stays while its read of the pool's drains fails:
    the take-back is refused by the node's mark, and the new drain goes on."""
    c = cluster
    node = c.nodes[1]
    _held_by_a_budget(c)
    first = NodeDrains({"a": c.drainer}, timedelta(0))
    first.observe(_pools(c), c.clock.now())
    started = first.scale_down(Resize("a", 3, 2, "idle", "rel-1"), c.clock.now(), [node])
    assert [r.status for r in started.results] == [ActionStatus.STARTED]
    c.api.nodes.patch(node, {"spec": {"unschedulable": False}})  # a person ends it (kubectl uncordon)

    second = NodeDrains({"a": _other_replica(c)}, timedelta(0))
    c.clock.advance(timedelta(minutes=1))
    second.observe(_pools(c), c.clock.now())
    again = second.scale_down(Resize("a", 3, 2, "idle", "rel-2"), c.clock.now(), [node])
    assert [r.status for r in again.results] == [ActionStatus.STARTED]
    assert _annotations(c, node)[DRAIN_ANNOTATION] == drain_key("rel-2", node)

    c.kube.fail_next(1, 503, verb="list", resource="nodes")  # its read of the pool's drains fails: memory kept
    first.observe(_pools(c), c.clock.now())
    assert [p.key for p in first.pending] == [drain_key("rel-1", node)]
    assert first.take_back("a", 1, c.clock.now()) == []
    assert _cordoned(c, node) and _annotations(c, node)[DRAIN_ANNOTATION] == drain_key("rel-2", node)
    assert [p.key for p in second.pending] == [drain_key("rel-2", node)]

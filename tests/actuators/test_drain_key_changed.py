"""A replica that remembers a drain of a node while the cluster records another drain of it (``NodeDrains._reconcile``):
the one it remembers ended elsewhere (a person uncordoned the node) and another replica drained the node again while
this one did not lead (a late renewal of its own lease forgets nothing) or could not read the pool's drains. The
cluster's record wins: the remembered drain is forgotten and the new one taken over as any other, whose forced or idle
state is read from its node's marks. Stepped under the old key before, the drain marked the node with that key again,
taking the new drain over with the old one's forced or idle state: a budget's hard stop taken back for a scale-up as
if its node were idle, or an idle release evicting as a forced one. The same for a node left cordoned while the cloud
deleted it (``NodeDrains._watch_left``): remembered under an earlier drain's key while its mark names a later one, it
was never uncordoned once the cloud kept it, as the drainer refuses to end a drain its node's mark does not name. Two
drainers and two ``NodeDrains`` stand for two replicas, on the fake Kubernetes and GKE APIs with the real client."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

import pytest

from actuators.drain_mark_names import DRAIN_ANNOTATION, FORCED_ANNOTATION, LEFT_DELETING_ANNOTATION
from actuators.kubernetes_drain import KubernetesNodeDrainer
from agent.drains import NodeDrains
from kube.models import V1Node
from models import ActionStatus, AlertKind, PoolState, Resize
from models.plan import drain_key
from tests.actuators import kubernetes_drain_rig
from tests.actuators.kubernetes_drain_rig import Cluster, _cordoned
from tests.fakes import kube_objects as objs

cluster = kubernetes_drain_rig.cluster  # the fake Kubernetes and GKE APIs, a pool "a" of three nodes


def _annotations(c: Cluster, node: str) -> dict[str, str]:
    found = c.kube.get("nodes", node)
    assert found is not None
    return dict(found["metadata"].get("annotations") or {})


def _pools(c: Cluster) -> dict[str, PoolState]:
    return {s.pool_id: s for s in c.actuator.list_pools()}


def _other_replica(c: Cluster) -> KubernetesNodeDrainer:
    """A second drainer over the same cluster and pool: another replica of the agent."""
    return KubernetesNodeDrainer(c.api, c.clock, {"a": "a100"}, c.actuator, timedelta(minutes=15))


def _held_by_a_budget(c: Cluster) -> None:
    """The web pods may not be evicted now: a drain of their node stays in progress, cordoned and marked."""
    budget = objs.pdb("web", {"app": "web"}, min_available=3, expected_pods=3)
    c.kube.put("poddisruptionbudgets", budget, group="policy")


def _uncordon(c: Cluster, node: str) -> None:
    """``kubectl uncordon``: the cordon alone, the annotations left as they are."""
    c.api.nodes.patch(node, {"spec": {"unschedulable": False}})


def _marks_written(c: Cluster, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Mapping[str, object]]]:
    """Every patch of a node from here on, with its body."""
    written: list[tuple[str, Mapping[str, object]]] = []
    patch = c.api.nodes.patch

    def recorded(node: str, body: Mapping[str, object]) -> V1Node:
        written.append((node, body))
        return patch(node, body)

    monkeypatch.setattr(c.api.nodes, "patch", recorded)
    return written


def _release(key: str, forced: bool) -> Resize:
    return Resize("a", 3, 2, "budget hard stop" if forced else "idle", key, forced=forced)


def _drained_again(c: Cluster, node: str, old_forced: bool, new_forced: bool) -> tuple[NodeDrains, NodeDrains]:
    """Replica ``first`` drains ``node`` (held up by a disruption budget); a person uncordons the node, and replica
    ``second`` drains it again while ``first`` does not lead (nor reads the pool's drains): ``first`` still remembers
    its own drain. Both drains forced or not as asked."""
    _held_by_a_budget(c)
    first = NodeDrains({"a": c.drainer}, timedelta(0))
    first.observe(_pools(c), c.clock.now())
    started = first.scale_down(_release("rel-1", old_forced), c.clock.now(), [node])
    assert [r.status for r in started.results] == [ActionStatus.STARTED]
    _uncordon(c, node)

    second = NodeDrains({"a": _other_replica(c)}, timedelta(0))
    c.clock.advance(timedelta(minutes=1))
    second.observe(_pools(c), c.clock.now())
    again = second.scale_down(_release("rel-2", new_forced), c.clock.now(), [node])
    assert [r.status for r in again.results] == [ActionStatus.STARTED]
    assert _annotations(c, node)[DRAIN_ANNOTATION] == drain_key("rel-2", node)
    assert [p.key for p in first.pending] == [drain_key("rel-1", node)]  # as remembered by the replica standing by
    return first, second


def test_a_forced_drain_started_since_is_taken_over_under_its_key_and_not_taken_back(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = cluster
    node = c.nodes[1]
    old, new = drain_key("rel-1", node), drain_key("rel-2", node)
    first, _ = _drained_again(c, node, old_forced=False, new_forced=True)  # an idle release, then a hard stop
    written = _marks_written(c, monkeypatch)

    c.clock.advance(timedelta(minutes=1))  # the first replica leads again
    first.observe(_pools(c), c.clock.now())
    stepped = first.continue_pending(c.clock.now())

    assert [(r.key, r.status) for r in stepped.results] == [(new, ActionStatus.STARTED)]
    assert [(p.key, p.idle) for p in first.pending] == [(new, False)]  # its nodes carry the mark of a forced drain
    assert not [body for _, body in written if old in str(body)]  # marked with the old key again before
    marks = _annotations(c, node)
    assert marks[DRAIN_ANNOTATION] == new and marks[FORCED_ANNOTATION] == new
    assert first.take_back("a", 1, c.clock.now()) == []  # a hard stop is not taken back for a scale-up
    assert _cordoned(c, node) and _annotations(c, node)[DRAIN_ANNOTATION] == new
    assert [p.key for p in first.pending] == [new]


def test_an_idle_release_started_since_is_taken_over_under_its_key_as_idle(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = cluster
    node = c.nodes[1]
    old, new = drain_key("rel-1", node), drain_key("rel-2", node)
    first, _ = _drained_again(c, node, old_forced=True, new_forced=False)  # a hard stop, then an idle release
    assert FORCED_ANNOTATION not in _annotations(c, node)
    written = _marks_written(c, monkeypatch)

    c.clock.advance(timedelta(minutes=1))
    first.observe(_pools(c), c.clock.now())
    stepped = first.continue_pending(c.clock.now())

    assert [(r.key, r.status) for r in stepped.results] == [(new, ActionStatus.STARTED)]
    assert [(p.key, p.idle, p.forced) for p in first.pending] == [(new, True, False)]
    assert not [body for _, body in written if old in str(body)]  # marked as the old forced drain before
    assert FORCED_ANNOTATION not in _annotations(c, node)
    assert first.take_back("a", 1, c.clock.now()) == [node]  # an idle release serves again for a scale-up
    assert not _cordoned(c, node) and DRAIN_ANNOTATION not in _annotations(c, node)
    assert first.pending == ()


def test_the_same_key_is_continued_as_remembered(cluster: Cluster) -> None:
    """A drain the record shows under the key remembered is this replica's own, as before: not taken over anew."""
    c = cluster
    node = c.nodes[1]
    _held_by_a_budget(c)
    drains = NodeDrains({"a": c.drainer}, timedelta(0))
    drains.observe(_pools(c), c.clock.now())
    started = drains.scale_down(_release("rel-1", False), c.clock.now(), [node])
    assert [r.status for r in started.results] == [ActionStatus.STARTED]

    c.clock.advance(timedelta(minutes=1))
    drains.observe(_pools(c), c.clock.now())
    [pending] = drains.pending
    assert (pending.key, pending.idle, pending.started) == (drain_key("rel-1", node), True, started.results[0].at)


def _left_deleting(c: Cluster, node: str, key: str) -> None:
    """The node as a drain that ended while the cloud still deleted it leaves it: cordoned, marked with its key."""
    mark = {"spec": {"unschedulable": True}, "metadata": {"annotations": {LEFT_DELETING_ANNOTATION: key}}}
    c.api.nodes.patch(node, mark)


def _cloud_deletes(c: Cluster, node: str, deleting: bool) -> None:
    """The node's instance is being deleted by its group, or runs (the cloud stopped deleting it)."""
    with c.gke._lock:
        instance = next(i for m in c.gke.pools["a100"].migs for i in m.instances if i.name == node)
        instance.action = "DELETING" if deleting else "NONE"


def test_a_node_left_deleting_by_a_later_drain_is_uncordoned_under_that_drains_key_once_the_cloud_keeps_it(
    cluster: Cluster,
) -> None:
    c = cluster
    node = c.nodes[0]
    old, new = drain_key("rel-1", node), drain_key("rel-2", node)
    _left_deleting(c, node, old)
    _cloud_deletes(c, node, True)
    first = NodeDrains({"a": c.drainer}, timedelta(0))
    first.observe(_pools(c), c.clock.now())
    assert first.continue_pending(c.clock.now()).alerts == []  # still deleted: asked again at the next step
    # While the first replica does not lead, a person uncordons the node, another replica drains it again, and that
    # drain too ends while the cloud deletes the node: marked with the later drain's key.
    _left_deleting(c, node, new)

    _cloud_deletes(c, node, False)  # then the cloud keeps the instance
    c.clock.advance(timedelta(minutes=1))
    first.observe(_pools(c), c.clock.now())
    told = first.continue_pending(c.clock.now()).alerts

    assert not _cordoned(c, node)  # refused with the earlier key, left cordoned for good before
    assert LEFT_DELETING_ANNOTATION not in _annotations(c, node)
    assert [(e.kind, e.resolved, e.details.get("drain key")) for e in told] == [
        (AlertKind.DRAIN_DELETION_OVERDUE, True, new)
    ]
    c.clock.advance(timedelta(minutes=1))
    first.observe(_pools(c), c.clock.now())
    assert first.continue_pending(c.clock.now()).alerts == []  # forgotten: asked about no more

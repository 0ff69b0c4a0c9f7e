"""A node a drain left cordoned while the cloud deleted it (``leadtime.io/drain-left-deleting``) that a person
uncordoned once the cloud kept it, and that a later drain of ours takes: the later drain owns the node.

The leader watches a node so marked and, once the cloud keeps its instance, ends the drain that left it
(``NodeDrainer.cancel`` with that drain's key: the node uncordoned, every drain mark taken off). A forced release (a
budget's hard stop) picked the node in the tick whose take-off of the old mark failed (one 500 on the node's PATCH):
its cordon kept the old mark beside its own key, the next tick listed the node as left deleting, and the leader's
cancel with the old key uncordoned the node and took the forced drain's marks off. The forced drain was then dropped
with no result and a spurious end of drain-deletion-overdue was told: the hard stop silently undone. Now a drain's
cordon takes that mark off in the same patch, and a node carrying a live drain of ours is never listed as left
deleting. Whole daemons on the fake Kubernetes and GKE APIs, one simulated clock."""

from __future__ import annotations

from actuators.drain_mark_names import DRAIN_ANNOTATION, FORCED_ANNOTATION, LEFT_DELETING_ANNOTATION
from models import ActionStatus, AlertKind, Resize
from models.clock import SimulatedClock
from tests.actuators.test_drain_removal_under_way import _cordoned, _fails_again
from tests.daemon.drain_replicas import (
    Act,
    DrainReplica,
    drain,
    hand_over,
    minute,
    until_left_deleting,
)
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

FORCED_KEY = "release2"


def _annotations(kube_api: FakeKubeApi, node: str) -> dict[str, str]:
    found = kube_api.get("nodes", node) or {}
    annotations: dict[str, str] = found.get("metadata", {}).get("annotations") or {}
    return annotations


def _forced(node: str) -> Act:
    """A forced release of ``node`` (a budget's hard stop), as the executor carries it out."""
    resize = Resize("gpu", 3, 2, "budget hard stop", FORCED_KEY, forced=True)
    return lambda drains, now: drains.scale_down(resize, now, [node]).results


def _uncordon(kube_api: FakeKubeApi, node: str) -> None:
    """``kubectl uncordon``: the cordon alone, the annotations left as they are."""
    found = kube_api.get("nodes", node)
    assert found is not None
    found["spec"]["unschedulable"] = False
    kube_api.put("nodes", found)


def test_a_forced_drain_of_a_node_once_left_deleting_is_not_ended_by_the_old_drains_watch(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    gke_api: FakeGkeApi,
    drain_replicas: tuple[DrainReplica, DrainReplica, str],
) -> None:
    a, b, node = drain_replicas
    old_key, new_key = f"release/drain/{node}", f"{FORCED_KEY}/drain/{node}"
    a.loop.acts.append(drain(node))
    until_left_deleting(clock, gke_api, a, b)
    assert _annotations(kube_api, node).get(LEFT_DELETING_ANNOTATION) == old_key  # left cordoned while deleted

    _fails_again(gke_api, node)  # the cloud keeps the instance
    _uncordon(kube_api, node)  # and a person uncordons the node before any leader asked about it
    # The take-offs of the old mark in that tick fail (its observation's read of the pool's drains, and the forced
    # drain's own, before it asks the cloud whether the node may go): the mark stays on the node.
    kube_api.fail_next(2, 500, verb="patch", resource="nodes")
    b.loop.acts.append(_forced(node))  # the hard stop picks the node in the same tick
    hand_over(clock, a, b)
    [started] = [r for r in b.loop.results if r.key == new_key]
    assert started.status is ActionStatus.STARTED, started
    marks = _annotations(kube_api, node)
    assert marks.get(DRAIN_ANNOTATION) == new_key and marks.get(FORCED_ANNOTATION) == new_key
    assert LEFT_DELETING_ANNOTATION not in marks  # taken off by the forced drain's cordon (left there before)

    for _ in range(3):
        minute(clock, b, a)
        assert _cordoned(kube_api, node)  # uncordoned by the old drain's watch before
        assert _annotations(kube_api, node).get(DRAIN_ANNOTATION) == new_key
        assert [p.key for p in b.drains.pending] == [new_key]  # dropped with no result before
    assert [r.status for r in b.loop.results if r.key == new_key] == [ActionStatus.STARTED] * 4
    assert [(e.kind, e.resolved) for e in b.loop.told] == []  # a spurious end of drain-deletion-overdue before
    assert [e.kind for e in a.loop.told] == [AlertKind.DRAIN_DELETION_OVERDUE]


def test_a_drain_of_a_node_the_leader_remembers_as_left_deleting_is_not_ended_by_the_old_drains_watch(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    gke_api: FakeGkeApi,
    drain_replicas: tuple[DrainReplica, DrainReplica, str],
) -> None:
    a, b, node = drain_replicas
    new_key = f"{FORCED_KEY}/drain/{node}"
    a.loop.acts.append(drain(node))
    until_left_deleting(clock, gke_api, a, b)
    _uncordon(kube_api, node)  # a person uncordons it while the cloud still deletes it
    a.loop.acts.append(_forced(node))  # and the same leader's hard stop picks it
    minute(clock, a, b)
    assert _annotations(kube_api, node).get(DRAIN_ANNOTATION) == new_key

    _fails_again(gke_api, node)  # then the cloud keeps the instance
    for _ in range(3):
        minute(clock, a, b)
        assert _cordoned(kube_api, node)
        assert _annotations(kube_api, node).get(DRAIN_ANNOTATION) == new_key
        assert [p.key for p in a.drains.pending] == [new_key]
    assert [(e.kind, e.resolved) for e in a.loop.told] == [(AlertKind.DRAIN_DELETION_OVERDUE, False)]

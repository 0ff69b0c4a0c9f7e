"""A node a drain left cordoned because the cloud still deleted it when the drain ended is watched by whichever replica
leads, not only by the one that ended the drain.

Replica A's drain removes its node past the timeout (GKE takes the deleteInstances, the bounds' move answers 503) and
the cloud is still deleting the instance when the drain's wait ends: the drain ends, the node left cordoned and
``drain-deletion-overdue`` told. Only A remembered the node, to uncordon it if the cloud kept it: after a change of
leader (or a restart, or A leading again once another replica led) nobody did, and the node stayed cordoned, paid
for and unused. The drainer now marks such a node (``leadtime.io/drain-left-deleting``, the drain's key) and the
leader reads the marks at each tick. Whole daemons on the fake Kubernetes and GKE APIs, one simulated clock."""

from __future__ import annotations

import pytest

from actuators.drain_mark_names import LEFT_DELETING_ANNOTATION
from models import AlertKind
from models.clock import SimulatedClock
from tests.actuators.test_drain_removal_under_way import _cordoned, _fails_again
from tests.daemon.drain_replicas import (
    DrainReplica,
    drain,
    hand_over,
    minute,
    until_left_deleting,
)
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

READS = "/listManagedInstances"


def _left_cordoned(clock: SimulatedClock, gke_api: FakeGkeApi, a: DrainReplica, b: DrainReplica) -> None:
    """A's drain ends while the cloud still deletes its node: left cordoned, the warning told."""
    until_left_deleting(clock, gke_api, a, b)
    assert [e.kind for e in a.loop.told] == [AlertKind.DRAIN_DELETION_OVERDUE]


def _left_mark(kube_api: FakeKubeApi, node: str) -> str | None:
    found = kube_api.get("nodes", node) or {}
    annotations: dict[str, str] = found.get("metadata", {}).get("annotations") or {}
    return annotations.get(LEFT_DELETING_ANNOTATION)


@pytest.mark.parametrize("a_again", [False, True], ids=["another-leader", "leading-again-after-another"])
def test_a_node_left_cordoned_while_deleted_is_uncordoned_by_the_leader_once_the_cloud_keeps_it(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    gke_api: FakeGkeApi,
    drain_replicas: tuple[DrainReplica, DrainReplica, str],
    a_again: bool,
) -> None:
    a, b, node = drain_replicas
    a.loop.acts.append(drain(node))
    _left_cordoned(clock, gke_api, a, b)
    assert _left_mark(kube_api, node) == f"release/drain/{node}"

    hand_over(clock, a, b)
    minute(clock, b, a)
    leader = b
    if a_again:  # B leads a while, A leads again: its memory of the node forgotten with its drains'
        hand_over(clock, b, a, released=True)
        leader = a
    _fails_again(gke_api, node)  # the cloud stops deleting it
    minute(clock, leader)

    assert not _cordoned(kube_api, node)  # was cordoned for good
    assert _left_mark(kube_api, node) is None
    assert [(e.kind, e.resolved) for e in leader.loop.told][-1] == (AlertKind.DRAIN_DELETION_OVERDUE, True)
    assert [e.kind for e in a.loop.told + b.loop.told].count(AlertKind.DRAIN_DELETION_OVERDUE) == 2  # told, ended


def test_a_node_the_cloud_deleted_is_not_asked_about_again_while_its_node_object_outlives_it(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    gke_api: FakeGkeApi,
    drain_replicas: tuple[DrainReplica, DrainReplica, str],
) -> None:
    a, b, node = drain_replicas
    a.loop.acts.append(drain(node))
    _left_cordoned(clock, gke_api, a, b)
    hand_over(clock, a, b)
    gke_api.advance()  # the instance is deleted; its Node object, still marked, outlives it a while
    reads = gke_api.calls("POST", READS)
    minute(clock, b, a)
    asked = gke_api.calls("POST", READS)
    assert asked > reads  # found gone
    for _ in range(3):
        minute(clock, b, a)
    assert gke_api.calls("POST", READS) == asked


def test_the_mark_of_a_node_a_person_uncordoned_is_taken_off(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    gke_api: FakeGkeApi,
    drain_replicas: tuple[DrainReplica, DrainReplica, str],
) -> None:
    a, b, node = drain_replicas
    a.loop.acts.append(drain(node))
    _left_cordoned(clock, gke_api, a, b)
    found = kube_api.get("nodes", node)
    assert found is not None
    found["spec"]["unschedulable"] = False  # kubectl uncordon
    kube_api.put("nodes", found)
    minute(clock, a, b)
    assert _left_mark(kube_api, node) is None

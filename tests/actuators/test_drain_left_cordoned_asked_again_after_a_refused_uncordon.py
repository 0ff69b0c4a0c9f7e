"""A node left cordoned while the cloud deleted it stays watched when its uncordon is refused.

A drain ended with its node left cordoned while the cloud still deleted it (``drain-deletion-overdue``); at each tick
the agent asks the cloud about the node, and uncordons it (resolving the warning) once the cloud keeps it. The
uncordon is the drainer's ``cancel``, which reads the pool again before it uncordons: when that read fails (a 503 to
the instance list) the uncordon is refused, and the node was forgotten, cordoned for good (paid for, counted as
ready, never found idle) with its warning never resolved. Now the node is asked about again at the next tick, whose
read decides: kept, it is uncordoned and the warning resolved; deleted again, it stays cordoned and asked about;
gone, it is forgotten. Real drainer, GKE actuator and clients, on the fake GKE and Kubernetes APIs."""

from __future__ import annotations

from typing import Literal

import pytest
from kubernetes import client as k8s

from models import AlertKind, Severity
from models.clock import SimulatedClock
from tests.actuators.test_drain_deletion_overdue_stays_cordoned import READS, _ended_left_deleting, _tick
from tests.actuators.test_drain_removal_under_way import START, UNAVAILABLE, _action, _cordoned, _fails_again, _Run
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi


def _deleted_again(gke_api: FakeGkeApi, node: str) -> None:
    """The cloud deletes the instance again (its group's target leaves it out)."""
    with gke_api._lock:
        mig = next(m for m in gke_api.pools["a100"].migs if any(i.name == node for i in m.instances))
        next(i for i in mig.instances if i.name == node).action = "DELETING"
        mig.target_size -= 1


def _uncordon_unread(run: _Run, gke_api: FakeGkeApi, clock: SimulatedClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cloud keeps the node left cordoned; at the next tick the agent's read of it says so, and the read that the
    uncordon makes right after answers 503: the uncordon is refused, and nothing is told."""
    _fails_again(gke_api, run.node)
    asked = run.drainer.removal_state

    def read_then_503_to_the_next(pool_id: str, unit: str) -> Literal["deleting", "gone", "kept"] | None:
        state = asked(pool_id, unit)
        gke_api.fail_next(1, 503, UNAVAILABLE, path="listManagedInstances")
        return state

    with monkeypatch.context() as patched:
        patched.setattr(run.drainer, "removal_state", read_then_503_to_the_next)
        reads = gke_api.calls("POST", READS)
        assert _tick(run, clock) == ([], [])
        assert gke_api.calls("POST", READS) == reads + 2  # the tick's read, then the uncordon's own (the 503)


def test_a_node_whose_uncordon_could_not_read_the_cloud_is_uncordoned_at_the_next_tick(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = SimulatedClock(START)
    run = _ended_left_deleting(kube_api, kube_client, gke_api, clock)
    _uncordon_unread(run, gke_api, clock, monkeypatch)
    assert _cordoned(kube_api, run.node)

    _, alerts = _tick(run, clock)

    assert not _cordoned(kube_api, run.node)  # was cordoned for good, the node forgotten
    [resolved] = alerts  # was never resolved
    assert (resolved.kind, resolved.resolved, resolved.severity) == (
        AlertKind.DRAIN_DELETION_OVERDUE,
        True,
        Severity.INFO,
    )
    assert resolved.subject == f"node {run.node} of gpu still being deleted"
    reads = gke_api.calls("POST", READS)
    for _ in range(3):  # told once, and not asked about any more
        assert _tick(run, clock) == ([], [])
    assert gke_api.calls("POST", READS) == reads


def test_a_node_deleted_again_after_a_refused_uncordon_stays_cordoned_and_watched(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = SimulatedClock(START)
    run = _ended_left_deleting(kube_api, kube_client, gke_api, clock)
    _uncordon_unread(run, gke_api, clock, monkeypatch)
    _deleted_again(gke_api, run.node)

    per_tick = []
    for _ in range(3):  # read again at each tick: being deleted, left as it is
        reads = gke_api.calls("POST", READS)
        assert _tick(run, clock) == ([], [])
        per_tick.append(gke_api.calls("POST", READS) - reads)
    assert per_tick == [1, 1, 1]  # was [0, 0, 0]: forgotten
    assert _cordoned(kube_api, run.node) and _action(gke_api, run.node) == "DELETING"

    _fails_again(gke_api, run.node)  # the cloud stops deleting it once more
    _, alerts = _tick(run, clock)
    assert [(a.kind, a.resolved) for a in alerts] == [(AlertKind.DRAIN_DELETION_OVERDUE, True)]
    assert not _cordoned(kube_api, run.node)


def test_a_node_gone_after_a_refused_uncordon_is_asked_about_once_more_and_forgotten(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = SimulatedClock(START)
    run = _ended_left_deleting(kube_api, kube_client, gke_api, clock)
    _uncordon_unread(run, gke_api, clock, monkeypatch)
    _deleted_again(gke_api, run.node)
    gke_api.advance()  # the instance is deleted; its Node object outlives it a while
    assert _action(gke_api, run.node) is None

    reads = gke_api.calls("POST", READS)
    assert _tick(run, clock) == ([], [])
    assert gke_api.calls("POST", READS) == reads + 1  # asked once more (was not): gone
    for _ in range(3):
        assert _tick(run, clock) == ([], [])
    assert gke_api.calls("POST", READS) == reads + 1  # forgotten
    assert _cordoned(kube_api, run.node)  # nothing is uncordoned on its way out

"""A drain taken over (a restart, or another replica leading) after its removal went out follows that removal.

Two removals that went out and then failed, each left to the next leader before the drain's next step:

- the node was removed past the timeout (GKE took the deleteInstances) and the API server answered 503 to the PATCH
  taking the drain's marks off it: the node stays cordoned and marked while its instance is deleted, and its Node
  object may outlive the instance;
- under ``move-bounds``, GKE took the deleteInstances and answered 503 to the autoscaler bounds' move.

The agent that takes such a drain over remembers nothing of the removal. A scale-up does not take the node back (its
instance is being deleted or gone: uncordoned, it would be counted as serving), and the drain's first step asks the
cloud, remembers the removal with the pods terminating on the node, and settles the drain once the instance is gone,
telling the drain-unfinished-pods warning once, even when the Node object and its pods left the cluster meanwhile.
Real drainer, GKE actuator and clients, on the fake GKE and Kubernetes APIs."""

from __future__ import annotations

from kubernetes import client as k8s

from agent.drains import NodeDrains
from models import ActionResult, ActionStatus, AlertEvent, AlertKind
from models.clock import SimulatedClock
from tests.actuators.test_drain_removal_under_way import (
    MINUTE,
    START,
    _action,
    _cordoned,
    _drains,
    _marked,
    _removal_went_out,
)
from tests.actuators.test_drain_removal_under_way import _rig as _bounds_rig
from tests.actuators.test_drain_unmark_fails_after_removal import _removed_unmark_refused, _rig
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi


def _tick(drains: NodeDrains, clock: SimulatedClock) -> tuple[list[ActionResult], list[AlertEvent]]:
    """A minute later, the tick's observation of the drains in progress and a step of each."""
    clock.advance(MINUTE)
    drains.observe({}, clock.now())
    out = drains.continue_pending(clock.now())
    return list(out.results), list(out.alerts)


def _leaves_the_cluster(kube_api: FakeKubeApi, gke_api: FakeGkeApi, node: str) -> None:
    """The instance is deleted, and its Node object with it; the pod garbage collector deletes the pods bound to it."""
    gke_api.advance()
    kube_api.delete("nodes", node)
    kube_api.delete("pods", "web", namespace="default")


def test_a_new_leader_does_not_take_back_a_removed_node_whose_unmarking_failed(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(START)
    run = _rig(kube_api, kube_client, gke_api, clock)
    _removed_unmark_refused(run, kube_api, gke_api, clock)
    gke_api.advance()  # the instance is gone; its Node object outlives it a while
    assert _action(gke_api, run.node) is None
    assert _cordoned(kube_api, run.node) and _marked(kube_api, run.node)
    _, _, drains = _drains(kube_client, gke_api, clock, move_bounds=False)  # a restart, or another replica leading
    clock.advance(MINUTE)
    drains.observe({}, clock.now())
    assert [(p.node, p.idle) for p in drains.pending] == [(run.node, True)]  # taken over, unforced

    assert drains.take_back("gpu", 1, clock.now()) == []  # was taken back: uncordoned, counted as serving
    assert _cordoned(kube_api, run.node)

    results, alerts = _tick(drains, clock)
    assert [r.status for r in results] == [ActionStatus.DONE], results
    assert [a.subject for a in alerts] == [f"node {run.node} of gpu removed with pods still terminating"]
    assert [(p.name, p.node, p.kubelet_gone) for p in results[0].unfinished] == [("web", run.node, False)]
    assert not _marked(kube_api, run.node)
    assert drains.pending == ()
    assert gke_api.calls("POST", "/deleteInstances") == 1


def test_a_new_leader_tells_the_pods_a_removed_node_was_left_with_once_after_it_left_the_cluster(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(START)
    run = _rig(kube_api, kube_client, gke_api, clock)
    _removed_unmark_refused(run, kube_api, gke_api, clock)
    _, _, drains = _drains(kube_client, gke_api, clock, move_bounds=False)

    first, told = _tick(drains, clock)  # the instance is still being deleted
    assert [r.status for r in first] == [ActionStatus.STARTED], first
    assert f"node {run.node} is being deleted by the cloud" in first[0].detail
    assert "went out before its drain was taken over" in first[0].detail
    assert _cordoned(kube_api, run.node)
    _leaves_the_cluster(kube_api, gke_api, run.node)
    results: list[ActionResult] = []
    for _ in range(4):
        stepped, raised = _tick(drains, clock)
        results += stepped
        told += raised

    assert [a.kind for a in told] == [AlertKind.DRAIN_UNFINISHED_PODS]  # was none: the drain dropped with its node
    [done] = results
    assert done.status is ActionStatus.DONE, done
    assert [(p.name, p.node, p.kubelet_gone) for p in done.unfinished] == [("web", run.node, False)]
    assert drains.pending == ()


def test_a_drain_taken_over_while_its_node_is_being_deleted_waits_for_the_deletion_and_tells_its_pods(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """Under move-bounds: GKE took the deleteInstances, then refused the bounds' move; a restarted agent keeps the
    node cordoned while it is deleted and ends the drain DONE, the stuck pod told, once the instance is gone (the
    drain went on as any drain before, waiting for the pod, and ended without the warning)."""
    clock = SimulatedClock(START)
    run = _bounds_rig(kube_api, kube_client, gke_api, clock)
    _removal_went_out(run, gke_api, clock)
    _, _, drains = _drains(kube_client, gke_api, clock)

    statuses, told = [], []
    for _ in range(3):
        stepped, raised = _tick(drains, clock)
        statuses += [r.status for r in stepped]
        told += raised
        assert _cordoned(kube_api, run.node) and _action(gke_api, run.node) == "DELETING"
    assert statuses == [ActionStatus.STARTED] * 3
    gke_api.advance()  # the instance is deleted; its Node object outlives it a while
    [done], raised = _tick(drains, clock)
    told += raised

    assert done.status is ActionStatus.DONE, done
    assert [a.subject for a in told] == [f"node {run.node} of gpu removed with pods still terminating"]
    assert drains.pending == ()
    assert not _marked(kube_api, run.node)
    bounds = gke_api.pools["a100"].spec["autoscaling"]
    assert (bounds["totalMinNodeCount"], bounds["totalMaxNodeCount"]) == (2, 2)
    assert gke_api.calls("POST", "/deleteInstances") == 1

"""A drain whose node the cloud is still deleting at the end of the bounded wait leaves it cordoned, and says so.

The node pool is under ``move-bounds``; a node left only with a web pod its live kubelet cannot stop is removed at the
drain's timeout, GKE takes the deleteInstances and answers 503 to the autoscaler bounds' move, and the drain waits
while the instance is DELETING. Here the instance is still DELETING when the wait (15 minutes from the removal) ends:
the drain ends (nothing waits for ever), settled FAILED with the removal possibly still carried out (``unclear``),
and the node stays cordoned, since uncordoned the scheduler would place work on a machine on its way out; its drain
marks come off, so no replica takes the drain over again. One ``drain-deletion-overdue`` warning names the node, the
pool, the wait and what to check. Real drainer, GKE actuator and clients, on the fake GKE and Kubernetes APIs."""

from __future__ import annotations

from datetime import datetime, timedelta

from kubernetes import client as k8s

from models import ActionResult, ActionStatus, AlertEvent, AlertKind, Severity
from models.clock import SimulatedClock
from tests.actuators.test_drain_removal_under_way import (
    MINUTE,
    START,
    _action,
    _cordoned,
    _drains,
    _marked,
    _removal_went_out,
    _rig,
    _Run,
)
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi


def _tick(run: _Run, clock: SimulatedClock) -> tuple[list[ActionResult], list[AlertEvent]]:
    """A minute later, the tick's observation of the drains in progress and a step of each; every alert the steps
    raise."""
    clock.advance(MINUTE)
    run.drains.observe({}, clock.now())
    out = run.drains.continue_pending(clock.now())
    run.results += out.results
    return list(out.results), list(out.alerts)


def _until_ended(run: _Run, clock: SimulatedClock) -> tuple[list[ActionStatus], list[AlertEvent]]:
    statuses: list[ActionStatus] = []
    alerts: list[AlertEvent] = []
    for _ in range(30):
        results, raised = _tick(run, clock)
        statuses += [r.status for r in results]
        alerts += raised
        if not run.drains.pending:
            break
    return statuses, alerts


def test_a_node_still_being_deleted_after_the_wait_stays_cordoned_and_the_drain_ends_with_a_warning(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(START)
    run = _rig(kube_api, kube_client, gke_api, clock)
    _removal_went_out(run, gke_api, clock)
    went_out = clock.now()

    statuses, alerts = _until_ended(run, clock)

    assert statuses == [ActionStatus.STARTED] * 14 + [ActionStatus.FAILED], statuses
    assert clock.now() - went_out == timedelta(minutes=15)  # the wait stays bounded
    ended = run.results[-1]
    assert _cordoned(kube_api, run.node)  # was uncordoned: the scheduler could place work on it
    assert ended.unclear, ended  # the cloud may still carry the removal out
    assert f"node {run.node} still being deleted 0:15:00 after its removal was sent" in ended.detail
    assert "left cordoned" in ended.detail and "uncordoned" not in ended.detail
    assert _action(gke_api, run.node) == "DELETING"
    assert not _marked(kube_api, run.node)  # the drain is over: no replica takes it over again
    assert run.drains.pending == ()

    [alert] = [a for a in alerts if a.kind is AlertKind.DRAIN_DELETION_OVERDUE]
    assert (alert.severity, alert.at) == (Severity.WARNING, ended.at)
    assert alert.subject == f"node {run.node} of gpu still being deleted"
    assert f"Node {run.node} of pool gpu" in alert.summary
    assert "longer than its drain waits" in alert.summary
    assert "left cordoned" in alert.summary
    assert "kubectl uncordon" in alert.summary and "list-instances" in alert.details["check the instance"]
    assert alert.details["drain key"] == run.key
    assert alert.details["drain"] == ended.detail
    assert alert.details["pods left terminating"] == f"default/web on {run.node}"

    for _ in range(3):  # nothing left to continue, and told once
        assert _tick(run, clock) == ([], [])
        assert _cordoned(kube_api, run.node)
    _, _, restarted = _drains(kube_client, gke_api, clock)  # a restart, or another replica leading
    restarted.observe({}, clock.now())
    assert restarted.pending == ()
    assert _cordoned(kube_api, run.node)
    assert gke_api.calls("POST", "/deleteInstances") == 1


def test_the_warning_is_not_raised_when_the_cloud_finishes_the_deletion_within_the_wait(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """The other side: a deletion the cloud finishes a minute before the wait's end settles DONE, nothing overdue."""
    clock = SimulatedClock(START)
    run = _rig(kube_api, kube_client, gke_api, clock)
    _removal_went_out(run, gke_api, clock)
    went_out: datetime = clock.now()
    alerts: list[AlertEvent] = []
    while clock.now() - went_out < timedelta(minutes=13):
        alerts += _tick(run, clock)[1]
    gke_api.advance()  # deleted at 14 minutes
    statuses, raised = _until_ended(run, clock)
    assert statuses == [ActionStatus.DONE], statuses
    assert [a.kind for a in alerts + raised] == [AlertKind.DRAIN_UNFINISHED_PODS]

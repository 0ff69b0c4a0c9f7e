"""A drain whose node the cloud is still deleting at the end of the bounded wait leaves it cordoned, and says so.

The node pool is under ``move-bounds``; a node left only with a web pod its live kubelet cannot stop is removed at the
drain's timeout, GKE takes the deleteInstances and answers 503 to the autoscaler bounds' move, and the drain waits
while the instance is DELETING. Here the instance is still DELETING when the wait (15 minutes from the removal) ends:
the drain ends (nothing waits for ever), settled FAILED with the removal possibly still carried out (``unclear``),
and the node stays cordoned, since uncordoned the scheduler would place work on a machine on its way out; its drain
marks come off, so no replica takes the drain over again. One ``drain-deletion-overdue`` warning names the node, the
pool, the wait and what to check. The agent asks the cloud about the node at each tick afterwards (one read of the
pool per tick, however many nodes are left so): once the instance is gone it is forgotten; if the cloud stops
deleting it (the instance runs again), the node is uncordoned and the warning resolved. Real drainer, GKE actuator
and clients, on the fake GKE and Kubernetes APIs."""

from __future__ import annotations

from datetime import datetime, timedelta

from kubernetes import client as k8s

from models import ActionResult, ActionStatus, AlertEvent, AlertKind, Resize, Severity
from models.clock import SimulatedClock
from tests.actuators.test_drain_removal_under_way import (
    BOUNDS,
    MINUTE,
    START,
    UNAVAILABLE,
    _action,
    _cordoned,
    _drains,
    _fails_again,
    _marked,
    _pool,
    _removal_went_out,
    _rig,
    _Run,
)
from tests.fakes import kube_objects as objs
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

READS = "/listManagedInstances"  # one per zone (one here) each time the pool's instances are read


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
    assert "stays so until it leaves the cluster" not in alert.summary  # untrue: the cloud may stop deleting it
    assert "uncordons the node and says so if the cloud no longer deletes it" in alert.summary
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


def _ended_left_deleting(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi, clock: SimulatedClock
) -> _Run:
    """The drain of the rig's node, ended 15 minutes after its removal with the node left cordoned, told once."""
    run = _rig(kube_api, kube_client, gke_api, clock)
    _removal_went_out(run, gke_api, clock)
    statuses, alerts = _until_ended(run, clock)
    assert statuses[-1] is ActionStatus.FAILED and run.drains.pending == ()
    assert [a.kind for a in alerts].count(AlertKind.DRAIN_DELETION_OVERDUE) == 1
    assert _cordoned(kube_api, run.node) and _action(gke_api, run.node) == "DELETING"
    return run


def test_a_node_left_cordoned_that_the_cloud_stops_deleting_is_uncordoned_and_the_warning_resolved(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(START)
    run = _ended_left_deleting(kube_api, kube_client, gke_api, clock)
    for _ in range(3):  # still being deleted: left as it is
        assert _tick(run, clock) == ([], [])
        assert _cordoned(kube_api, run.node)

    _fails_again(gke_api, run.node)  # the cloud does not carry the deletion out after all: the instance runs again
    results, alerts = _tick(run, clock)

    assert results == []
    assert not _cordoned(kube_api, run.node)  # was cordoned for good: paid for, counted ready, never idle
    [resolved] = alerts
    assert (resolved.kind, resolved.resolved, resolved.severity) == (
        AlertKind.DRAIN_DELETION_OVERDUE,
        True,
        Severity.INFO,
    )
    assert resolved.subject == f"node {run.node} of gpu still being deleted"  # the warning's condition
    assert f"The cloud no longer deletes node {run.node} of pool gpu" in resolved.summary
    assert "uncordoned" in resolved.summary
    assert resolved.details["drain key"] == run.key
    assert "uncordoned" in resolved.details["uncordoned"]
    reads = gke_api.calls("POST", READS)
    for _ in range(3):  # told once, and not asked about any more
        assert _tick(run, clock) == ([], [])
    assert gke_api.calls("POST", READS) == reads
    assert not _cordoned(kube_api, run.node)
    assert run.drainer.idle_nodes("gpu", timedelta(0)).count(run.node) == 1  # found idle again


def test_a_node_left_cordoned_whose_instance_is_gone_is_forgotten(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(START)
    run = _ended_left_deleting(kube_api, kube_client, gke_api, clock)
    gke_api.advance()  # the instance is deleted; its Node object outlives it a while
    reads = gke_api.calls("POST", READS)
    assert _tick(run, clock) == ([], [])
    assert gke_api.calls("POST", READS) == reads + 1  # asked about once more: gone
    reads += 1
    for _ in range(3):
        assert _tick(run, clock) == ([], [])
    assert gke_api.calls("POST", READS) == reads  # forgotten: asked about no more
    assert _cordoned(kube_api, run.node)  # nothing is uncordoned on its way out
    assert gke_api.calls("POST", "/deleteInstances") == 1


def test_the_nodes_left_cordoned_cost_one_read_of_their_pool_per_tick(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """Two drains of one pool end with their nodes left cordoned: each tick reads the pool once, asking about the
    node asked about longest ago, so either is uncordoned within two ticks of the cloud keeping it."""
    clock = SimulatedClock(START)
    nodes = _pool(kube_api, gke_api, clock)[:2]
    for i, node in enumerate(nodes):
        kube_api.put("pods", objs.pod(f"web-{i}", node, labels={"app": "web"}, owner_kind="ReplicaSet"))
        kube_api.hang_pods(node)
    _, drainer, drains = _drains(kube_client, gke_api, clock)
    started = drains.scale_down(Resize("gpu", 3, 1, "idle", "release"), clock.now(), nodes).results
    run = _Run(drains, drainer, nodes[0], started[0].key, list(started))
    gke_api.fail_next(2, 503, UNAVAILABLE, path=BOUNDS)
    alerts: list[AlertEvent] = []
    for _ in range(60):
        alerts += _tick(run, clock)[1]
        if not drains.pending:
            break
    assert gke_api.calls("POST", "/deleteInstances") == 2
    assert [a.kind for a in alerts].count(AlertKind.DRAIN_DELETION_OVERDUE) == 2
    assert all(_cordoned(kube_api, n) and _action(gke_api, n) == "DELETING" for n in nodes)

    per_tick = []
    for _ in range(4):
        before = gke_api.calls("POST", READS)
        assert _tick(run, clock) == ([], [])
        per_tick.append(gke_api.calls("POST", READS) - before)
    assert per_tick == [1, 1, 1, 1]  # not one per node

    _fails_again(gke_api, nodes[1])
    resolved: list[AlertEvent] = []
    for _ in range(2):
        resolved += _tick(run, clock)[1]
    assert [a.subject for a in resolved] == [f"node {nodes[1]} of gpu still being deleted"]
    assert not _cordoned(kube_api, nodes[1]) and _cordoned(kube_api, nodes[0])


def test_a_node_whose_state_cannot_be_read_at_the_end_of_the_wait_stays_cordoned_and_is_told(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """One failed read of the instance list (a 503) at the wait's end: the node, which the cloud is still deleting,
    was uncordoned, with nothing told, and the detail said it was still being deleted though nothing was read. It is
    now taken as still being deleted (its removal went out): left cordoned and told, the detail saying the state was
    not read; the next ticks ask the cloud again, and uncordon it once the cloud keeps it."""
    clock = SimulatedClock(START)
    run = _rig(kube_api, kube_client, gke_api, clock)
    _removal_went_out(run, gke_api, clock)
    went_out = clock.now()
    while clock.now() - went_out < timedelta(minutes=14):
        assert [r.status for r in _tick(run, clock)[0]] == [ActionStatus.STARTED]
    gke_api.fail_next(1, 503, UNAVAILABLE, path="listManagedInstances")
    [ended], alerts = _tick(run, clock)

    assert clock.now() - went_out == timedelta(minutes=15)
    assert _cordoned(kube_api, run.node) and _action(gke_api, run.node) == "DELETING"  # was uncordoned
    assert not _marked(kube_api, run.node)
    assert ended.status is ActionStatus.FAILED and ended.unclear, ended
    assert f"what the cloud does with node {run.node} could not be read 0:15:00 after" in ended.detail
    assert "503" in ended.detail and "taken as still being deleted" in ended.detail
    assert "still being deleted 0:15:00" not in ended.detail  # not read: not claimed
    assert "left cordoned" in ended.detail and "uncordoned" not in ended.detail
    [alert] = alerts  # was none
    assert alert.kind is AlertKind.DRAIN_DELETION_OVERDUE and not alert.resolved
    assert "or what it does with it could not be read" in alert.summary
    assert alert.details["drain"] == ended.detail
    assert run.drains.pending == ()

    assert _tick(run, clock) == ([], [])  # read again: still being deleted
    assert _cordoned(kube_api, run.node)
    _fails_again(gke_api, run.node)
    _, resolved = _tick(run, clock)
    assert [(a.kind, a.resolved) for a in resolved] == [(AlertKind.DRAIN_DELETION_OVERDUE, True)]
    assert not _cordoned(kube_api, run.node)

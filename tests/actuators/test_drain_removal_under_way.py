"""A drain past its timeout whose removal went out is not given up while the cloud is deleting its node.

The node pool is under ``move-bounds``: a drain's removal deletes the node's instance (Compute's deleteInstances),
then moves GKE's autoscaler bounds. A node left only with a web pod its live kubelet cannot stop is removed at the
drain's timeout; GKE takes the deleteInstances and answers 503 to the bounds' move. The node is on its way out: it
stays cordoned while its instance is being deleted (pods scheduled on it would be lost), and the drain ends DONE,
naming the stuck pod, once the instance is gone. When the cloud does not carry the deletion out (the instance runs
again, not being deleted), the drain is given up at its next step, the node uncordoned; a deletion still under way
after the wait ends the drain too, the node left cordoned, and ending the drain for a scale-up is refused while the
cloud deletes the node. Real drainer, GKE actuator and clients, on the fake GKE and Kubernetes APIs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from kubernetes import client as k8s

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.kubernetes_drain import KubernetesNodeDrainer
from agent.drains import NodeDrains
from config.cloud import NodePoolMapping
from kube import KubernetesApi
from models import ActionResult, ActionStatus, AlertEvent, AlertKind, Resize
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

START = datetime(2024, 5, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
BOUNDS = ":setAutoscaling"
UNAVAILABLE = "The service is currently unavailable."


@dataclass
class _Run:
    drains: NodeDrains
    drainer: KubernetesNodeDrainer
    node: str
    key: str
    results: list[ActionResult] = field(default_factory=list)
    alerts: list[AlertEvent] = field(default_factory=list)


def _pool(kube_api: FakeKubeApi, gke_api: FakeGkeApi, clock: SimulatedClock, move_bounds: bool = True) -> list[str]:
    """A pool of three nodes in one zone, under move-bounds (bounds 3-3) or without GKE autoscaling; its nodes."""
    autoscaling = {"enabled": True, "totalMinNodeCount": 3, "totalMaxNodeCount": 3} if move_bounds else None
    gke_api.add_pool("a100", nodes=3, zones=("us-central1-a",), autoscaling=autoscaling)
    names = [i.name for m in gke_api.pools["a100"].migs for i in m.instances]
    for name in names:
        kube_api.put("nodes", objs.node(name, "a100"))
    kube_api.clock = clock.now
    return names


def _drains(
    kube_client: k8s.ApiClient, gke_api: FakeGkeApi, clock: SimulatedClock, move_bounds: bool = True
) -> tuple[GkeNodePoolActuator, KubernetesNodeDrainer, NodeDrains]:
    """The agent's side, freshly built (as after a restart): the pool's actuator, its drainer and the drains."""
    mapping = NodePoolMapping(pool="gpu", node_pool="a100", gke_autoscaling="move-bounds" if move_bounds else "refuse")
    clients = google_clients(gke_api.url)
    gke = GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], clock, drained=True)
    drainer = KubernetesNodeDrainer(KubernetesApi(kube_client), clock, {"gpu": "a100"}, gke)
    return gke, drainer, NodeDrains({"gpu": drainer}, timedelta(0))


def _rig(kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi, clock: SimulatedClock) -> _Run:
    """A move-bounds pool of three nodes (bounds 3-3); the first runs a web pod its kubelet cannot stop, and its drain
    is started."""
    node = _pool(kube_api, gke_api, clock)[0]
    kube_api.put("pods", objs.pod("web", node, labels={"app": "web"}, owner_kind="ReplicaSet"))
    _, drainer, drains = _drains(kube_client, gke_api, clock)
    kube_api.hang_pods(node)  # a live kubelet that cannot stop the container
    started = drains.scale_down(Resize("gpu", 3, 2, "idle", "release"), clock.now(), [node]).results
    return _Run(drains, drainer, node, started[0].key, list(started))


def _step(run: _Run, clock: SimulatedClock) -> list[ActionResult]:
    """A minute later, the tick's observation of the drains in progress (the cluster's record of them) and a step of
    each, as the daemon's tick makes them."""
    clock.advance(MINUTE)
    run.drains.observe({}, clock.now())
    out = run.drains.continue_pending(clock.now())
    run.results += out.results
    run.alerts += [a for a in out.alerts if a.kind is AlertKind.DRAIN_UNFINISHED_PODS]
    return list(out.results)


def _removal_went_out(run: _Run, gke_api: FakeGkeApi, clock: SimulatedClock) -> None:
    """Steps until the step that removes the node past the timeout: GKE takes its deleteInstances and answers 503
    to the bounds' move."""
    gke_api.fail_next(1, 503, UNAVAILABLE, path=BOUNDS)
    for _ in range(40):
        _step(run, clock)
        if gke_api.calls("POST", "/deleteInstances"):
            break
    assert gke_api.calls("POST", "/deleteInstances") == 1
    assert _action(gke_api, run.node) == "DELETING"
    assert clock.now() - START >= timedelta(minutes=15)  # past the drain's timeout


def _action(gke_api: FakeGkeApi, node: str) -> str | None:
    """The instance's current action in its group; None once it is gone from it."""
    return next((i.action for m in gke_api.pools["a100"].migs for i in m.instances if i.name == node), None)


def _cordoned(kube_api: FakeKubeApi, node: str) -> bool:
    return bool((kube_api.get("nodes", node) or {}).get("spec", {}).get("unschedulable"))


def _marked(kube_api: FakeKubeApi, node: str) -> bool:
    return "leadtime.io/drain-key" in ((kube_api.get("nodes", node) or {}).get("metadata", {}).get("annotations") or {})


def _fails_again(gke_api: FakeGkeApi, node: str) -> None:
    """The cloud does not carry the deletion out: the instance runs again, not being deleted, in its group."""
    with gke_api._lock:
        mig = next(m for m in gke_api.pools["a100"].migs if any(i.name == node for i in m.instances))
        next(i for i in mig.instances if i.name == node).action = "NONE"
        mig.target_size += 1


def test_a_removal_whose_bounds_move_fails_past_the_timeout_keeps_the_node_cordoned_and_ends_when_it_is_gone(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(START)
    run = _rig(kube_api, kube_client, gke_api, clock)
    _removal_went_out(run, gke_api, clock)

    removing = run.results[-1]
    assert removing.status is ActionStatus.FAILED and removing.unclear, removing  # transient: it went out
    assert "503" in (removing.error or "")
    assert _cordoned(kube_api, run.node) and _marked(kube_api, run.node)  # not given up: still our drain
    assert [p.key for p in run.drains.pending] == [run.key]

    for _ in range(3):  # the cloud is still deleting it: the drain waits, the node cordoned
        [waiting] = _step(run, clock)
        assert waiting.status is ActionStatus.STARTED, waiting
        assert f"node {run.node} is being deleted" in waiting.detail
        assert _cordoned(kube_api, run.node) and _action(gke_api, run.node) == "DELETING"

    gke_api.advance()  # the instance is deleted; its Node object outlives it a while
    [done] = _step(run, clock)
    assert done.status is ActionStatus.DONE, done
    assert [(p.name, p.node, p.kubelet_gone) for p in done.unfinished] == [("web", run.node, False)]
    assert f"node {run.node} removed with" in done.detail
    assert [a.subject for a in run.alerts] == [f"node {run.node} of gpu removed with pods still terminating"]
    assert run.drains.pending == ()
    assert _cordoned(kube_api, run.node) and not _marked(kube_api, run.node)  # unmarked; the cordon goes with it
    assert gke_api.calls("POST", "/deleteInstances") == 1
    assert [r.status for r in run.results].count(ActionStatus.DONE) == 1
    bounds = gke_api.pools["a100"].spec["autoscaling"]
    assert (bounds["totalMinNodeCount"], bounds["totalMaxNodeCount"]) == (2, 2)  # followed the pool once it was gone


def test_a_removal_the_cloud_does_not_carry_out_ends_the_drain_given_up(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(START)
    run = _rig(kube_api, kube_client, gke_api, clock)
    _removal_went_out(run, gke_api, clock)
    _fails_again(gke_api, run.node)

    [ended] = _step(run, clock)  # the next step: given up at once, within the bound
    assert ended.status is ActionStatus.FAILED and not ended.error, ended  # settled: given up
    assert f"the cloud is not deleting node {run.node}" in ended.detail
    assert ended.detail.endswith(f"node {run.node} uncordoned")
    assert not _cordoned(kube_api, run.node) and not _marked(kube_api, run.node)
    assert run.drains.pending == ()
    assert gke_api.calls("POST", "/deleteInstances") == 1  # not asked again past the timeout
    assert run.alerts == []
    assert _step(run, clock) == []  # nothing left to continue


def test_a_deletion_still_under_way_after_the_wait_is_given_up(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """The wait for the cloud's deletion is bounded (the drain timeout, at least 15 minutes, from the removal):
    an instance the cloud never finishes deleting does not hold the drain for ever."""
    clock = SimulatedClock(START)
    run = _rig(kube_api, kube_client, gke_api, clock)
    _removal_went_out(run, gke_api, clock)
    went_out = clock.now()

    statuses = []
    for _ in range(30):
        statuses += [r.status for r in _step(run, clock)]
        if not run.drains.pending:
            break
    assert statuses == [ActionStatus.STARTED] * 14 + [ActionStatus.FAILED], statuses
    assert clock.now() - went_out == timedelta(minutes=15)
    ended = run.results[-1]
    assert "still being deleted 0:15:00 after its removal was sent" in ended.detail
    assert _cordoned(kube_api, run.node) and not _marked(kube_api, run.node)  # on its way out: left cordoned


def test_ending_the_drain_for_a_scale_up_is_refused_while_the_cloud_deletes_the_node_only(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(START)
    run = _rig(kube_api, kube_client, gke_api, clock)
    _removal_went_out(run, gke_api, clock)

    refused = run.drainer.cancel("gpu", run.node, run.key)
    assert refused.status is ActionStatus.REJECTED, refused
    assert "the cloud is deleting it" in refused.detail
    assert _cordoned(kube_api, run.node) and _marked(kube_api, run.node)
    assert run.drains.take_back("gpu", 1, clock.now()) == []

    _fails_again(gke_api, run.node)
    assert run.drains.take_back("gpu", 1, clock.now()) == [run.node]  # the deletion failed: it serves again
    assert not _cordoned(kube_api, run.node) and not _marked(kube_api, run.node)
    assert run.drains.pending == ()


def test_a_drain_taken_over_while_the_cloud_deletes_its_node_is_not_ended_for_a_scale_up(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(START)
    run = _rig(kube_api, kube_client, gke_api, clock)
    _removal_went_out(run, gke_api, clock)
    assert _cordoned(kube_api, run.node) and _action(gke_api, run.node) == "DELETING"
    _, _, drains = _drains(kube_client, gke_api, clock)  # restarted (or another replica leads): nothing remembered
    clock.advance(timedelta(minutes=1))
    drains.observe({}, clock.now())
    assert [p.node for p in drains.pending] == [run.node]  # taken over from the node's marks
    assert drains.take_back("gpu", 1, clock.now()) == []  # it was uncordoned while its instance was being deleted
    assert _cordoned(kube_api, run.node) and _action(gke_api, run.node) == "DELETING"


def test_a_delete_refused_outright_leaves_the_node_counted_as_draining(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """deleteInstances itself answered 503: nothing was deleted, the group's target keeps the node, so the drain's
    node is still taken out of the pool's ready and target units and counted as draining (counted as removed, the
    cordoned node would be read as serving for as long as the deletes fail)."""
    clock = SimulatedClock(START)
    names = _pool(kube_api, gke_api, clock, move_bounds=False)
    gke, _, drains = _drains(kube_client, gke_api, clock, move_bounds=False)
    drains.scale_down(Resize("gpu", 3, 2, "idle", "release"), clock.now(), [names[0]])
    gke_api.fail_next(1000, 503, "The service is currently unavailable.", path="/deleteInstances")
    seen_states = []
    for _ in range(3):
        clock.advance(timedelta(minutes=1))
        cloud = {s.pool_id: s for s in gke.list_pools()}
        seen, _ = drains.observe(cloud, clock.now())
        seen_states.append(
            (cloud["gpu"].target_units, seen["gpu"].ready_units, seen["gpu"].target_units, seen["gpu"].draining_units)
        )
        drains.continue_pending(clock.now())
    assert gke_api.calls("POST", "/deleteInstances") >= 1  # the removal was asked, and refused
    assert seen_states[1:] == [(3, 2, 2, 1), (3, 2, 2, 1)], seen_states

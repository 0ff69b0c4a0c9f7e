"""The removal that ends a drain, once it went out, is never given up, and the pods it left terminating are told once.

A drain past its timeout, left only with a pod stuck terminating on a live kubelet, removes its node through the GKE
node pool actuator: deleteInstances, then (``move-bounds``) GKE's autoscaler bounds follow the pool. When GKE takes the
deleteInstances and answers 503 to the bounds' move, the node is on its way out: the drain must not be given up (its
node uncordoned, pods landing on a node being deleted). The step raises, the same key continues, finds the instance
being deleted and ends DONE, naming the stuck pod (the drain-unfinished-pods alert, once). Also when that retry's
bounds' move fails again, and when the node's unmarking fails after the removal and the node is gone by the next
step: that step ends DONE as removed by the drain, with the pod. A removal whose own deleteInstances is refused is
still given up at the timeout, its node uncordoned. Real drainer and GKE actuator, on the fake GKE and Kubernetes
APIs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
ZONES = ("us-central1-a",)
BOUNDS = ":setAutoscaling"


class _AfterDelete:
    """The GKE actuator as a drain's remover, calling ``then`` after each deletion it returned."""

    def __init__(self, inner: GkeNodePoolActuator, then: Callable[[], None]) -> None:
        self._inner = inner
        self._then = then

    def delete_nodes(self, pool_id: str, nodes: Sequence[str], key: str) -> ActionResult:
        result = self._inner.delete_nodes(pool_id, nodes, key)
        self._then()
        return result


@dataclass
class _Run:
    drains: NodeDrains
    drainer: KubernetesNodeDrainer
    node: str
    results: list[ActionResult] = field(default_factory=list)
    alerts: list[AlertEvent] = field(default_factory=list)
    uncordoned_while_deleting: list[str] = field(default_factory=list)  # steps after which the node was so


def _rig(
    kube_api: FakeKubeApi,
    kube_client: k8s.ApiClient,
    gke_api: FakeGkeApi,
    clock: SimulatedClock,
    move_bounds: bool,
    after_delete: Callable[[], None] | None = None,
) -> _Run:
    """A pool of three nodes (under ``move_bounds``, GKE autoscaling on, bounds 3-3); the first node runs a web pod
    its kubelet cannot stop, and its drain is started."""
    if move_bounds:
        autoscaling = {"enabled": True, "totalMinNodeCount": 3, "totalMaxNodeCount": 3}
        gke_api.add_pool("a100", nodes=3, zones=ZONES, autoscaling=autoscaling)
    else:
        gke_api.add_pool("a100", nodes=3, zones=ZONES)
    names = [i.name for m in gke_api.pools["a100"].migs for i in m.instances]
    for name in names:
        kube_api.put("nodes", objs.node(name, "a100"))
    node = names[0]
    kube_api.put("pods", objs.pod("web", node, labels={"app": "web"}, owner_kind="ReplicaSet"))
    kube_api.clock = clock.now
    mapping = NodePoolMapping(pool="gpu", node_pool="a100", gke_autoscaling="move-bounds" if move_bounds else "refuse")
    clients = google_clients(gke_api.url)
    gke = GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], clock, drained=True)
    remover = gke if after_delete is None else _AfterDelete(gke, after_delete)
    drainer = KubernetesNodeDrainer(KubernetesApi(kube_client), clock, {"gpu": "a100"}, remover)
    drains = NodeDrains({"gpu": drainer}, timedelta(0))
    kube_api.hang_pods(node)  # a live kubelet that cannot stop the container
    run = _Run(drains, drainer, node)
    run.results += drains.scale_down(Resize("gpu", 3, 2, "idle", "release"), clock.now(), [node]).results
    return run


def _deleting(gke_api: FakeGkeApi, node: str) -> bool:
    return any(i.name == node and i.action == "DELETING" for m in gke_api.pools["a100"].migs for i in m.instances)


def _cordoned(kube_api: FakeKubeApi, node: str) -> bool:
    return bool((kube_api.get("nodes", node) or {}).get("spec", {}).get("unschedulable"))


def _step_until_settled(
    run: _Run, kube_api: FakeKubeApi, gke_api: FakeGkeApi, clock: SimulatedClock, node_goes: bool = False
) -> None:
    """A step a minute until the drain is settled (at most 40). ``node_goes``: the Node object is deleted once the
    instance is being deleted, as the cloud deletes the VM."""
    for minute in range(1, 41):
        clock.set(START + timedelta(minutes=minute))
        out = run.drains.continue_pending(clock.now())
        run.results += out.results
        run.alerts += [a for a in out.alerts if a.kind is AlertKind.DRAIN_UNFINISHED_PODS]
        if _deleting(gke_api, run.node):
            if node_goes and kube_api.get("nodes", run.node) is not None:
                kube_api.delete("nodes", run.node)
            elif kube_api.get("nodes", run.node) is not None and not _cordoned(kube_api, run.node):
                run.uncordoned_while_deleting.append(clock.now().strftime("%H:%M"))
        if not run.drains.pending:
            return


def _unfinished_names(result: ActionResult) -> list[tuple[str, str, bool]]:
    return [(p.name, p.node, p.kubelet_gone) for p in result.unfinished]


def test_bounds_refused_after_delete_accepted_retries_and_ends_done_with_the_alert(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(START)
    run = _rig(kube_api, kube_client, gke_api, clock, move_bounds=True)
    gke_api.fail_next(1, 503, "The service is currently unavailable.", path=BOUNDS)  # the removal's bounds' move
    _step_until_settled(run, kube_api, gke_api, clock)

    failed = [r for r in run.results if r.status is ActionStatus.FAILED]
    assert len(failed) == 1 and failed[0].unclear  # the step that removed it: it went out
    assert "503" in (failed[0].error or "")
    last = run.results[-1]
    assert last.status is ActionStatus.DONE, last
    assert _unfinished_names(last) == [("web", run.node, False)]
    assert f"node {run.node} removed with" in last.detail
    assert [a.subject for a in run.alerts] == [f"node {run.node} of gpu removed with pods still terminating"]
    assert gke_api.calls("POST", "/deleteInstances") == 1
    assert _deleting(gke_api, run.node)
    assert run.uncordoned_while_deleting == []
    assert _cordoned(kube_api, run.node)  # its marks are off, the cordon stays until the VM goes
    assert gke_api.pools["a100"].spec["autoscaling"]["totalMinNodeCount"] == 2  # the bounds followed, on the retry


def test_the_retry_whose_bounds_move_fails_again_is_not_given_up(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """The retry finds the instance being deleted and asks only for the bounds' move, which fails too: its error says
    the removal went out (``maybe_applied``), the drain goes on."""
    clock = SimulatedClock(START)
    run = _rig(kube_api, kube_client, gke_api, clock, move_bounds=True)
    gke_api.fail_next(2, 503, "The service is currently unavailable.", path=BOUNDS)
    _step_until_settled(run, kube_api, gke_api, clock)

    statuses = [r.status for r in run.results]
    assert statuses[-3:] == [ActionStatus.FAILED, ActionStatus.FAILED, ActionStatus.DONE], run.results[-3:]
    assert all(r.unclear for r in run.results[-3:-1])
    assert "not moved" in (run.results[-2].error or "")
    assert _unfinished_names(run.results[-1]) == [("web", run.node, False)]
    assert len(run.alerts) == 1
    assert gke_api.calls("POST", "/deleteInstances") == 1
    assert run.uncordoned_while_deleting == []
    assert _cordoned(kube_api, run.node)


def test_a_drain_whose_removal_went_out_is_not_ended_for_a_scale_up(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(START)
    run = _rig(kube_api, kube_client, gke_api, clock, move_bounds=True)
    gke_api.fail_next(1, 503, "The service is currently unavailable.", path=BOUNDS)
    for minute in range(1, 41):
        clock.set(START + timedelta(minutes=minute))
        if any(r.status is ActionStatus.FAILED for r in run.drains.continue_pending(clock.now()).results):
            break
    assert _deleting(gke_api, run.node)
    ended = run.drainer.cancel("gpu", run.node, run.results[0].key)
    assert ended.status is ActionStatus.REJECTED
    assert "went out" in ended.detail
    assert _cordoned(kube_api, run.node)


def test_a_removal_whose_delete_is_refused_is_still_given_up_at_the_timeout(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(START)
    run = _rig(kube_api, kube_client, gke_api, clock, move_bounds=True)
    gke_api.fail_next(1, 500, "backend error", path="/deleteInstances")
    _step_until_settled(run, kube_api, gke_api, clock)

    last = run.results[-1]
    assert last.status is ActionStatus.FAILED and not last.error, last  # settled: given up
    assert last.detail.startswith("removing the empty node still fails after 0:15:00")
    assert not _deleting(gke_api, run.node)
    assert not _cordoned(kube_api, run.node)
    assert run.alerts == []


def test_unmarking_failed_after_the_removal_then_node_gone_ends_done_with_the_alert(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(START)
    armed: list[bool] = []

    def fail_unmarking() -> None:
        if not armed:  # the PATCH that takes the drain's marks off answers 500, once
            armed.append(True)
            kube_api.fail_next(1, 500, verb="patch", resource="nodes")

    run = _rig(kube_api, kube_client, gke_api, clock, move_bounds=False, after_delete=fail_unmarking)
    _step_until_settled(run, kube_api, gke_api, clock, node_goes=True)

    assert armed
    failed, last = run.results[-2], run.results[-1]
    assert failed.status is ActionStatus.FAILED and failed.unclear
    assert last.status is ActionStatus.DONE, last
    assert "deleted outside this drain" not in last.detail
    assert "its removal by this drain went out" in last.detail
    assert _unfinished_names(last) == [("web", run.node, False)]
    assert [a.subject for a in run.alerts] == [f"node {run.node} of gpu removed with pods still terminating"]
    assert gke_api.calls("POST", "/deleteInstances") == 1

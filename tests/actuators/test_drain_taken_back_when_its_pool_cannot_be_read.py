"""A scale-up takes back an idle node this replica is draining even when one read of its pool fails.

A scale-up first ends the drains of idle nodes (the take-back: they serve again at once) and buys only the rest.
Ending a drain is refused while the cloud may be deleting its node, and a drain whose node's state cannot be read may
be on its way out (e8d7276): one 503 to the instance list refused every take-back, including this replica's own
ordinary drains, which never asked for a removal. The scale-up then bought a GPU node while an idle node was drained
and deleted. A drain this replica started and whose removal it never asked for is now taken back on a failed read;
one whose removal it asked for (deleteInstances answered 503: it may have gone out), or one taken over (its removal
may have been sent by another replica), is not. Real drainer, GKE actuator and clients, on the fake GKE and
Kubernetes APIs, through the executor."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from kubernetes import client as k8s

from actuators.gke_node_pool import GkeNodePoolActuator
from agent.drains import NodeDrains
from agent.executor import execute
from agent.planning import PlannerMemory
from models import (
    AcceleratorFamily,
    ActionResult,
    ActionStatus,
    CapacityPlan,
    CapacityTier,
    PoolKind,
    PoolSpec,
    PoolState,
    Resize,
)
from models.clock import SimulatedClock
from tests.actuators.test_drain_removal_under_way import MINUTE, START, UNAVAILABLE, _cordoned, _drains, _pool
from tests.fakes import kube_objects as objs
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

POOL = PoolSpec(
    "gpu", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 20, 24.0,
    timedelta(minutes=10), ("a",),
)  # fmt: skip
READS = "/listManagedInstances"


def _scale_up_with_one_unread(
    gke: GkeNodePoolActuator, gke_api: FakeGkeApi, drains: NodeDrains, clock: SimulatedClock
) -> tuple[Sequence[ActionResult], PoolState]:
    """The tick's observation, then a scale-up of one unit whose take-back meets one 503 to the instance list (the
    executor's own read of the pool answers); its results and the pool as the cloud reads it after."""
    seen, _ = drains.observe({s.pool_id: s for s in gke.list_pools()}, clock.now())
    planned = seen["gpu"].target_units
    assert seen["gpu"].takeable_units == 1
    listed = gke.list_pools

    def listed_then_one_503() -> Sequence[PoolState]:
        out = listed()
        gke_api.fail_next(1, 503, UNAVAILABLE, path="listManagedInstances")
        return out

    gke.list_pools = listed_then_one_503  # type: ignore[method-assign]
    try:
        plan = CapacityPlan(clock.now(), (Resize("gpu", planned, planned + 1, "demand", "gpu@up"),))
        done = execute(plan, gke, {"gpu": POOL}, PlannerMemory(), clock.now(), drains)
    finally:
        gke.list_pools = listed  # type: ignore[method-assign]
    [cloud] = gke.list_pools()
    return done.results, cloud


def test_an_own_drain_never_removed_is_taken_back_when_the_pool_cannot_be_read(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(START)
    node = _pool(kube_api, gke_api, clock, move_bounds=False)[0]
    kube_api.put("pods", objs.pod("web", node, labels={"app": "web"}, owner_kind="ReplicaSet"))
    kube_api.hang_pods(node)  # the drain waits for its pod: its removal is never asked for
    gke, _, drains = _drains(kube_client, gke_api, clock, move_bounds=False)
    drains.scale_down(Resize("gpu", 3, 2, "idle", "release"), clock.now(), [node])
    clock.advance(MINUTE)
    reads = gke_api.calls("POST", READS)

    results, cloud = _scale_up_with_one_unread(gke, gke_api, drains, clock)

    assert gke_api.calls("POST", READS) > reads + 1  # the take-back's read was asked (and answered 503)
    assert cloud.target_units == 3  # was 4: a node bought
    assert not _cordoned(kube_api, node)  # was drained on, to be deleted
    assert results[-1].taken_back == (node,), results[-1]
    assert drains.pending == ()
    assert gke_api.calls("POST", "/deleteInstances") == 0


def test_an_own_drain_whose_removal_was_asked_for_is_not_taken_back_when_the_pool_cannot_be_read(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """deleteInstances answered 503: the removal may have gone out, so the node may be on its way out."""
    clock = SimulatedClock(START)
    node = _pool(kube_api, gke_api, clock, move_bounds=False)[0]
    gke, _, drains = _drains(kube_client, gke_api, clock, move_bounds=False)
    [started] = drains.scale_down(Resize("gpu", 3, 2, "idle", "release"), clock.now(), [node]).results
    assert started.status is ActionStatus.STARTED  # cordoned and empty: removed at the next step
    clock.advance(MINUTE)
    gke_api.fail_next(1000, 503, UNAVAILABLE, path="/deleteInstances")  # every try
    drains.observe({}, clock.now())
    [failed] = drains.continue_pending(clock.now()).results
    assert failed.status is ActionStatus.FAILED and failed.unclear, failed  # it may have gone out
    assert gke_api.calls("POST", "/deleteInstances") >= 1
    clock.advance(MINUTE)

    results, cloud = _scale_up_with_one_unread(gke, gke_api, drains, clock)

    assert _cordoned(kube_api, node)  # its drain goes on
    assert results[-1].taken_back == ()
    assert [p.node for p in drains.pending] == [node]
    assert cloud.target_units == 4  # the unit is bought instead


def test_a_drain_taken_over_is_not_taken_back_when_the_pool_cannot_be_read(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """Another replica (or this one before a restart) drained the node: its removal may have gone out from there."""
    clock = SimulatedClock(START)
    node = _pool(kube_api, gke_api, clock, move_bounds=False)[0]
    kube_api.put("pods", objs.pod("web", node, labels={"app": "web"}, owner_kind="ReplicaSet"))
    kube_api.hang_pods(node)
    _, _, before = _drains(kube_client, gke_api, clock, move_bounds=False)
    before.scale_down(Resize("gpu", 3, 2, "idle", "release"), clock.now(), [node])
    gke, _, drains = _drains(kube_client, gke_api, clock, move_bounds=False)  # a restart, or another leader
    clock.advance(MINUTE)
    drains.observe({}, clock.now())
    drains.continue_pending(clock.now())  # its first step here: the cloud keeps the node, drained as any drain
    clock.advance(MINUTE)

    results, _ = _scale_up_with_one_unread(gke, gke_api, drains, clock)

    assert _cordoned(kube_api, node)
    assert results[-1].taken_back == ()
    assert [p.node for p in drains.pending] == [node]

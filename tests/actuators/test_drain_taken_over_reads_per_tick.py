"""The reads of the cloud a new leader makes for the drains it takes over stay bounded.

A drain taken over (after a restart, or from another replica) is asked about once: whether the cloud is deleting its
node, or has deleted it (its removal went out before). The agent asks when it takes the drain over, to count the
pool's units (``agent.drains``), and the drainer asks at the drain's first step here, to follow a removal that went
out (``actuators.drain_endings``): each a full read of the pool (its node pool, operations, groups and their
instances). The drain's first step now uses the answer the agent had in the same tick, so each drain taken over costs
one read of the pool, not two. And once a read of the pool fails in a tick (a 429 while the cloud throttles the
project), no other unit of that pool is asked about before the next tick: one failing read per pool per tick, not one
per drain. Real drainer, GKE actuator and clients, on the fake GKE and Kubernetes APIs."""

from __future__ import annotations

from kubernetes import client as k8s

from agent.drains import NodeDrains
from models import Resize
from models.clock import SimulatedClock
from tests.actuators.test_drain_removal_under_way import (
    BOUNDS,
    MINUTE,
    START,
    UNAVAILABLE,
    _action,
    _cordoned,
    _drains,
    _pool,
)
from tests.fakes import kube_objects as objs
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

READS = "/listManagedInstances"  # one per zone (one here) each time the pool's instances are read
THROTTLED = "Rate Limit Exceeded"


def _four_drains_left(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi, clock: SimulatedClock
) -> list[str]:
    """A pool of six nodes (no GKE autoscaling); four of them are drained by a replica that then stops (each waits
    for a web pod its kubelet cannot stop): their drains are left to the next leader. The four nodes."""
    gke_api.add_pool("a100", nodes=6, zones=("us-central1-a",), autoscaling=None)
    names = [i.name for m in gke_api.pools["a100"].migs for i in m.instances]
    for name in names:
        kube_api.put("nodes", objs.node(name, "a100"))
    kube_api.clock = clock.now
    draining = names[:4]
    for i, node in enumerate(draining):
        kube_api.put("pods", objs.pod(f"web-{i}", node, labels={"app": "web"}, owner_kind="ReplicaSet"))
        kube_api.hang_pods(node)
    _, _, before = _drains(kube_client, gke_api, clock, move_bounds=False)
    before.scale_down(Resize("gpu", 6, 2, "idle", "release"), clock.now(), draining)
    return draining


def _reads_per_tick(drains: NodeDrains, gke_api: FakeGkeApi, clock: SimulatedClock) -> tuple[int, int]:
    """A minute later, the tick's observation and its drain steps: the reads of the pool's instances each made."""
    clock.advance(MINUTE)
    before = gke_api.calls("POST", READS)
    drains.observe({}, clock.now())
    observed = gke_api.calls("POST", READS)
    drains.continue_pending(clock.now())
    return observed - before, gke_api.calls("POST", READS) - observed


def test_each_drain_taken_over_is_asked_about_once(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(START)
    draining = _four_drains_left(kube_api, kube_client, gke_api, clock)
    _, _, drains = _drains(kube_client, gke_api, clock, move_bounds=False)  # the new leader

    per_tick = [_reads_per_tick(drains, gke_api, clock) for _ in range(3)]

    assert per_tick == [(4, 0), (0, 0), (0, 0)]  # was [(4, 4), (0, 0), (0, 0)]: asked twice each
    assert sorted(p.node for p in drains.pending) == draining  # taken over, and drained on
    assert all(_cordoned(kube_api, node) for node in draining)


def test_a_throttled_pool_is_read_once_per_tick_however_many_drains_are_taken_over(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(START)
    draining = _four_drains_left(kube_api, kube_client, gke_api, clock)
    _, _, drains = _drains(kube_client, gke_api, clock, move_bounds=False)
    gke_api.fail_next(1000, 429, THROTTLED, path=READS, reason="rateLimitExceeded")

    per_tick = [_reads_per_tick(drains, gke_api, clock) for _ in range(3)]

    assert per_tick == [(1, 0), (1, 0), (1, 0)]  # was [(1, 4), (1, 4), (1, 4)]: one failing read per drain
    assert sorted(p.node for p in drains.pending) == draining  # drained on meanwhile

    with gke_api._lock:
        gke_api._faults.clear()  # the cloud answers again: each drain is asked about once, the next tick
    assert [_reads_per_tick(drains, gke_api, clock) for _ in range(2)] == [(4, 0), (0, 0)]


def test_drains_whose_removal_went_out_read_a_throttled_pool_once_per_tick(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """Two drains of one pool removed their nodes (GKE took the deleteInstances, then answered 503 to the bounds'
    move): each step asks the cloud whether its node is still being deleted. While the pool's reads answer 429, a
    tick reads it once, not once per drain; each drain's step fails for it, to ask again at the next tick."""
    clock = SimulatedClock(START)
    nodes = _pool(kube_api, gke_api, clock)[:2]
    for i, node in enumerate(nodes):
        kube_api.put("pods", objs.pod(f"web-{i}", node, labels={"app": "web"}, owner_kind="ReplicaSet"))
        kube_api.hang_pods(node)
    _, _, drains = _drains(kube_client, gke_api, clock)
    drains.scale_down(Resize("gpu", 3, 1, "idle", "release"), clock.now(), nodes)
    gke_api.fail_next(2, 503, UNAVAILABLE, path=BOUNDS)
    for _ in range(40):
        _reads_per_tick(drains, gke_api, clock)
        if gke_api.calls("POST", "/deleteInstances") == 2:
            break
    assert all(_action(gke_api, node) == "DELETING" for node in nodes)
    assert [_reads_per_tick(drains, gke_api, clock) for _ in range(2)] == [(0, 2), (0, 2)]  # one per drain

    gke_api.fail_next(1000, 429, THROTTLED, path=READS, reason="rateLimitExceeded")
    per_tick = [_reads_per_tick(drains, gke_api, clock) for _ in range(3)]

    assert per_tick == [(0, 1), (0, 1), (0, 1)]  # was [(0, 2), (0, 2), (0, 2)]
    assert sorted(p.node for p in drains.pending) == nodes
    assert all(_cordoned(kube_api, node) for node in nodes)

"""Ending a drain checks its key against the marks on its unit's nodes (``actuators.drain_holders``), read from
Kubernetes alone: never from the cloud, and never in a list of every node of the pool.

For a TPU slice the check read the pool's units through the cloud's ready slices (GKE's nodePools list): while GKE
answered 503, ending a drain raised, and a scale-up's take-back left an idle slice draining toward its deletion while
it bought another. For a GPU node it listed every node of the pool before the uncordon, the one write ending needs:
a failed list lost the take-back, and a node was bought while an idle one was drained. The check now reads a slice's
hosts in the list that names them (by their node-pool label) and a node in one request of its own. Real drainers,
actuators and clients on the fake Kubernetes and GKE APIs."""

from __future__ import annotations

from kubernetes import client as k8s

from actuators.drain_mark_names import DRAIN_ANNOTATION
from agent.executor import execute
from agent.planning import PlannerMemory
from models import ActionStatus, CapacityPlan, Resize
from models.clock import SimulatedClock
from tests.actuators import test_slice_drain
from tests.actuators.test_drain_removal_under_way import MINUTE, START, UNAVAILABLE, _cordoned, _drains, _pool
from tests.actuators.test_drain_taken_back_when_its_pool_cannot_be_read import POOL as GPU
from tests.actuators.test_slice_drain import POOL, Slices
from tests.fakes import kube_objects as objs
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

SLICE = "v5e-1"
OLD, NEW = "rel-1/drain/v5e-1", "rel-2/drain/v5e-1"
slices = test_slice_drain.slices  # three 4-host slices of group v5e on the fake Kubernetes and GKE APIs


def _held_by_a_budget(rig: Slices) -> None:
    """No web pod may be evicted now: a drain of a slice stays in progress, its hosts cordoned and marked."""
    budget = objs.pdb("web", {"app": "web"}, min_available=12, expected_pods=12)
    rig.kube.put("poddisruptionbudgets", budget, group="policy")


def _node_pools_unreadable(rig: Slices) -> None:
    """A minute on (the ready slices the drainers read are read again), GKE answers 503 to every read of the node
    pools."""
    rig.clock.advance(MINUTE)
    rig.gke.fail_next(100_000, 503, UNAVAILABLE, path="/nodePools", method="GET")


def _keys(rig: Slices) -> set[str | None]:
    return {
        ((rig.kube.get("nodes", host) or {}).get("metadata", {}).get("annotations") or {}).get(DRAIN_ANNOTATION)
        for host in rig.hosts(SLICE)
    }


def test_a_slice_drain_started_here_is_ended_while_gke_cannot_read_its_node_pools(slices: Slices) -> None:
    rig = slices
    _held_by_a_budget(rig)
    assert rig.drainer.drain(POOL, SLICE, OLD).status is ActionStatus.STARTED
    assert all(rig.cordoned(host) for host in rig.hosts(SLICE))
    _node_pools_unreadable(rig)
    lists, reads = rig.kube.calls("list", "nodes"), rig.gke.calls("GET", "/nodePools")

    ended = rig.drainer.cancel(POOL, SLICE, OLD)  # raised after ~20 s: the key check read the ready slices first

    assert ended.status is ActionStatus.DONE, ended
    assert not any(rig.cordoned(host) for host in rig.hosts(SLICE))
    assert _keys(rig) == {None}
    assert rig.kube.calls("list", "nodes") == lists + 1  # the slice's hosts, listed once as before the check
    assert rig.gke.calls("GET", "/nodePools") == reads  # the cloud is not asked


def test_a_slice_drain_another_replica_started_since_is_not_ended_while_gke_cannot_be_read(slices: Slices) -> None:
    rig = slices
    _held_by_a_budget(rig)
    assert rig.drainer.drain(POOL, SLICE, OLD).status is ActionStatus.STARTED
    for host in rig.hosts(SLICE):  # a person ends that drain (kubectl uncordon)
        rig.api.nodes.patch(host, {"spec": {"unschedulable": False}})
    other = rig.new_drainer()  # another replica, leading since
    assert SLICE not in other.draining_nodes(POOL)  # the ended drain's marks are taken off when read
    assert other.drain(POOL, SLICE, NEW).status is ActionStatus.STARTED
    _node_pools_unreadable(rig)
    reads = rig.gke.calls("GET", "/nodePools")

    refused = rig.drainer.cancel(POOL, SLICE, OLD)  # raised after ~20 s: the key check read the ready slices first

    assert refused.status is ActionStatus.REJECTED, refused
    assert refused.detail.startswith(f"not ended: slice {SLICE} carries the mark of another drain ")
    assert f"{DRAIN_ANNOTATION}={NEW} on {', '.join(rig.hosts(SLICE))}" in refused.detail
    assert all(rig.cordoned(host) for host in rig.hosts(SLICE)) and _keys(rig) == {NEW}
    assert rig.gke.calls("GET", "/nodePools") == reads


def test_a_scale_up_takes_back_an_own_node_drain_while_the_pools_nodes_cannot_be_listed(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """The take-back's key check reads the node alone: a list of the pool's nodes that fails does not keep the drain
    from being ended, and no node is bought."""
    clock = SimulatedClock(START)
    node = _pool(kube_api, gke_api, clock, move_bounds=False)[0]
    kube_api.put("pods", objs.pod("web", node, labels={"app": "web"}, owner_kind="ReplicaSet"))
    kube_api.hang_pods(node)  # the drain waits for its pod: in progress, its removal never asked for
    gke, _, drains = _drains(kube_client, gke_api, clock, move_bounds=False)
    drains.scale_down(Resize("gpu", 3, 2, "idle", "release"), clock.now(), [node])
    assert _cordoned(kube_api, node)
    clock.advance(MINUTE)
    seen, _ = drains.observe({s.pool_id: s for s in gke.list_pools()}, clock.now())
    planned = seen["gpu"].target_units
    assert seen["gpu"].takeable_units == 1
    kube_api.fail_next(100_000, 503, verb="list", resource="nodes")  # every list of nodes, from here on
    lists = kube_api.calls("list", "nodes")

    plan = CapacityPlan(clock.now(), (Resize("gpu", planned, planned + 1, "demand", "gpu@up"),))
    done = execute(plan, gke, {"gpu": GPU}, PlannerMemory(), clock.now(), drains)

    assert done.results[-1].taken_back == (node,), done.results  # was (): "could not be ended, it goes on"
    assert not _cordoned(kube_api, node)
    [cloud] = gke.list_pools()
    assert cloud.target_units == 3  # was 4: a node bought while the idle one was drained
    assert drains.pending == ()
    assert kube_api.calls("list", "nodes") == lists  # no list asked
    assert gke_api.calls("POST", "/deleteInstances") == 0

"""KubernetesNodeDrainer on the fake Kubernetes API: the API calls a drain and a survey make. Only those its RBAC role
grants; a large pool's pods listed once (in pages) and shared across pools and the executor's re-checks within a tick,
never for a node after an eviction."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kubernetes import client as k8s

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.kubernetes_drain import KubernetesNodeDrainer
from agent.drains import NodeDrains
from agent.executor import execute
from agent.planning import PlannerMemory
from config.cloud import NodePoolMapping
from kube import KubernetesApi
from models import (
    AcceleratorFamily,
    ActionStatus,
    CapacityPlan,
    CapacityTier,
    PoolKind,
    PoolSpec,
    Resize,
)
from models.clock import SimulatedClock
from tests.actuators import kubernetes_drain_rig as rig
from tests.actuators.kubernetes_drain_rig import CLUSTER, JOB, Cluster
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi, RequestRecord

cluster = rig.cluster  # the fake Kubernetes and GKE APIs, a pool "a" of three nodes


def test_the_drainer_uses_only_the_api_calls_its_rbac_role_grants(cluster: Cluster) -> None:
    cluster.drainer.idle_nodes("a", timedelta(0))
    cluster.drainer.drain("a", cluster.nodes[0], "d")
    used = {(r.verb, r.api_group, r.resource, r.subresource) for r in cluster.kube.requests}
    assert used <= {
        ("list", "", "nodes", ""),
        ("patch", "", "nodes", ""),
        ("list", "", "pods", ""),
        ("create", "", "pods", "eviction"),
    }
    assert (
        RequestRecord("create", "", "pods", "eviction", "default", f"web-{cluster.nodes[0]}") in cluster.kube.requests
    )


def _grow(c: Cluster, count: int) -> list[str]:
    """``count`` more nodes of the pool, each running a web pod (nodes the Kubernetes API lists by the pool label)."""
    added = [f"extra-{len(c.nodes) + i}" for i in range(count)]
    for name in added:
        c.kube.put("nodes", objs.node(name, "a100"))
        c.kube.put("pods", objs.pod(f"web-{name}", name, labels={"app": "web"}, owner_kind="ReplicaSet"))
    c.nodes.extend(added)
    return added


def test_a_survey_lists_the_pods_of_a_large_pool_once_and_of_a_small_one_per_node(cluster: Cluster) -> None:
    """3 nodes: one list each; 12 and then 24: one list of the cluster's pods, grouped by node, where it was one list
    per node; pods on another pool's node or finished ones do not count."""
    before = cluster.kube.calls("list", "pods")
    assert cluster.drainer.idle_nodes("a", timedelta(0)) == sorted(cluster.nodes)
    assert cluster.kube.calls("list", "pods") - before == 3

    _grow(cluster, 9)
    cluster.kube.put("nodes", objs.node("gke-ml-cpu-0", "cpu"))
    cluster.kube.put("pods", objs.pod("train-other", "gke-ml-cpu-0", accelerators=8, owner_kind="Job"))
    cluster.kube.put("pods", objs.pod("train-done", "extra-5", accelerators=8, owner_kind="Job", phase="Succeeded"))
    cluster.kube.put("pods", objs.pod("train", "extra-7", accelerators=8, owner_kind="Job"))
    for size in (12, 24):
        before = cluster.kube.calls("list", "pods")
        idle = cluster.drainer.idle_nodes("a", timedelta(0))
        assert cluster.kube.calls("list", "pods") - before == 1
        assert len(cluster.nodes) == size
        assert set(idle) == set(cluster.nodes) - {"extra-7"}
        _grow(cluster, 12)


def test_the_pods_of_many_nodes_are_read_in_pages(cluster: Cluster) -> None:
    """One list in pages of the cluster's unfinished pods bound to a node: the same pods as one list per node."""
    cluster.kube.put("pods", objs.pod("done", cluster.nodes[1], owner_kind="Job", phase="Failed"))
    cluster.kube.put("pods", objs.pod("pending", None, owner_kind="Job"))
    before = cluster.kube.calls("list", "pods")
    by_node = cluster.api.pods.on_nodes([*cluster.nodes, "gone"], page_size=2)
    assert cluster.kube.calls("list", "pods") - before == 3  # 6 pods bound to a node and not finished, 2 a page
    one_by_one = {node: cluster.api.pods.on_node(node) for node in cluster.nodes}
    assert {node: sorted(p.metadata.name for p in pods) for node, pods in by_node.items()} == {
        **{
            node: sorted(p.metadata.name for p in pods if p.status.phase != "Failed")
            for node, pods in one_by_one.items()
        },
        "gone": [],
    }
    assert by_node[cluster.nodes[0]][0].metadata.owner_references[0].kind in ("DaemonSet", "ReplicaSet")


def _gpu_pool(pool_id: str) -> PoolSpec:
    return PoolSpec(pool_id, PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 8, 24.0,
                    timedelta(minutes=10), ("a",))  # fmt: skip


def test_a_tick_over_five_pools_of_eight_nodes_lists_the_clusters_pods_once(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """5 pools of 8 nodes, one idle node released from each: the observation of every pool and the executor's idle
    re-checks share one list of the cluster's pods, where each made its own (10 lists of every pod in the cluster);
    each drain of one node lists that node's pods after cordoning it and after evicting them. The next tick lists
    them once again, and its drain steps, the nodes cordoned, list each node's pods, and again before removing it.
    Only the very first tick lists them once per pool, as it learns which nodes to keep from a list."""
    pools = {f"pool-{i}": f"gpu-{i}" for i in range(5)}
    for node_pool in pools.values():
        gke_api.add_pool(node_pool, nodes=8)
        for i, instance in enumerate(i.name for m in gke_api.pools[node_pool].migs for i in m.instances):
            kube_api.put("nodes", objs.node(instance, node_pool))
            kube_api.put("pods", objs.pod(f"web-{instance}", instance, labels={"app": "web"}, owner_kind="ReplicaSet"))
            if i:  # the first node of each pool is idle, the others train
                kube_api.put("pods", objs.pod(f"train-{instance}", instance, accelerators=8, **JOB))
    clock = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    kube_api.clock = clock.now
    clients = google_clients(gke_api.url)
    mappings = [NodePoolMapping(pool=pool, node_pool=node_pool) for pool, node_pool in pools.items()]
    actuator = GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, mappings, clock)
    drainer = KubernetesNodeDrainer(KubernetesApi(kube_client), clock, pools, actuator, timedelta(minutes=15))
    drains = NodeDrains(dict.fromkeys(pools, drainer), timedelta(minutes=10))
    specs = {pool: _gpu_pool(pool) for pool in pools}
    memory = PlannerMemory()

    def tick(release: bool) -> tuple[int, list[ActionStatus]]:
        nonlocal memory
        before = kube_api.calls("list", "pods")
        now = clock.now()
        seen, _ = drains.observe({s.pool_id: s for s in actuator.list_pools()}, now)
        resizes = tuple(Resize(pool, 8, 7, "idle", f"{pool}@{now.isoformat()}->7") for pool in pools if release)
        done = execute(CapacityPlan(now, resizes), actuator, specs, memory, now, drains)
        memory = done.memory
        assert all(seen[pool].idle_units == 1 for pool in pools) or not release
        return kube_api.calls("list", "pods") - before, [r.status for r in done.results]

    assert tick(release=False)[0] == 5  # the first observation learns each pool's nodes: one list per pool
    clock.advance(timedelta(minutes=10))
    lists, statuses = tick(release=True)
    assert statuses == [ActionStatus.STARTED] * 5  # the evicted web pods are terminating
    assert lists == 1 + 5 * 2
    clock.advance(timedelta(minutes=1))
    lists, statuses = tick(release=False)
    assert statuses == [ActionStatus.DONE] * 5  # their grace period is over: each node empty and removed
    assert lists == 1 + 5 * 2  # each node's pods read again before it is removed


def test_a_list_of_the_clusters_pods_is_shared_for_seconds_and_not_for_a_node_after_an_eviction(
    cluster: Cluster,
) -> None:
    pods, nodes = cluster.api.pods, cluster.nodes

    def lists() -> int:
        return cluster.kube.calls("list", "pods")

    def names(by_node: dict[str, list[k8s.V1Pod]], node: str) -> list[str]:
        return sorted(p.metadata.name for p in by_node[node])

    pods.on_nodes(nodes, now=100.0)
    cluster.kube.put("pods", objs.pod("late", nodes[0], owner_kind="Job"))
    before = lists()
    shared = pods.on_nodes(nodes[:2], now=105.0)
    assert lists() == before and "late" not in names(shared, nodes[0])  # the list read 5 s before
    pods.evict(f"web-{nodes[1]}", "default")
    after = pods.on_nodes(nodes[:2], now=105.0)  # its node is no longer answered for: read again
    assert lists() == before + 1 and "late" in names(after, nodes[0])
    [web] = [p for p in after[nodes[1]] if p.metadata.name == f"web-{nodes[1]}"]
    assert web.metadata.deletion_timestamp is not None  # terminating, as the drain must see it
    asked_again: list[tuple[list[str], float | None, bool]] = [
        (nodes, 115.0, False),  # 10 s on: read again
        (nodes, 115.0, True),
        ([*nodes, "gke-new"], 115.0, False),  # a node the list does not hold
        (nodes, None, False),  # no time: read, not shared
    ]
    for asked, now, fresh in asked_again:
        before = lists()
        pods.on_nodes(asked, now=now, fresh=fresh)
        assert lists() == before + 1

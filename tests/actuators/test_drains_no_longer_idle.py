"""A release of idle units evicts no accelerator work: the agent finds a node idle on a list of pods the tick's
survey shared, and the scheduler may bind a pod to it before the drain cordons it. The drainer reads the pods
afresh once the node is cordoned, and a drain that is not forced then uncordons the node and is rejected, evicting
nothing; the node is released again once it is idle for the window anew. A forced drain (a budget's hard stop)
marks its nodes, so an agent that takes it over still evicts busy pods; a drain taken over unmarked does not. The
same holds for a TPU slice whose host was given work. All on the local Kubernetes API, removing through the local
GKE and Compute Engine APIs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client as k8s

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.gke_tpu_slices import GkeTpuSliceActuator
from actuators.kubernetes_drain import DRAIN_ANNOTATION, FORCED_ANNOTATION, KubernetesNodeDrainer
from actuators.slice_drain import KubernetesSliceDrainer
from agent.drains import NodeDrains
from config.cloud import NodePoolMapping
from kube import KubernetesApi
from models import ActionStatus, PoolState, Resize
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER as SLICE_CLUSTER
from tests.contract.harnesses import SLICES
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

CLUSTER = "projects/test-project/locations/us-central1/clusters/ml"
WINDOW = timedelta(minutes=10)
TRAIN = {"job": "train"}


@dataclass
class Pool:
    """Six nodes of GKE node pool a100 (more than a drain step lists one by one: the tick shares one pod list),
    each running a web pod (a ReplicaSet's) and a DaemonSet's."""

    kube: FakeKubeApi
    gke: FakeGkeApi
    clock: SimulatedClock
    api: KubernetesApi
    nodes: list[str]

    def drainer(self) -> KubernetesNodeDrainer:
        """A drainer as a (re)started agent builds it: nothing remembered."""
        clients = google_clients(self.gke.url)
        mapping = [NodePoolMapping(pool="a", node_pool="a100")]
        actuator = GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, mapping, self.clock)
        return KubernetesNodeDrainer(self.api, self.clock, {"a": "a100"}, actuator)

    def observe(self, drains: NodeDrains) -> PoolState:
        size = len(self.nodes) - self.gke.calls("POST", "deleteInstances")
        seen, _ = drains.observe({"a": PoolState("a", self.clock.now(), size, size)}, self.clock.now())
        return seen["a"]

    def evictions(self) -> int:
        return self.kube.calls("create", "pods", "eviction")

    def marks(self, node: str) -> tuple[bool, dict[str, str]]:
        found = self.kube.get("nodes", node)
        assert found is not None
        annotations = found["metadata"].get("annotations") or {}
        ours = {k: v for k, v in annotations.items() if k in (DRAIN_ANNOTATION, FORCED_ANNOTATION)}
        return bool(found["spec"].get("unschedulable")), ours

    def running(self, name: str) -> bool:
        """The pod is there and was never evicted (not terminating)."""
        pod = self.kube.get("pods", name, "default")
        return pod is not None and not pod["metadata"].get("deletionTimestamp")


@pytest.fixture
def pool(kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi) -> Pool:
    gke_api.add_pool("a100", nodes=6)
    nodes = [i.name for m in gke_api.pools["a100"].migs for i in m.instances]
    for name in nodes:
        kube_api.put("nodes", objs.node(name, "a100"))
        kube_api.put("pods", objs.pod(f"logs-{name}", name, namespace="kube-system", owner_kind="DaemonSet"))
        kube_api.put("pods", objs.pod(f"web-{name}", name, labels={"app": "web"}, owner_kind="ReplicaSet"))
    clock = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    kube_api.clock = clock.now  # evicted pods finish terminating as the test's clock passes their grace period
    return Pool(kube_api, gke_api, clock, KubernetesApi(kube_client), nodes)


def _idle_for_the_window(pool: Pool) -> NodeDrains:
    drains = NodeDrains({"a": pool.drainer()}, WINDOW)
    pool.observe(drains)
    pool.clock.advance(WINDOW + timedelta(minutes=1))
    assert pool.observe(drains).idle_units == 6
    return drains


def test_an_idle_release_evicts_nothing_from_a_node_given_work_after_the_idle_check(pool: Pool) -> None:
    drains = _idle_for_the_window(pool)  # the tick's observation: every node idle, on one shared pod list
    victim = pool.nodes[0]
    # seconds later, before the executor acts, the scheduler binds a training pod (1 GPU) to the chosen node
    pool.kube.put("pods", objs.pod("train-0", victim, accelerators=1, owner_kind="Job"))

    out = drains.scale_down(Resize("a", 6, 5, "idle for 10m", "r1"), pool.clock.now(), [victim])

    detail = f"no longer idle: default/train-0 started on it; node {victim} uncordoned"
    assert [(r.status, r.detail) for r in out.results] == [(ActionStatus.REJECTED, detail)]
    assert pool.evictions() == 0
    assert pool.running("train-0") and pool.running(f"web-{victim}")
    assert pool.marks(victim) == (False, {})  # uncordoned, unmarked
    assert pool.gke.calls("POST", "deleteInstances") == 0
    assert drains.pending == ()


def test_a_node_whose_drain_found_it_busy_is_released_once_idle_for_the_window_anew(pool: Pool) -> None:
    drains = _idle_for_the_window(pool)
    victim = pool.nodes[0]
    pool.kube.put("pods", objs.pod("train-0", victim, accelerators=1, owner_kind="Job"))
    refused = drains.scale_down(Resize("a", 6, 5, "idle", "r1"), pool.clock.now(), [victim])
    assert [r.status for r in refused.results] == [ActionStatus.REJECTED]
    pool.clock.advance(timedelta(minutes=1))  # the next tick
    assert victim not in pool.observe(drains).idle_nodes  # busy

    pool.clock.advance(timedelta(minutes=4))
    pool.kube.put("pods", objs.pod("train-0", victim, accelerators=1, owner_kind="Job", phase="Succeeded"))
    assert victim not in pool.observe(drains).idle_nodes  # idle again, but held after its rejected drain

    pool.clock.advance(timedelta(minutes=7))  # the hold is over; idle for 7 minutes only, since the job ended
    assert victim in pool.observe(drains).idle_nodes
    early = drains.scale_down(Resize("a", 6, 5, "idle", "r2"), pool.clock.now(), [victim])
    assert [r.status for r in early.results] == [ActionStatus.REJECTED]
    assert "no longer idle for 10m" in early.results[0].detail
    assert pool.marks(victim) == (False, {}) and pool.evictions() == 0

    pool.clock.advance(timedelta(minutes=3))  # idle for the window since the job ended
    pool.observe(drains)
    started = drains.scale_down(Resize("a", 6, 5, "idle", "r3"), pool.clock.now(), [victim])
    assert [r.status for r in started.results] == [ActionStatus.STARTED]  # its web pod shuts down first
    pool.clock.advance(timedelta(minutes=1))
    pool.observe(drains)
    assert [r.status for r in drains.continue_pending(pool.clock.now()).results] == [ActionStatus.DONE]
    assert pool.gke.calls("POST", "deleteInstances") == 1


def test_a_forced_drain_taken_over_by_a_new_leader_still_evicts_busy_pods(pool: Pool) -> None:
    for node in pool.nodes:  # every node runs a training job: a budget's hard stop has to take a busy one
        pool.kube.put("pods", objs.pod(f"train-{node}", node, accelerators=8, labels=TRAIN, owner_kind="Job"))
    pool.kube.put("poddisruptionbudgets", objs.pdb("train", TRAIN, min_available=6), group="policy")
    drains = NodeDrains({"a": pool.drainer()}, WINDOW)
    pool.observe(drains)
    busy = pool.nodes[2]
    hard_stop = Resize("a", 6, 5, "budget hard stop", "r1", forced=True)
    out = drains.scale_down(hard_stop, pool.clock.now(), [busy])
    assert [r.status for r in out.results] == [ActionStatus.STARTED]  # the disruption budget says not now
    key = f"r1/drain/{busy}"
    assert pool.marks(busy) == (True, {DRAIN_ANNOTATION: key, FORCED_ANNOTATION: key})
    assert pool.running(f"train-{busy}")

    leader = NodeDrains({"a": pool.drainer()}, WINDOW)  # a newly elected agent: nothing remembered
    pool.clock.advance(timedelta(minutes=1))
    pool.observe(leader)
    assert [(p.node, p.forced) for p in leader.pending] == [(busy, False)]  # it cannot tell from its memory
    waiting = leader.continue_pending(pool.clock.now())
    assert [r.status for r in waiting.results] == [ActionStatus.STARTED]  # the node's mark says forced
    pool.kube.put("poddisruptionbudgets", objs.pdb("train", TRAIN, min_available=5), group="policy")
    pool.clock.advance(timedelta(minutes=1))
    pool.observe(leader)
    evicted = leader.continue_pending(pool.clock.now())
    assert [r.status for r in evicted.results] == [ActionStatus.STARTED]  # shutting down
    assert not pool.running(f"train-{busy}")
    pool.clock.advance(timedelta(minutes=1))
    pool.observe(leader)
    assert [r.status for r in leader.continue_pending(pool.clock.now()).results] == [ActionStatus.DONE]
    assert pool.gke.calls("POST", "deleteInstances") == 1


def test_an_idle_release_taken_over_before_its_check_evicts_nothing(pool: Pool) -> None:
    """The agent that started the drain cordoned and marked the node, then stopped (a restart, a lost lease) before
    it read the node's pods; a pod bound just before the cordon is there. The new leader's first step checks."""
    victim = pool.nodes[1]
    cordoned = objs.node(victim, "a100", unschedulable=True)
    cordoned["metadata"]["annotations"] = {DRAIN_ANNOTATION: f"r1/drain/{victim}"}
    pool.kube.put("nodes", cordoned)
    pool.kube.put("pods", objs.pod("train-0", victim, accelerators=1, owner_kind="Job"))

    leader = NodeDrains({"a": pool.drainer()}, WINDOW)
    pool.observe(leader)
    assert [p.node for p in leader.pending] == [victim]
    out = leader.continue_pending(pool.clock.now())

    detail = f"no longer idle: default/train-0 started on it; node {victim} uncordoned"
    assert [(r.status, r.detail) for r in out.results] == [(ActionStatus.REJECTED, detail)]
    assert pool.evictions() == 0 and pool.running("train-0")
    assert pool.marks(victim) == (False, {})
    assert pool.gke.calls("POST", "deleteInstances") == 0


def test_an_idle_slice_whose_host_was_given_work_after_the_idle_check_is_left_alone(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    kube_api.clock = clock.now
    api = KubernetesApi(kube_client)
    actuator = GkeTpuSliceActuator(google_clients(gke_api.url).gke, SLICE_CLUSTER, [SLICES], clock)
    drainer = KubernetesSliceDrainer(api, clock, actuator)
    hosts = {f"v5e-{i}": [f"gke-ml-v5e-{i}-host-{h}" for h in range(SLICES.hosts_per_slice)] for i in range(2)}
    for name, names in hosts.items():
        gke_api.add_pool(name, nodes=SLICES.hosts_per_slice)
        for host in names:
            kube_api.put("nodes", objs.node(host, name, accelerators=4, resource=objs.TPU_RESOURCE))
            kube_api.put("pods", objs.pod(f"web-{host}", host, labels={"app": "web"}, owner_kind="ReplicaSet"))
    drains = NodeDrains({SLICES.pool: drainer}, WINDOW)
    (state,) = actuator.list_pools()
    drains.observe({SLICES.pool: state}, clock.now())
    clock.advance(WINDOW)
    seen, _ = drains.observe({SLICES.pool: state}, clock.now())
    assert seen[SLICES.pool].idle_nodes == ("v5e-0", "v5e-1")
    # after the idle check, a multi-host job's pod lands on one host of the slice the release names
    last = hosts["v5e-1"][3]
    kube_api.put("pods", objs.pod("train-0", last, accelerators=4, resource=objs.TPU_RESOURCE, owner_kind="Job"))

    out = drains.scale_down(Resize(SLICES.pool, 2, 1, "idle", "r1"), clock.now(), ["v5e-1"])

    detail = "no longer idle: default/train-0 started on it; slice v5e-1 uncordoned"
    assert [(r.status, r.detail) for r in out.results] == [(ActionStatus.REJECTED, detail)]
    assert kube_api.calls("create", "pods", "eviction") == 0
    for host in hosts["v5e-1"]:
        found = kube_api.get("nodes", host)
        assert found is not None and not found["spec"].get("unschedulable")
        assert DRAIN_ANNOTATION not in (found["metadata"].get("annotations") or {})
        assert kube_api.get("pods", f"web-{host}", "default") is not None
    assert gke_api.calls("DELETE", "/nodePools/") == 0

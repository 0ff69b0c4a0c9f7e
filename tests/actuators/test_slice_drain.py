"""KubernetesSliceDrainer on the fake Kubernetes API, deleting slices through GkeTpuSliceActuator on the fake GKE
API, driven by the agent's drains as the daemon does: a slice idle for the hold is drained and exactly its node pool
deleted; one TPU pod on one host keeps the whole slice; a disruption budget holds the drain; a new leader continues
it from the nodes' annotations; a budget's hard stop takes idle slices before busy ones."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client as k8s

from actuators.gke_tpu_slices import GkeTpuSliceActuator
from actuators.kubernetes_drain import DRAIN_ANNOTATION
from actuators.slice_drain import KubernetesSliceDrainer
from agent.drains import NodeDrains
from config.cloud import TpuSliceGroupMapping
from kube import KubernetesApi
from models import ActionStatus, PermanentActuatorError, Resize
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER, SLICES
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

POOL = SLICES.pool
HOLD = timedelta(minutes=30)


@dataclass
class Slices:
    kube: FakeKubeApi
    gke: FakeGkeApi
    clock: SimulatedClock
    api: KubernetesApi
    actuator: GkeTpuSliceActuator
    drainer: KubernetesSliceDrainer

    def hosts(self, slice_name: str) -> list[str]:
        return [f"gke-ml-{slice_name}-host-{i}" for i in range(SLICES.hosts_per_slice)]

    def new_drainer(self) -> KubernetesSliceDrainer:
        """What a restarted or newly elected agent builds: nothing remembered."""
        actuator = GkeTpuSliceActuator(google_clients(self.gke.url).gke, CLUSTER, [SLICES], self.clock)
        return KubernetesSliceDrainer(self.api, self.clock, actuator)

    def cordoned(self, node: str) -> bool:
        found = self.kube.get("nodes", node)
        assert found is not None
        return bool(found["spec"].get("unschedulable"))

    def statuses(self) -> dict[str, str]:
        return {name: pool.status for name, pool in self.gke.pools.items()}


@pytest.fixture
def slices(kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi) -> Slices:
    """Three running 4-host slices of group v5e, each host running a web pod (a ReplicaSet's) and a DaemonSet's."""
    clock = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    kube_api.clock = clock.now  # evicted pods finish terminating as the clock passes their grace period
    api = KubernetesApi(kube_client)
    actuator = GkeTpuSliceActuator(google_clients(gke_api.url).gke, CLUSTER, [SLICES], clock)
    rig = Slices(kube_api, gke_api, clock, api, actuator, KubernetesSliceDrainer(api, clock, actuator))
    for i in range(3):
        name = f"v5e-{i}"
        gke_api.add_pool(name, nodes=SLICES.hosts_per_slice)
        for host in rig.hosts(name):
            kube_api.put("nodes", objs.node(host, name, accelerators=4, resource=objs.TPU_RESOURCE))
            kube_api.put("pods", objs.pod(f"logs-{host}", host, namespace="kube-system", owner_kind="DaemonSet"))
            kube_api.put("pods", objs.pod(f"web-{host}", host, labels={"app": "web"}, owner_kind="ReplicaSet"))
    kube_api.put("nodes", objs.node("gke-ml-cpu-0", "cpu"))  # another node pool's node: never a slice's
    return rig


def _train(rig: Slices, slice_name: str, host: int = 3) -> None:
    """A multi-host job's pod on one host of the slice."""
    node = rig.hosts(slice_name)[host]
    rig.kube.put("pods", objs.pod(f"train-{node}", node, accelerators=4, resource=objs.TPU_RESOURCE, owner_kind="Job"))


def _run_until_settled(rig: Slices, drains: NodeDrains, ticks: int = 5) -> list[ActionStatus]:
    statuses = []
    for _ in range(ticks):
        rig.clock.advance(timedelta(minutes=1))
        step = drains.continue_pending(rig.clock.now())
        statuses += [r.status for r in step.results]
        if not drains.pending:
            break
    return statuses


def test_an_idle_slice_is_released_after_the_hold_and_exactly_its_node_pool_deleted(slices: Slices) -> None:
    _train(slices, "v5e-0")
    _train(slices, "v5e-2", host=0)
    drains = NodeDrains({POOL: slices.drainer}, HOLD)
    (state,) = slices.actuator.list_pools()
    seen, alerts = drains.observe({POOL: state}, slices.clock.now())
    assert alerts == ()
    assert (seen[POOL].idle_units, seen[POOL].idle_nodes) == (1, ("v5e-1",))  # units are slices
    assert slices.drainer.idle_nodes(POOL, HOLD) == []  # not idle for the hold yet

    slices.clock.advance(HOLD)
    seen, _ = drains.observe({POOL: state}, slices.clock.now())
    assert seen[POOL].idle_since == (slices.clock.now() - HOLD,)
    resize = Resize(POOL, from_units=3, to_units=2, reason="idle for the hold", key="r1")
    started = drains.scale_down(resize, slices.clock.now(), ["v5e-1"])
    assert [r.status for r in started.results] == [ActionStatus.STARTED]  # its web pods shut down first
    assert all(slices.cordoned(host) for host in slices.hosts("v5e-1"))
    assert not any(slices.cordoned(host) for host in slices.hosts("v5e-0") + slices.hosts("v5e-2"))
    assert slices.gke.calls("DELETE", "/nodePools/") == 0

    assert _run_until_settled(slices, drains) == [ActionStatus.DONE]
    assert slices.gke.calls("DELETE", "/nodePools/") == 1
    assert slices.statuses() == {"v5e-0": "RUNNING", "v5e-1": "STOPPING", "v5e-2": "RUNNING"}
    for host in slices.hosts("v5e-1"):
        assert slices.kube.get("pods", f"web-{host}", "default") is None
    assert slices.kube.get("pods", f"train-{slices.hosts('v5e-0')[3]}", "default") is not None
    (after,) = slices.actuator.list_pools()
    assert (after.ready_units, after.target_units) == (2, 2)
    assert slices.drainer.draining_nodes(POOL) == {}


def test_a_tpu_pod_on_one_host_keeps_the_whole_slice_busy(slices: Slices) -> None:
    _train(slices, "v5e-1", host=2)
    slices.drainer.idle_nodes(POOL, timedelta(0))
    slices.clock.advance(HOLD)
    assert slices.drainer.idle_nodes(POOL, HOLD) == ["v5e-0", "v5e-2"]
    slices.kube.delete("pods", f"train-{slices.hosts('v5e-1')[2]}", "default")  # the job ends
    slices.clock.advance(timedelta(minutes=1))  # the next tick reads the pods again: idle from now
    assert slices.drainer.idle_nodes(POOL, HOLD) == ["v5e-0", "v5e-2"]
    assert slices.drainer.idle_nodes(POOL, timedelta(0)) == ["v5e-0", "v5e-2", "v5e-1"]


def test_a_slice_being_provisioned_is_not_offered_as_idle_nor_a_running_one_without_nodes(slices: Slices) -> None:
    """A running slice without nodes serves nothing: it is counted in flight, then failed, never a ready slice
    (tests/test_actuators_slices_not_serving.py)."""
    slices.actuator.resize(POOL, 4, "up")  # v5e-3 provisioning: no node registered yet
    slices.gke.add_pool("v5e-4", nodes=SLICES.hosts_per_slice)  # running, none of its nodes in the cluster
    assert slices.drainer.idle_nodes(POOL, timedelta(0)) == ["v5e-0", "v5e-1", "v5e-2"]


def test_a_drain_blocked_by_a_disruption_budget_waits_and_deletes_nothing(slices: Slices) -> None:
    budget = objs.pdb("web", {"app": "web"}, min_available=12, expected_pods=12)
    slices.kube.put("poddisruptionbudgets", budget, group="policy")
    drains = NodeDrains({POOL: slices.drainer}, timedelta(0))
    resize = Resize(POOL, from_units=3, to_units=2, reason="idle", key="r1")
    started = drains.scale_down(resize, slices.clock.now(), ["v5e-2"])
    assert [r.status for r in started.results] == [ActionStatus.STARTED]
    assert "waiting for disruption budgets to allow evicting" in started.results[0].detail
    for _ in range(3):
        slices.clock.advance(timedelta(minutes=1))
        assert [r.status for r in drains.continue_pending(slices.clock.now()).results] == [ActionStatus.STARTED]
    assert all(slices.cordoned(host) for host in slices.hosts("v5e-2"))
    assert slices.gke.calls("DELETE", "/nodePools/") == 0
    assert slices.kube.calls("delete", "pods") == 0  # refused, never forced

    slices.kube.delete("poddisruptionbudgets", "web", "default", group="policy")
    assert _run_until_settled(slices, drains) == [ActionStatus.STARTED, ActionStatus.DONE]
    assert slices.statuses() == {"v5e-0": "RUNNING", "v5e-1": "RUNNING", "v5e-2": "STOPPING"}


def test_a_new_leader_continues_a_slice_drain_from_the_nodes_annotations(slices: Slices) -> None:
    slices.kube.put("poddisruptionbudgets", objs.pdb("web", {"app": "web"}, min_available=12), group="policy")
    first = NodeDrains({POOL: slices.drainer}, timedelta(0))
    resize = Resize(POOL, from_units=3, to_units=2, reason="idle", key="r1")
    first.scale_down(resize, slices.clock.now(), ["v5e-1"])
    (pending,) = first.pending
    for host in slices.hosts("v5e-1"):
        node = slices.kube.get("nodes", host)
        assert node is not None
        assert node["metadata"]["annotations"][DRAIN_ANNOTATION] == pending.key

    successor = slices.new_drainer()
    assert successor.draining_nodes(POOL) == {"v5e-1": pending.key}
    drains = NodeDrains({POOL: successor}, timedelta(0))
    (state,) = slices.actuator.list_pools()
    seen, _ = drains.observe({POOL: state}, slices.clock.now())
    assert drains.pending == (pending,)
    assert (seen[POOL].ready_units, seen[POOL].target_units) == (2, 2)  # the draining slice is already going
    assert "v5e-1" not in seen[POOL].idle_nodes

    slices.kube.delete("poddisruptionbudgets", "web", "default", group="policy")
    assert _run_until_settled(slices, drains)[-1] is ActionStatus.DONE
    assert slices.statuses() == {"v5e-0": "RUNNING", "v5e-1": "STOPPING", "v5e-2": "RUNNING"}


def test_a_hard_stop_takes_idle_slices_before_busy_ones(slices: Slices) -> None:
    """A forced release of two slices with one idle (not yet for the window): the idle one goes, then the busy slice
    with the least work; the busiest, highest-index slice stays."""
    _train(slices, "v5e-0")
    _train(slices, "v5e-2", host=0)
    _train(slices, "v5e-2", host=1)
    drains = NodeDrains({POOL: slices.drainer}, HOLD)
    (state,) = slices.actuator.list_pools()
    drains.observe({POOL: state}, slices.clock.now())
    stop = Resize(POOL, from_units=3, to_units=1, reason="budget hard stop", key="stop", forced=True)
    started = drains.scale_down(stop, slices.clock.now())
    assert [p.node for p in drains.pending] == ["v5e-1", "v5e-0"]
    assert [r.status for r in started.results] == [ActionStatus.STARTED, ActionStatus.STARTED]
    assert not any(slices.cordoned(host) for host in slices.hosts("v5e-2"))

    statuses = _run_until_settled(slices, drains)
    assert statuses.count(ActionStatus.DONE) == 2
    assert slices.statuses() == {"v5e-0": "STOPPING", "v5e-1": "STOPPING", "v5e-2": "RUNNING"}


def test_a_pod_that_must_not_be_disrupted_rejects_the_slice_drain_and_uncordons_it(slices: Slices) -> None:
    host = slices.hosts("v5e-1")[1]
    slices.kube.put("pods", objs.pod("cache", host, volumes=[objs.host_path("models")], owner_kind="ReplicaSet"))
    rejected = slices.drainer.drain(POOL, "v5e-1", "d")
    assert rejected.status is ActionStatus.REJECTED
    assert rejected.detail.endswith("slice v5e-1 uncordoned")
    assert not any(slices.cordoned(h) for h in slices.hosts("v5e-1"))
    assert slices.gke.calls("DELETE", "/nodePools/") == 0


def test_the_slice_actuator_deletes_only_slices_of_its_group_and_each_once(slices: Slices) -> None:
    with pytest.raises(PermanentActuatorError, match="not slices of group 'v5e'"):
        slices.actuator.delete_nodes(POOL, ["cpu"], "d")
    assert slices.actuator.delete_nodes(POOL, ["v5e-0"], "d1").detail == "deleting slice v5e-0"
    restarted = GkeTpuSliceActuator(google_clients(slices.gke.url).gke, CLUSTER, [SLICES], slices.clock)
    assert restarted.delete_nodes(POOL, ["v5e-0"], "d1").detail == "v5e-0 already being deleted"
    assert slices.gke.calls("DELETE", "/nodePools/") == 1
    assert restarted.ready_slices(POOL) == ["v5e-1", "v5e-2"]


def _remove_hosts(rig: Slices, slice_name: str) -> None:
    """Every host of the slice leaves the cluster (host maintenance, a repair) while its node pool stays."""
    for host in rig.hosts(slice_name):
        rig.kube.delete("nodes", host)
        rig.kube.delete("pods", f"logs-{host}", "kube-system")
        rig.kube.delete("pods", f"web-{host}", "default")


def test_a_slice_whose_nodes_leave_during_its_drain_is_still_deleted(slices: Slices) -> None:
    drains = NodeDrains({POOL: slices.drainer}, HOLD)
    (state,) = slices.actuator.list_pools()
    drains.observe({POOL: state}, slices.clock.now())
    slices.clock.advance(HOLD)
    drains.observe({POOL: state}, slices.clock.now())
    started = drains.scale_down(Resize(POOL, 3, 2, "idle", "r1"), slices.clock.now(), ["v5e-0"])
    assert [r.status for r in started.results] == [ActionStatus.STARTED]  # its web pods are terminating
    (pending,) = drains.pending
    _remove_hosts(slices, "v5e-0")

    slices.clock.advance(timedelta(minutes=1))
    (state,) = slices.actuator.list_pools()
    seen, _ = drains.observe({POOL: state}, slices.clock.now())
    assert drains.pending == (pending,)  # no node records the drain any more; the slice is still there
    assert (seen[POOL].ready_units, seen[POOL].target_units) == (2, 2)
    step = drains.continue_pending(slices.clock.now())
    assert [r.status for r in step.results] == [ActionStatus.DONE]
    assert slices.gke.calls("DELETE", "/nodePools/") == 1
    assert slices.statuses() == {"v5e-0": "STOPPING", "v5e-1": "RUNNING", "v5e-2": "RUNNING"}
    assert not drains.pending


def test_a_slice_drain_a_person_ended_is_not_resumed_when_its_nodes_leave(slices: Slices) -> None:
    """A person uncordons the slice (the drain is dropped); its hosts leaving later do not delete it."""
    slices.kube.put("poddisruptionbudgets", objs.pdb("web", {"app": "web"}, min_available=12), group="policy")
    drains = NodeDrains({POOL: slices.drainer}, timedelta(0))
    drains.scale_down(Resize(POOL, 3, 2, "idle", "r1"), slices.clock.now(), ["v5e-1"])
    for host in slices.hosts("v5e-1"):
        slices.api.nodes.patch(host, {"spec": {"unschedulable": None}})  # kubectl uncordon
    (state,) = slices.actuator.list_pools()
    drains.observe({POOL: state}, slices.clock.now())
    assert drains.pending == ()

    _remove_hosts(slices, "v5e-1")
    drains.observe({POOL: state}, slices.clock.now())
    assert drains.pending == ()
    assert drains.continue_pending(slices.clock.now()).results == []
    assert slices.gke.calls("DELETE", "/nodePools/") == 0


def _add_slice(rig: Slices, slice_name: str) -> None:
    rig.gke.add_pool(slice_name, nodes=SLICES.hosts_per_slice)
    for host in rig.hosts(slice_name):
        rig.kube.put("nodes", objs.node(host, slice_name, accelerators=4, resource=objs.TPU_RESOURCE))
        rig.kube.put("pods", objs.pod(f"web-{host}", host, labels={"app": "web"}, owner_kind="ReplicaSet"))


def _reads_of_one_observe(rig: Slices, drains: NodeDrains) -> tuple[int, int, int]:
    """Pod lists, node lists and node pool lists (the slice list) one observation makes."""
    pods, nodes, pools = (
        rig.kube.calls("list", "pods"),
        rig.kube.calls("list", "nodes"),
        rig.gke.calls("GET", "/nodePools"),
    )
    (state,) = rig.actuator.list_pools()
    drains.observe({POOL: state}, rig.clock.now())
    return (
        rig.kube.calls("list", "pods") - pods,
        rig.kube.calls("list", "nodes") - nodes,
        rig.gke.calls("GET", "/nodePools") - pools - 1,  # list_pools' own read of the tick
    )


def test_an_observation_reads_pods_and_slices_once_however_many_hosts_the_group_has(slices: Slices) -> None:
    """3 slices of 4 hosts, then 8: one list of pods, one of the slices, and the nodes once for the slices' count (a
    ready slice without nodes is not ready), once for the drains in progress and once for the idle slices, where it
    was one pod list per host and one slice list per read."""
    drains = NodeDrains({POOL: slices.drainer}, HOLD)
    assert _reads_of_one_observe(slices, drains) == (1, 3, 1)
    for i in range(3, 8):
        _add_slice(slices, f"v5e-{i}")
    slices.clock.advance(timedelta(minutes=1))  # the next tick reads the slices again
    assert _reads_of_one_observe(slices, drains) == (1, 3, 1)
    _train(slices, "v5e-6", host=2)
    slices.clock.advance(timedelta(minutes=1))
    assert slices.drainer.idle_nodes(POOL, timedelta(0)) == [f"v5e-{i}" for i in (0, 1, 2, 3, 4, 5, 7)]


WIDE = TpuSliceGroupMapping(
    pool=POOL, group="v5e", machine_type="ct5lp-hightpu-4t", tpu_topology="4x8", zone="us-central1-a"
)  # 8 hosts a slice: a drain step reads its pods from the cluster's list, not host by host


def _wide_slices(kube: FakeKubeApi, kube_client: k8s.ApiClient, gke: FakeGkeApi) -> tuple[SimulatedClock, Slices]:
    clock = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    kube.clock = clock.now
    api = KubernetesApi(kube_client)
    actuator = GkeTpuSliceActuator(google_clients(gke.url).gke, CLUSTER, [WIDE], clock)
    rig = Slices(kube, gke, clock, api, actuator, KubernetesSliceDrainer(api, clock, actuator))
    for i in range(2):
        gke.add_pool(f"v5e-{i}", nodes=WIDE.hosts_per_slice)
        for host in (f"gke-ml-v5e-{i}-host-{h}" for h in range(WIDE.hosts_per_slice)):
            kube.put("nodes", objs.node(host, f"v5e-{i}", accelerators=4, resource=objs.TPU_RESOURCE))
            kube.put("pods", objs.pod(f"web-{host}", host, labels={"app": "web"}, owner_kind="ReplicaSet"))
    return clock, rig


def test_a_slice_drain_reads_its_pods_afresh_at_its_first_step_and_shares_the_ticks_list_after(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """A pod that must not be disrupted, scheduled on a host after the tick's list of pods was read, still rejects
    the drain before any pod is evicted: the first step lists the pods after cordoning the slice. A drain held by a
    disruption budget shares the tick's list on its later steps (the slice cordoned before that list was read)."""
    clock, rig = _wide_slices(kube_api, kube_client, gke_api)
    drains = NodeDrains({POOL: rig.drainer}, timedelta(0))
    (state,) = rig.actuator.list_pools()
    seen, _ = drains.observe({POOL: state}, clock.now())
    assert seen[POOL].idle_nodes == ("v5e-0", "v5e-1")
    first_host = "gke-ml-v5e-0-host-0"
    guard = {"karpenter.sh/do-not-disrupt": "true"}
    kube_api.put("pods", objs.pod("precious", first_host, annotations=guard, owner_kind="ReplicaSet"))
    rejected = drains.scale_down(Resize(POOL, 2, 1, "idle", "r0"), clock.now(), ["v5e-0"])
    assert [r.status for r in rejected.results] == [ActionStatus.REJECTED]
    assert "default/precious" in rejected.results[0].detail
    assert kube_api.calls("create", "pods", "eviction") == 0

    budget = objs.pdb("web", {"app": "web"}, min_available=16, expected_pods=16)
    kube_api.put("poddisruptionbudgets", budget, group="policy")
    before = kube_api.calls("list", "pods")
    started = drains.scale_down(Resize(POOL, 2, 1, "idle", "r1"), clock.now(), ["v5e-1"])
    assert [r.status for r in started.results] == [ActionStatus.STARTED]  # the budget says not now
    assert kube_api.calls("list", "pods") - before == 1  # the re-check shares the tick's list; the first step reads
    for _ in range(2):
        clock.advance(timedelta(minutes=1))
        before = kube_api.calls("list", "pods")
        drains.observe({POOL: state}, clock.now())
        [waiting] = drains.continue_pending(clock.now()).results
        assert waiting.status is ActionStatus.STARTED and "disruption budgets" in waiting.detail
        assert kube_api.calls("list", "pods") - before == 1  # the observation's list, shared by the drain's step


def test_a_slice_drain_ended_before_its_removal_uncordons_every_host_and_one_without_nodes_goes_on(
    slices: Slices,
) -> None:
    budget = objs.pdb("web", {"app": "web"}, min_available=12, expected_pods=12)
    slices.kube.put("poddisruptionbudgets", budget, group="policy")
    for name in ("v5e-0", "v5e-1"):
        assert slices.drainer.drain(POOL, name, f"r#{name}").status is ActionStatus.STARTED  # the budget: not now
    assert slices.drainer.draining_nodes(POOL) == {"v5e-0": "r#v5e-0", "v5e-1": "r#v5e-1"}

    ended = slices.drainer.cancel(POOL, "v5e-0", "r#v5e-0")
    assert (ended.status, ended.detail) == (
        ActionStatus.DONE,
        "drain of slice v5e-0 ended before it was removed: uncordoned, it serves again",
    )
    for host in slices.hosts("v5e-0"):
        assert not slices.cordoned(host)
        assert DRAIN_ANNOTATION not in (slices.kube.get("nodes", host)["metadata"].get("annotations") or {})  # type: ignore[index]
    assert slices.drainer.draining_nodes(POOL) == {"v5e-1": "r#v5e-1"}
    assert "v5e-0" in slices.drainer.idle_nodes(POOL, timedelta(0))  # serves again, idle
    assert slices.gke.calls("DELETE", "/nodePools/") == 0

    for host in slices.hosts("v5e-1"):  # its hosts leave the cluster: only the drain still knows of the slice
        slices.kube.delete("nodes", host)
    kept = slices.drainer.cancel(POOL, "v5e-1", "r#v5e-1")
    assert kept.status is ActionStatus.REJECTED and "its drain goes on" in kept.detail
    assert slices.drainer.draining_nodes(POOL) == {"v5e-1": "r#v5e-1"}  # its next step deletes the node pool

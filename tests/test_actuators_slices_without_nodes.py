"""A TPU slice whose node pool is still there while none of its nodes is in the cluster (its hosts left during its
drain before a restart, or its node pool runs no node) runs nothing and serves nothing: it is counted in flight (paid
for, not ready), and once ``NODES_GRACE`` has passed it is failed and deleted by the next resize, nothing on it to
drain. A drain in progress whose slice's nodes left still deletes it. The fake Kubernetes and GKE APIs behind the real
clients, driven by the agent's drains and its removal of failed units as the daemon does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kubernetes import client as k8s

from actuators.gke_tpu_slices import NODES_GRACE, GkeTpuSliceActuator
from actuators.slice_drain import KubernetesSliceDrainer
from agent.drains import NodeDrains
from kube import KubernetesApi
from models import ActionStatus, Resize
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER, SLICES
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

POOL = SLICES.pool
HOLD = timedelta(minutes=30)
T0 = datetime(2024, 5, 1, tzinfo=UTC)


def _hosts(slice_name: str) -> list[str]:
    return [f"gke-ml-{slice_name}-host-{i}" for i in range(SLICES.hosts_per_slice)]


def _slices(kube: FakeKubeApi, gke: FakeGkeApi, clock: SimulatedClock) -> None:
    """Three running 4-host slices of group v5e, each host running a web pod (a ReplicaSet's)."""
    kube.clock = clock.now  # evicted pods finish terminating as the clock passes their grace period
    for i in range(3):
        name = f"v5e-{i}"
        gke.add_pool(name, nodes=SLICES.hosts_per_slice)
        for host in _hosts(name):
            kube.put("nodes", objs.node(host, name, accelerators=4, resource=objs.TPU_RESOURCE))
            kube.put("pods", objs.pod(f"web-{host}", host, labels={"app": "web"}, owner_kind="ReplicaSet"))


def _train(kube: FakeKubeApi, *slice_names: str) -> None:
    """A multi-host job's pod on the first host of each slice."""
    for name in slice_names:
        host = _hosts(name)[0]
        kube.put("pods", objs.pod(f"train-{host}", host, accelerators=4, resource=objs.TPU_RESOURCE, owner_kind="Job"))


class _Agent:
    """What a started (or restarted) agent builds: nothing remembered."""

    def __init__(self, gke: FakeGkeApi, client: k8s.ApiClient, clock: SimulatedClock) -> None:
        self.clock = clock
        self.actuator = GkeTpuSliceActuator(google_clients(gke.url).gke, CLUSTER, [SLICES], clock, drained=True)
        self.drainer = KubernetesSliceDrainer(KubernetesApi(client), clock, self.actuator)
        self.drains = NodeDrains({POOL: self.drainer}, HOLD)

    def idle_for_the_hold(self) -> list[str]:
        """A tick's observation; the slices idle for the hold then."""
        (state,) = self.actuator.list_pools()
        self.drains.observe({POOL: state}, self.clock.now())
        return list(self.drainer.idle_nodes(POOL, HOLD))


def test_a_slice_whose_hosts_left_during_its_drain_is_failed_and_deleted_after_a_restart(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(T0)
    _slices(kube_api, gke_api, clock)
    _train(kube_api, "v5e-1", "v5e-2")
    agent = _Agent(gke_api, kube_client, clock)
    agent.idle_for_the_hold()
    clock.advance(HOLD)
    assert agent.idle_for_the_hold() == ["v5e-0"]
    started = agent.drains.scale_down(Resize(POOL, 3, 2, "idle", "r1"), clock.now(), ["v5e-0"])
    assert [r.status for r in started.results] == [ActionStatus.STARTED]  # its web pods are terminating
    for host in _hosts("v5e-0"):  # its hosts leave the cluster
        kube_api.delete("nodes", host)
        kube_api.delete("pods", f"web-{host}", "default")
    (state,) = agent.actuator.list_pools()
    seen, _ = agent.drains.observe({POOL: state}, clock.now())
    assert seen[POOL].idle_nodes == ()  # draining already: not offered for another release

    agent = _Agent(gke_api, kube_client, clock)  # the agent restarts before the drain's next step
    assert agent.idle_for_the_hold() == []
    assert agent.drains.pending == ()  # nothing in the cluster records the drain any more
    (state,) = agent.actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (2, 3, 0)  # in flight: not ready
    clock.advance(NODES_GRACE)
    assert agent.idle_for_the_hold() == []
    (state,) = agent.actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (2, 2, 1)

    removed = agent.actuator.resize(POOL, state.target_units, "clear-failed")

    assert removed.detail == "target 2 slices: delete v5e-0"
    assert gke_api.calls("DELETE", "/nodePools/") == 1
    assert {name: pool.status for name, pool in gke_api.pools.items()} == {
        "v5e-0": "STOPPING",
        "v5e-1": "RUNNING",
        "v5e-2": "RUNNING",
    }
    (after,) = agent.actuator.list_pools()
    assert (after.ready_units, after.target_units, after.billed_units) == (2, 2, 2)


def test_a_running_slice_without_nodes_is_never_idle_and_is_failed_after_the_grace(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """Not a ready slice left to a release: in flight from when it is first seen, failed once the grace has passed."""
    clock = SimulatedClock(T0)
    _slices(kube_api, gke_api, clock)
    _train(kube_api, "v5e-0", "v5e-1", "v5e-2")
    gke_api.add_pool("v5e-3", nodes=SLICES.hosts_per_slice)  # running, none of its nodes in the cluster
    agent = _Agent(gke_api, kube_client, clock)

    assert agent.idle_for_the_hold() == []
    clock.advance(NODES_GRACE - timedelta(minutes=1))
    assert agent.idle_for_the_hold() == []
    (state,) = agent.actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (3, 4, 0)
    clock.advance(timedelta(minutes=1))
    assert agent.idle_for_the_hold() == []
    (state,) = agent.actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (3, 3, 1)

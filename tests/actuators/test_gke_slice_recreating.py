"""A TPU slice that was whole and is being repaired is a unit recreated, not a scale-up: the slice group reports it in
``PoolState.recreating_units``, so a new leader that finds it in flight does not wait for it as a scale-up nor page it
as stuck. Two reads show it: a slice GKE reports RUNNING_WITH_ERROR whose missing hosts its instance groups are
recreating (``currentAction`` RECREATING, "The managed instance group is recreating this instance": a repair of a host
that ran), and a slice GKE reports ready none of whose hosts is a node of the cluster (recovered whole: GKE's create
of a node pool ends only once its nodes registered, so such a slice ran). A new slice short of hosts (CREATING, never
whole) is a scale-up's, and still waited for. GkeTpuSliceActuator on the fake GKE, Compute Engine and Kubernetes
APIs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kubernetes import client as k8s

from actuators.gke_tpu_slices import GkeTpuSliceActuator
from actuators.slice_drain import KubernetesSliceDrainer
from agent.alerts import stalled_scale_up_events
from agent.scale_up_memory import unexplained
from kube import KubernetesApi
from models import AcceleratorFamily, CapacityTier, PoolKind, PoolSpec
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER, POOL, SLICES
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)
LEAD = timedelta(minutes=30)
SPEC = PoolSpec(
    POOL, PoolKind.TPU_SLICE_GROUP, CapacityTier.ON_DEMAND, AcceleratorFamily.TPU, 16, 0, 4, 20.0, LEAD, ("tpu",),
)  # fmt: skip


def _actuator(fake: FakeGkeApi, clock: SimulatedClock) -> GkeTpuSliceActuator:
    clients = google_clients(fake.url)
    return GkeTpuSliceActuator(
        clients.gke, CLUSTER, [SLICES], clock, migs=clients.migs, drained=True, waits={POOL: LEAD * 2}
    )


def test_a_slice_whose_host_is_repaired_is_not_waited_for_nor_paged_as_a_stuck_scale_up(gke_api: FakeGkeApi) -> None:
    clock = SimulatedClock(T0)
    for i in range(2):
        gke_api.add_pool(f"v5e-{i}", nodes=SLICES.hosts_per_slice)
    gke_api.report_error("v5e-1", status="RUNNING_WITH_ERROR")
    gke_api.pools["v5e-1"].migs[0].instances[0].action = "RECREATING"  # a repair of a host that ran
    actuator = _actuator(gke_api, clock)  # a new leader's adapter: its first read, no scale-up saved

    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.recreating_units) == (1, 2, 1)
    pending = unexplained(T0, {POOL: state})
    assert pending == []  # waited for as a scale-up 1 -> 2 before

    clock.advance(LEAD * 3)  # the repair is still under way past the alert's 2 lead times
    (later,) = actuator.list_pools()
    assert (later.ready_units, later.target_units, later.recreating_units) == (1, 2, 1)
    assert stalled_scale_up_events(pending, {POOL: later}, {POOL: SPEC}, clock.now()) == []

    gke_api.pools["v5e-1"].migs[0].instances[0].action = "NONE"  # repaired
    (done,) = actuator.list_pools()
    assert (done.ready_units, done.target_units, done.recreating_units) == (2, 2, 0)


def test_a_new_slice_short_of_hosts_is_a_scale_up_still_waited_for(gke_api: FakeGkeApi) -> None:
    clock = SimulatedClock(T0)
    gke_api.add_pool("v5e-0", nodes=SLICES.hosts_per_slice)
    actuator = _actuator(gke_api, clock)
    gke_api.stockout("us-central1-a", mode="operation", room=2)
    actuator.resize(POOL, 2, "up")
    gke_api.advance()
    assert gke_api.pools["v5e-1"].status == "RUNNING_WITH_ERROR"  # 2 of its 4 hosts CREATING, never whole

    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.recreating_units) == (1, 2, 0)
    (waited,) = unexplained(T0, {POOL: state})
    assert (waited.from_units, waited.to_units) == (1, 2)


def test_a_ready_slice_whose_nodes_are_gone_is_being_recovered_not_a_scale_up(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(T0)
    kube_api.clock = clock.now
    actuator = _actuator(gke_api, clock)
    actuator.read_hosts_from(KubernetesSliceDrainer(KubernetesApi(kube_client), clock, actuator))
    for i in range(2):
        gke_api.add_pool(f"v5e-{i}", nodes=SLICES.hosts_per_slice)
    for i in range(SLICES.hosts_per_slice):  # v5e-1's hosts are no nodes: recovered whole, not registered yet
        kube_api.put("nodes", objs.node(f"gke-ml-v5e-0-host-{i}", "v5e-0", accelerators=4, resource=objs.TPU_RESOURCE))

    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.recreating_units) == (1, 2, 1)
    assert unexplained(T0, {POOL: state}) == []

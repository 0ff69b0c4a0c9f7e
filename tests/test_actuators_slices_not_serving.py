"""A TPU slice GKE reports RUNNING whose hosts are no nodes of the cluster serves nothing, so it is not counted as
serving capacity: in flight (paid for, not ready) for ``NODES_GRACE`` from when it is first seen so, then failed,
deleted by the agent's removal of failed units with no back-off, and the slice the demand needs is asked for in its
place. Before, it counted as a ready slice until a release took it, which a demand that needed it never did: it was
never replaced and the demand counted on it was not served. One GKE reports RECONCILING (an upgrade recreating its
nodes) stays in flight, and its grace starts once GKE reports it RUNNING again (its hosts register after): before,
the time spent RECONCILING counted, so a slice reconciled for over ``NODES_GRACE`` was failed on its first RUNNING
read and deleted before its hosts registered. One whose nodes come back is ready again. GkeTpuSliceActuator with its
group's KubernetesSliceDrainer on the fake GKE, Compute Engine and Kubernetes APIs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client as k8s

from actuators.gke_tpu_slices import NODES_GRACE, GkeTpuSliceActuator
from actuators.slice_drain import KubernetesSliceDrainer
from agent.executor import clear_failed_units
from agent.planning import PlannerMemory
from kube import KubernetesApi
from models import AcceleratorFamily, ActionStatus, CapacityTier, PoolKind, PoolSpec
from models.clock import SimulatedClock
from tests.actuators.test_gke_slice_errors import Rig
from tests.contract.harnesses import CLUSTER, POOL, SLICES
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

SPEC = PoolSpec(
    POOL, PoolKind.TPU_SLICE_GROUP, CapacityTier.ON_DEMAND, AcceleratorFamily.TPU, 16, 0, 4, 20.0,
    timedelta(minutes=30), ("tpu",),
)  # fmt: skip


@pytest.fixture
def clock() -> SimulatedClock:
    return SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))


@pytest.fixture
def rig(kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi, clock: SimulatedClock) -> Rig:
    """Two running 4-host slices of group v5e, every host registered and running a DaemonSet's pod, as the daemon
    builds the group's adapter (drained, its hosts counted) and drainer."""
    kube_api.clock = clock.now
    api = KubernetesApi(kube_client)
    clients = google_clients(gke_api.url)
    actuator = GkeTpuSliceActuator(clients.gke, CLUSTER, [SLICES], clock, migs=clients.migs, drained=True)
    built = Rig(kube_api, gke_api, actuator, KubernetesSliceDrainer(api, clock, actuator))
    for i in range(2):
        gke_api.add_pool(f"v5e-{i}", nodes=SLICES.hosts_per_slice)
        for host in built.hosts(f"v5e-{i}"):
            kube_api.put("nodes", objs.node(host, f"v5e-{i}", accelerators=4, resource=objs.TPU_RESOURCE))
            kube_api.put("pods", objs.pod(f"logs-{host}", host, namespace="kube-system", owner_kind="DaemonSet"))
    return built


def _hosts_leave(rig: Rig, name: str) -> None:
    for host in rig.hosts(name):
        rig.kube.delete("pods", f"logs-{host}", "kube-system")
        rig.kube.delete("nodes", host)


def _counts(rig: Rig) -> tuple[int, int, int, int]:
    (state,) = rig.actuator.list_pools()
    return state.ready_units, state.target_units, state.billed_units, state.failed_units


def test_a_running_slice_without_nodes_is_not_ready_then_failed_and_replaced(rig: Rig, clock: SimulatedClock) -> None:
    _hosts_leave(rig, "v5e-1")

    assert _counts(rig) == (1, 2, 2, 0)  # in flight: paid for, not ready
    assert rig.actuator.ready_slices(POOL) == ["v5e-0"]  # no unit a release could take
    clock.advance(NODES_GRACE - timedelta(minutes=1))
    assert _counts(rig) == (1, 2, 2, 0)
    clock.advance(timedelta(minutes=1))
    (state,) = rig.actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 1)
    assert state.failed_messages == ("RUNNING with no node in the cluster for 10m: it runs and serves nothing",)

    done = clear_failed_units({POOL: state}, rig.actuator, {POOL: SPEC}, PlannerMemory(), clock.now())

    assert rig.gke.pools["v5e-1"].status == "STOPPING"
    assert (done.alerts, done.memory.backoff_until) == ((), {})  # no stockout: the demand is asked for again
    replaced = rig.actuator.resize(POOL, 2, "the demand's 2 slices")
    assert (replaced.status, replaced.detail) == (ActionStatus.STARTED, "target 2 slices: create v5e-2")


def test_a_reconciling_slice_without_nodes_stays_in_flight_and_one_whose_nodes_return_is_ready(
    rig: Rig, clock: SimulatedClock
) -> None:
    _hosts_leave(rig, "v5e-1")
    rig.gke.report_error("v5e-1", status="RECONCILING")  # an upgrade recreating its nodes
    assert _counts(rig) == (1, 2, 2, 0)
    clock.advance(NODES_GRACE * 3)
    assert _counts(rig) == (1, 2, 2, 0)  # never failed while GKE works on it

    rig.gke.report_error("v5e-1", status="RUNNING")  # GKE is done; its hosts register a moment later
    clock.advance(timedelta(seconds=30))
    (state,) = rig.actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 2, 0)  # its grace starts now
    done = clear_failed_units({POOL: state}, rig.actuator, {POOL: SPEC}, PlannerMemory(), clock.now())
    assert done.alerts == () and rig.gke.pools["v5e-1"].status == "RUNNING"  # not deleted
    clock.advance(NODES_GRACE - timedelta(minutes=1))
    assert _counts(rig) == (1, 2, 2, 0)

    for host in rig.hosts("v5e-1"):  # its nodes register again
        rig.kube.put("nodes", objs.node(host, "v5e-1", accelerators=4, resource=objs.TPU_RESOURCE))
    clock.advance(timedelta(seconds=20))
    assert _counts(rig) == (2, 2, 2, 0)
    assert rig.actuator.ready_slices(POOL) == ["v5e-0", "v5e-1"]


def test_a_slice_done_reconciling_without_nodes_is_failed_a_grace_later(rig: Rig, clock: SimulatedClock) -> None:
    _hosts_leave(rig, "v5e-1")
    rig.gke.report_error("v5e-1", status="RECONCILING")
    assert _counts(rig) == (1, 2, 2, 0)  # first seen without nodes
    clock.advance(NODES_GRACE * 3)
    assert _counts(rig) == (1, 2, 2, 0)  # last seen RECONCILING: its grace counts from this read
    rig.gke.report_error("v5e-1", status="RUNNING")
    clock.advance(timedelta(seconds=1))
    assert _counts(rig) == (1, 2, 2, 0)

    clock.advance(NODES_GRACE - timedelta(seconds=2))
    assert _counts(rig) == (1, 2, 2, 0)
    clock.advance(timedelta(seconds=1))
    (state,) = rig.actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 1)
    assert state.failed_messages == ("RUNNING with no node in the cluster for 10m: it runs and serves nothing",)

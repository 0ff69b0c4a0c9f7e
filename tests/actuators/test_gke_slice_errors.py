"""GkeTpuSliceActuator with its group's KubernetesSliceDrainer, on the fake GKE, Compute Engine and Kubernetes APIs,
for slices GKE reports in ERROR: one whose nodes run a job is the ready slice it is, left to its drain, never deleted
undrained; an idle one is failed and deleted, and a stockout told only in the node pool's conditions backs the group
off."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from kubernetes import client as k8s

from actuators.gke_tpu_slices import GkeTpuSliceActuator
from actuators.slice_drain import KubernetesSliceDrainer
from kube import KubernetesApi
from models import ActionStatus, CapacityUnavailable
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER, POOL, SLICES
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

# As GKE writes a node pool's condition (k8s-config-connector#321; codes from container_v1 StatusCondition.Code).
STOCKOUT = {
    "code": "GCE_STOCKOUT",
    "canonicalCode": "RESOURCE_EXHAUSTED",
    "message": "Instance 'gke-ml-v5e-1-0-0009' creation failed: The zone 'projects/test-project/zones/us-central1-a' "
    "does not have enough resources available to fulfill the request.  '(resource type:compute)'.",
}


@dataclass
class Rig:
    kube: FakeKubeApi
    gke: FakeGkeApi
    actuator: GkeTpuSliceActuator
    drainer: KubernetesSliceDrainer

    def hosts(self, slice_name: str) -> list[str]:
        return [f"gke-ml-{slice_name}-host-{i}" for i in range(SLICES.hosts_per_slice)]

    def train(self, slice_name: str) -> None:
        """A multi-host job's pod on the slice's last host."""
        node = self.hosts(slice_name)[-1]
        pod = objs.pod(f"train-{node}", node, accelerators=4, resource=objs.TPU_RESOURCE, owner_kind="Job")
        self.kube.put("pods", pod)


@pytest.fixture
def rig(kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi) -> Rig:
    """Two running 4-host slices of group v5e, every host registered and running a DaemonSet's pod."""
    clock = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    kube_api.clock = clock.now
    api = KubernetesApi(kube_client)
    clients = google_clients(gke_api.url)
    actuator = GkeTpuSliceActuator(clients.gke, CLUSTER, [SLICES], clock, migs=clients.migs)
    rig = Rig(kube_api, gke_api, actuator, KubernetesSliceDrainer(api, clock, actuator))
    for i in range(2):
        name = f"v5e-{i}"
        gke_api.add_pool(name, nodes=SLICES.hosts_per_slice)
        for host in rig.hosts(name):
            kube_api.put("nodes", objs.node(host, name, accelerators=4, resource=objs.TPU_RESOURCE))
            kube_api.put("pods", objs.pod(f"logs-{host}", host, namespace="kube-system", owner_kind="DaemonSet"))
    return rig


def test_an_error_slice_whose_nodes_run_a_job_is_a_ready_slice_left_to_its_drain(rig: Rig) -> None:
    rig.train("v5e-1")
    rig.gke.report_error("v5e-1", conditions=(STOCKOUT,))
    (state,) = rig.actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (2, 2, 0)
    assert rig.actuator.resize(POOL, 2, "clear-failed").status is ActionStatus.DONE  # nothing to clean up
    assert rig.gke.calls("DELETE", "/nodePools/") == 0
    assert rig.actuator.ready_slices(POOL) == ["v5e-0", "v5e-1"]  # a unit its drainer drains when idle
    assert rig.drainer.pool_nodes(POOL) == ["v5e-0", "v5e-1"]  # the idle slice first, the busy one after


def test_an_idle_error_slice_is_deleted_and_a_stockout_told_in_its_conditions_refuses_a_new_slice(rig: Rig) -> None:
    rig.gke.report_error("v5e-1", conditions=(STOCKOUT,))  # statusMessage left empty: it is deprecated
    (state,) = rig.actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 1)
    with pytest.raises(CapacityUnavailable, match=r"GCE_STOCKOUT \(RESOURCE_EXHAUSTED\): Instance 'gke-ml-v5e-1"):
        rig.actuator.resize(POOL, 2, "refill")
    assert {name: pool.status for name, pool in rig.gke.pools.items()} == {"v5e-0": "RUNNING", "v5e-1": "STOPPING"}


def test_a_slice_created_short_is_told_so_in_its_conditions(rig: Rig) -> None:
    """The fake as GKE: a slice a stockout leaves short names the failed instance (GCE_STOCKOUT) and its zone's group
    in its conditions, which the adapter reads with the deprecated statusMessage."""
    rig.gke.stockout("us-central1-a", mode="operation", room=1, shown_on=("operation",))
    rig.actuator.resize(POOL, 3, "up")
    rig.gke.advance()
    created = rig.gke.pools["v5e-2"]
    assert created.status == "RUNNING_WITH_ERROR"
    assert [c.get("code") for c in created.conditions] == ["GCE_STOCKOUT", None]
    created.status_message = ""
    with pytest.raises(CapacityUnavailable, match=r"1 of 4 hosts running: GCE_STOCKOUT \(RESOURCE_EXHAUSTED\)"):
        rig.actuator.resize(POOL, 4, "more")

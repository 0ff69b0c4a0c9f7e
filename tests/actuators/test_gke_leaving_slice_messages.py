"""GkeTpuSliceActuator on the fake GKE and Compute Engine APIs: what a slice being deleted says is not read. GKE keeps
a RUNNING_WITH_ERROR slice's old "Not all instances running in IGM ... ZONE_RESOURCE_POOL_EXHAUSTED" message after
its instance groups' retries created every host; ready, it refuses nothing, and once its drain deletes it (STOPPING)
the same stale message must not refuse a scale-up of its group either."""

from __future__ import annotations

from datetime import UTC, datetime

from actuators.gke_tpu_slices import GkeTpuSliceActuator
from models import ActionStatus
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER, POOL, SLICES
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

# GKE's words for a zone's group that could not create every instance (terraform-provider-google#3304), kept in the
# node pool's statusMessage after the group's retries created them.
OLD_STOCKOUT = (
    "us-central1-a: Google Compute Engine: Not all instances running in IGM after 35m0s. Expected 4, running 3, "
    "transitioning 1. Current errors: [ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS]: Instance 'gke-ml-v5e-1-0-0003' "
    "creation failed: The zone 'projects/test-project/zones/us-central1-a' does not have enough resources available "
    "to fulfill the request. '(resource type:compute)'."
)


def test_the_stale_stockout_message_of_a_slice_being_deleted_refuses_no_scale_up(gke_api: FakeGkeApi) -> None:
    clients = google_clients(gke_api.url)
    clock = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    actuator = GkeTpuSliceActuator(clients.gke, CLUSTER, [SLICES], clock, migs=clients.migs, drained=True)
    for i in range(2):
        gke_api.add_pool(f"v5e-{i}", nodes=SLICES.hosts_per_slice)
    gke_api.report_error("v5e-1", status="RUNNING_WITH_ERROR", message=OLD_STOCKOUT)  # every host running
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (2, 2, 0)

    deleted = actuator.delete_nodes(POOL, ["v5e-1"], "drained v5e-1")  # its drain is done
    assert (deleted.status, deleted.detail) == (ActionStatus.STARTED, "deleting slice v5e-1")
    assert gke_api.pools["v5e-1"].status == "STOPPING"
    assert gke_api.pools["v5e-1"].status_message == OLD_STOCKOUT
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 0)

    grown = actuator.resize(POOL, 2, "demand rises")
    assert (grown.status, grown.detail) == (ActionStatus.STARTED, "target 2 slices: create v5e-2")
    assert gke_api.pools["v5e-2"].status == "PROVISIONING"

"""GkeTpuSliceActuator on the fake GKE and Compute Engine APIs, for slices GKE reports with an error: a slice is
ready only when all its hosts run (a RUNNING_WITH_ERROR slice short of hosts after a stockout is in flight and
refuses more slices in its zone), whatever GKE's status still says once they do."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from actuators.gke_tpu_slices import GkeTpuSliceActuator
from models import ActionStatus, CapacityUnavailable
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER, POOL, SLICES
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

CLOCK = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))


def _slices(fake: FakeGkeApi) -> GkeTpuSliceActuator:
    clients = google_clients(fake.url)
    return GkeTpuSliceActuator(clients.gke, CLUSTER, [SLICES], CLOCK, migs=clients.migs)


def test_a_slice_created_short_of_hosts_is_in_flight_and_refuses_more_slices_until_its_hosts_run(
    gke_api: FakeGkeApi,
) -> None:
    actuator = _slices(gke_api)
    gke_api.stockout("us-central1-a", mode="operation", room=2)  # 2 of the slice's 4 hosts can be created
    actuator.resize(POOL, 1, "up")
    gke_api.advance()
    pool = gke_api.pools["v5e-0"]
    assert pool.status == "RUNNING_WITH_ERROR"
    assert "Not all instances running in IGM" in pool.status_message
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (0, 1, 0)
    assert actuator.ready_slices(POOL) == []
    with pytest.raises(CapacityUnavailable, match="2 of 4 hosts running: ZONE_RESOURCE_POOL_EXHAUSTED"):
        actuator.resize(POOL, 2, "more")
    assert set(gke_api.pools) == {"v5e-0"}  # no second slice asked for in the stocked-out zone, none deleted

    gke_api.restock()
    gke_api.advance()  # the instance group's retries create the other 2 hosts; GKE's status and message stay
    assert pool.status == "RUNNING_WITH_ERROR"
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 0)
    assert actuator.ready_slices(POOL) == ["v5e-0"]
    grown = actuator.resize(POOL, 2, "more again")  # the message of a slice whose hosts all run is no stockout
    assert (grown.status, grown.detail) == (ActionStatus.STARTED, "target 2 slices: create v5e-1")


def test_a_slice_whose_hosts_are_all_still_being_created_is_in_flight_without_a_stockout(
    gke_api: FakeGkeApi,
) -> None:
    """A RUNNING_WITH_ERROR slice whose missing hosts met no stockout (nothing names one) is waited for, and does
    not refuse a scale-up."""
    actuator = _slices(gke_api)
    gke_api.add_pool("v5e-0", nodes=SLICES.hosts_per_slice)
    gke_api.autoscale("v5e-0", 2)  # two hosts gone (a repair); their group creates them again
    gke_api.autoscale("v5e-0", 4)
    pool = gke_api.pools["v5e-0"]
    pool.status, pool.status_message = "RUNNING_WITH_ERROR", "2 nodes are being recreated"
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (0, 1, 0)
    grown = actuator.resize(POOL, 2, "more")
    assert (grown.status, grown.detail) == (ActionStatus.STARTED, "target 2 slices: create v5e-1")

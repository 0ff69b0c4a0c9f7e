"""GkeTpuSliceActuator on the fake GKE and Compute Engine APIs: a host of a slice that was whole, recreated by a repair
(``currentAction`` RECREATING, no error of its own), is not short for the stockout GKE's stale node pool message still
names. GKE keeps a RUNNING_WITH_ERROR slice's "Not all instances running in IGM ... ZONE_RESOURCE_POOL_EXHAUSTED"
message after its instance groups' retries created every host; read onto the host being repaired, it refused a
scale-up of the group with CapacityUnavailable and, after the group's wait, failed the idle slice for want of capacity
and deleted it, though the zone had room."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from actuators.gke_tpu_slices import GkeTpuSliceActuator
from models import ActionStatus
from models.clock import SimulatedClock
from tests.actuators.test_gke_leaving_slice_messages import OLD_STOCKOUT
from tests.contract.harnesses import CLUSTER, POOL, SLICES
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

WAIT = timedelta(hours=2)


def _repaired(fake: FakeGkeApi, clock: SimulatedClock) -> GkeTpuSliceActuator:
    """Two whole slices, v5e-1 under the stale stockout message, then one of its hosts recreated by a repair."""
    clients = google_clients(fake.url)
    actuator = GkeTpuSliceActuator(
        clients.gke, CLUSTER, [SLICES], clock, migs=clients.migs, drained=True, waits={POOL: WAIT}
    )
    for i in range(2):
        fake.add_pool(f"v5e-{i}", nodes=SLICES.hosts_per_slice)
    fake.report_error("v5e-1", status="RUNNING_WITH_ERROR", message=OLD_STOCKOUT)  # every host running
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (2, 2, 0)
    fake.pools["v5e-1"].migs[0].instances[0].action = "RECREATING"
    return actuator


def test_a_host_recreated_by_a_repair_under_a_stale_stockout_message_refuses_no_scale_up(gke_api: FakeGkeApi) -> None:
    clock = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    actuator = _repaired(gke_api, clock)
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 2, 0)  # in flight while repaired

    grown = actuator.resize(POOL, 3, "demand rises")
    assert (grown.status, grown.detail) == (ActionStatus.STARTED, "target 3 slices: create v5e-2")


def test_a_slice_repaired_under_a_stale_stockout_message_is_never_failed(gke_api: FakeGkeApi) -> None:
    clock = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    actuator = _repaired(gke_api, clock)
    actuator.list_pools()
    clock.advance(WAIT * 3)
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 2, 0)

    kept = actuator.resize(POOL, state.target_units, "remove failed")  # what the executor sends each tick
    assert (kept.status, kept.detail) == (ActionStatus.DONE, "already at target")
    assert gke_api.pools["v5e-1"].status == "RUNNING_WITH_ERROR"
    assert gke_api.calls("DELETE", "/nodePools/") == 0


def test_a_recreated_host_whose_own_attempt_names_a_stockout_is_still_short_for_it(gke_api: FakeGkeApi) -> None:
    """The instance's own ``lastAttempt`` is read as before: a repair the zone has no room for is a stockout."""
    clock = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    actuator = _repaired(gke_api, clock)
    gke_api.pools["v5e-1"].migs[0].instances[0].error = "ZONE_RESOURCE_POOL_EXHAUSTED: the zone has no room"
    actuator.list_pools()
    clock.advance(WAIT)
    (state,) = actuator.list_pools()
    (why,) = state.failed_messages
    assert why.startswith("insufficient capacity: short of hosts for 2h (the group waits 2h): 3 of 4 hosts running: ")
    assert why.endswith("ZONE_RESOURCE_POOL_EXHAUSTED: the zone has no room")

"""GkeTpuSliceActuator on the fake GKE and Compute Engine APIs: the wait of a slice a stockout left short of hosts
survives a restart. The first read that found it short was kept in memory only, so an agent restarted within each
wait (a rolling update, a crash) kept a slice stuck RUNNING_WITH_ERROR with 2 of its 4 hosts in flight, billed and
never backed off for ever. A slice that was never whole (a host still being created for the first time) now waits
from when its instance groups were created, which Compute keeps (``creationTimestamp``)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from actuators.gke_tpu_slices import GkeTpuSliceActuator
from models import CapacityUnavailable
from models.clock import SimulatedClock
from tests.actuators.test_gke_short_slice_wait import T0, WAIT, _counts, _short_slice
from tests.contract.harnesses import CLUSTER, POOL, SLICES
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi


def _restarted(fake: FakeGkeApi, clock: SimulatedClock) -> GkeTpuSliceActuator:
    clients = google_clients(fake.url)
    return GkeTpuSliceActuator(
        clients.gke, CLUSTER, [SLICES], clock, migs=clients.migs, drained=True, waits={POOL: WAIT}
    )


def test_an_actuator_built_within_the_wait_fails_the_slice_at_the_wait(gke_api: FakeGkeApi) -> None:
    clock = SimulatedClock(T0)
    assert _counts(_short_slice(gke_api, clock, {POOL: WAIT})) == (0, 1, 0)  # created short at T0

    clock.advance(WAIT - timedelta(minutes=10))
    gke_api.advance()  # the zone stays out
    actuator = _restarted(gke_api, clock)  # a restart: nothing kept in memory
    assert _counts(actuator) == (0, 1, 0)
    clock.advance(timedelta(minutes=10))
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (0, 0, 1)
    (why,) = state.failed_messages
    assert why.startswith("insufficient capacity: short of hosts for 2h (the group waits 2h): 2 of 4 hosts running: ")
    with pytest.raises(CapacityUnavailable, match="short of hosts for 2h"):
        actuator.resize(POOL, 1, "still 1")
    assert gke_api.pools["v5e-0"].status == "STOPPING"


def test_restarts_every_less_than_the_wait_do_not_keep_the_slice_for_ever(gke_api: FakeGkeApi) -> None:
    clock = SimulatedClock(T0)
    _short_slice(gke_api, clock, {POOL: WAIT})
    seen = []
    for _ in range(2):  # a restart every 1h50m
        clock.advance(WAIT - timedelta(minutes=10))
        seen.append(_counts(_restarted(gke_api, clock)))
    assert seen == [(0, 1, 0), (0, 0, 1)]


def test_a_slice_first_seen_short_after_a_restart_long_after_its_creation_is_failed_at_once(
    gke_api: FakeGkeApi,
) -> None:
    """Its wait is over though this agent never saw it before: it has been short since its groups were created."""
    clock = SimulatedClock(T0)
    _short_slice(gke_api, clock, {POOL: WAIT})
    clock.advance(WAIT * 3)
    (state,) = _restarted(gke_api, clock).list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (0, 0, 1)
    (why,) = state.failed_messages
    assert why.startswith("insufficient capacity: short of hosts for 6h (the group waits 2h): ")


def test_a_slice_that_was_whole_waits_from_the_first_read_that_found_it_short(gke_api: FakeGkeApi) -> None:
    """Its groups' creation says nothing of when it fell short: hosts recreated (a repair the zone has no room for)
    are waited for from the first read that found them so."""
    clock = SimulatedClock(T0)
    gke_api.add_pool("v5e-0", nodes=SLICES.hosts_per_slice)
    clock.advance(WAIT * 3)
    for instance in gke_api.pools["v5e-0"].migs[0].instances[:2]:
        instance.action, instance.error = "RECREATING", "ZONE_RESOURCE_POOL_EXHAUSTED: the zone has no room"
    gke_api.report_error("v5e-0", status="RUNNING_WITH_ERROR")
    actuator = _restarted(gke_api, clock)
    assert _counts(actuator) == (0, 1, 0)
    clock.advance(WAIT - timedelta(minutes=1))
    assert _counts(actuator) == (0, 1, 0)
    clock.advance(timedelta(minutes=1))
    assert _counts(actuator) == (0, 0, 1)


def test_a_slice_whose_groups_tell_no_creation_time_waits_from_the_first_read_that_found_it_short(
    gke_api: FakeGkeApi, caplog: pytest.LogCaptureFixture
) -> None:
    """Without a valid ``creationTimestamp`` nothing is read as when the slice was asked for: the wait counts from
    this agent's first read that found it short, with a warning naming the group."""
    clock = SimulatedClock(T0)
    _short_slice(gke_api, clock, {POOL: WAIT})
    for mig in gke_api.pools["v5e-0"].migs:
        mig.created = ""
    clock.advance(WAIT * 3)
    actuator = _restarted(gke_api, clock)
    assert _counts(actuator) == (0, 1, 0)
    assert "instance group gke-ml-v5e-0-0-grp has no valid creationTimestamp" in caplog.text
    clock.advance(WAIT)
    assert _counts(actuator) == (0, 0, 1)

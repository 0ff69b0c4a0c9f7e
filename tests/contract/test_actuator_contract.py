"""The Actuator contract, run on the simulated cluster and on every real adapter (against the fake Google APIs), so
the simulator cannot drift from what the real pools do."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from models import ActionStatus, CapacityUnavailable, PermanentActuatorError, PoolState
from tests.contract.harnesses import HARNESSES, INITIAL, POOL, Harness


@pytest.fixture(params=sorted(HARNESSES))
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    built = HARNESSES[request.param]()
    try:
        yield built
    finally:
        built.close()


def _state(h: Harness) -> PoolState:
    (state,) = [s for s in h.actuator.list_pools() if s.pool_id == POOL]
    return state


def test_lists_the_pool_as_observed(harness: Harness) -> None:
    state = _state(harness)
    assert (state.ready_units, state.target_units, state.provisioning_units) == (INITIAL, INITIAL, 0)
    assert state.observed_at == harness.clock.now()


def test_scale_up_is_in_flight_until_lead_time_passes(harness: Harness) -> None:
    result = harness.actuator.resize(POOL, 5, "up-1")
    assert (result.status, result.key, result.pool_id) == (ActionStatus.STARTED, "up-1", POOL)
    state = _state(harness)
    assert (state.ready_units, state.target_units, state.provisioning_units) == (INITIAL, 5, 5 - INITIAL)
    harness.settle()
    state = _state(harness)
    assert (state.ready_units, state.target_units) == (5, 5)


def test_targets_are_absolute(harness: Harness) -> None:
    harness.actuator.resize(POOL, 4, "a")
    harness.finish_operations()
    asked = harness.creates()
    again = harness.actuator.resize(POOL, 4, "b")  # a new key, the same absolute target: nothing more to do
    assert again.status is ActionStatus.DONE
    harness.settle()
    assert _state(harness).target_units == 4
    assert harness.creates() == asked


def test_a_repeated_key_reports_the_first_outcome_and_does_nothing(harness: Harness) -> None:
    first = harness.actuator.resize(POOL, 3, "same")
    harness.finish_operations()
    asked = harness.creates()
    repeat = harness.actuator.resize(POOL, 6, "same")
    assert repeat == first
    harness.settle()
    assert _state(harness).target_units == 3
    assert harness.creates() == asked


def test_scale_down_cancels_units_in_flight_before_ready_ones(harness: Harness) -> None:
    harness.actuator.resize(POOL, INITIAL + 2, "up")
    harness.finish_operations()
    harness.actuator.resize(POOL, INITIAL + 1, "down")
    state = _state(harness)
    assert (state.ready_units, state.target_units) == (INITIAL, INITIAL + 1)


def test_scale_down_releases_ready_units(harness: Harness) -> None:
    harness.actuator.resize(POOL, 1, "down")
    assert _state(harness).target_units == 1
    harness.settle()
    state = _state(harness)
    assert (state.ready_units, state.target_units) == (1, 1)


def test_stockout_is_capacity_unavailable_and_changes_nothing(harness: Harness) -> None:
    harness.stockout()
    with pytest.raises(CapacityUnavailable) as refused:
        harness.actuator.resize(POOL, INITIAL + 2, "up")
    assert refused.value.pool_id == POOL
    state = _state(harness)
    assert (state.ready_units, state.target_units) == (INITIAL, INITIAL)


def test_units_that_cannot_be_created_after_an_accepted_scale_up_are_failed_not_awaited(harness: Harness) -> None:
    harness.late_stockout()
    assert harness.actuator.resize(POOL, INITIAL + 2, "up").status is ActionStatus.STARTED
    harness.settle()  # the provider finds it has no capacity for the two new units
    state = _state(harness)
    assert (state.ready_units, state.target_units, state.failed_units) == (INITIAL, INITIAL, 2)
    assert state.provisioning_units == 0
    for zone in range(harness.untouched_zones()):  # a zone not known to be out is tried (and runs out too)
        assert harness.actuator.resize(POOL, INITIAL + 1, f"zone-{zone}").status is ActionStatus.STARTED
        harness.settle()
    with pytest.raises(CapacityUnavailable) as refused:
        harness.actuator.resize(POOL, INITIAL + 1, "again")  # growing again is refused; the failed units go
    assert refused.value.pool_id == POOL
    state = _state(harness)
    assert (state.ready_units, state.target_units, state.failed_units) == (INITIAL, INITIAL, 0)
    harness.settle()
    state = _state(harness)
    assert (state.ready_units, state.target_units, state.failed_units) == (INITIAL, INITIAL, 0)


def test_an_unknown_pool_is_a_permanent_error(harness: Harness) -> None:
    with pytest.raises(PermanentActuatorError):
        harness.actuator.resize("no-such-pool", 1, "k")


def test_restart_in_the_middle_loses_no_operation_and_duplicates_none(harness: Harness) -> None:
    harness.actuator.resize(POOL, 4, "before-restart")
    harness.finish_operations()
    asked = harness.creates()
    after = harness.restarted()  # the agent died after starting the operation; a new one reads the cloud
    (state,) = [s for s in after.list_pools() if s.pool_id == POOL]
    assert (state.ready_units, state.target_units) == (INITIAL, 4)
    again = after.resize(POOL, 4, "before-restart")  # the same planned action, replayed by the new process
    assert again.status in (ActionStatus.DONE, ActionStatus.STARTED)
    harness.settle()
    (state,) = [s for s in after.list_pools() if s.pool_id == POOL]
    assert (state.ready_units, state.target_units) == (4, 4)
    assert harness.creates() == asked

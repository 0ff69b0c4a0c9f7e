"""Cloud TPU queued resources that never get their resources: the service keeps such a request waiting until its
valid-until time passes (for ever without one), so the adapter asks for each with its pool's wait as its
``validUntilDuration`` and reports one that has waited that long, one FAILED after it whatever its error says, and a
suspended one, as failed for want of capacity: a scale-up is refused with CapacityUnavailable (the pool backs off)
and the next resize deletes them."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from actuators.cloud_tpu import CloudTpuQueuedResourceActuator
from models import ActionStatus, CapacityUnavailable
from models.clock import SimulatedClock
from tests.contract.harnesses import QUEUED
from tests.fakes.fixtures import google_clients
from tests.fakes.tpu_api import EXPIRED_MESSAGE, FakeTpuApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)
WAIT = timedelta(minutes=20)


def _actuator(fake: FakeTpuApi, clock: SimulatedClock) -> CloudTpuQueuedResourceActuator:
    fake.clock = clock.now
    return CloudTpuQueuedResourceActuator(
        google_clients(fake.url).tpu, "test-project", [QUEUED], clock, {"accel": WAIT}
    )


def _counts(actuator: CloudTpuQueuedResourceActuator) -> tuple[int, int, int]:
    (state,) = actuator.list_pools()
    return state.ready_units, state.target_units, state.failed_units


def test_a_request_asks_the_service_to_fail_it_once_its_wait_is_over(tpu_api: FakeTpuApi) -> None:
    clock = SimulatedClock(T0)
    actuator = _actuator(tpu_api, clock)
    tpu_api.stockout("wait")
    actuator.resize("accel", 1, "up")
    assert tpu_api.queued["v5e-0"]["queueingPolicy"] == {"validUntilDuration": "1200s"}
    clock.advance(WAIT - timedelta(seconds=1))
    tpu_api.advance()
    assert tpu_api.state_of("v5e-0") == "WAITING_FOR_RESOURCES"
    clock.advance(timedelta(seconds=1))
    tpu_api.advance()
    assert tpu_api.state_of("v5e-0") == "FAILED"  # the service's own expiry, not the adapter's reading
    assert _counts(actuator) == (0, 0, 1)
    with pytest.raises(CapacityUnavailable, match=rf"expired waiting for resources \({re.escape(EXPIRED_MESSAGE)}\)"):
        actuator.resize("accel", 1, "again")
    assert tpu_api.state_of("v5e-0") == "DELETING"


def test_a_request_still_waiting_for_resources_after_its_wait_is_a_stockout(tpu_api: FakeTpuApi) -> None:
    clock = SimulatedClock(T0)
    actuator = _actuator(tpu_api, clock)
    tpu_api.stockout("wait")  # the zone has no capacity: the service keeps the request queued
    actuator.resize("accel", 1, "up")
    for _ in range(3):
        tpu_api.advance()
    clock.advance(WAIT - timedelta(seconds=1))
    assert _counts(actuator) == (0, 1, 0)  # still within its wait: on its way
    assert actuator.resize("accel", 2, "more").status is ActionStatus.STARTED

    clock.advance(timedelta(seconds=1))
    assert tpu_api.state_of("v5e-0") == "WAITING_FOR_RESOURCES"
    assert _counts(actuator) == (0, 1, 1)  # v5e-0 waited its 20 minutes; v5e-1, asked for a second ago, waits on
    with pytest.raises(CapacityUnavailable, match="insufficient capacity: still waiting for resources after 20m"):
        actuator.resize("accel", 3, "again")
    assert tpu_api.state_of("v5e-0") == "DELETING"  # no longer held in the queue
    assert tpu_api.state_of("v5e-1") == "WAITING_FOR_RESOURCES"


def test_a_request_failed_after_its_wait_is_a_stockout_whatever_its_error(tpu_api: FakeTpuApi) -> None:
    clock = SimulatedClock(T0)
    actuator = _actuator(tpu_api, clock)
    tpu_api.stockout("wait")
    actuator.resize("accel", 1, "up")
    clock.advance(WAIT)
    tpu_api.set_state("v5e-0", "FAILED", error="The request has expired")
    assert _counts(actuator) == (0, 0, 1)
    with pytest.raises(CapacityUnavailable, match=r"expired waiting for resources \(The request has expired\)"):
        actuator.resize("accel", 1, "again")
    assert tpu_api.state_of("v5e-0") == "DELETING"


def test_a_request_failed_early_for_another_reason_is_not_a_stockout(tpu_api: FakeTpuApi) -> None:
    clock = SimulatedClock(T0)
    actuator = _actuator(tpu_api, clock)
    actuator.resize("accel", 1, "up")
    clock.advance(timedelta(minutes=1))
    tpu_api.set_state("v5e-0", "FAILED", error="internal error")
    assert _counts(actuator) == (0, 0, 1)
    result = actuator.resize("accel", 1, "again")  # the failed one goes, another is asked for
    assert result.status is ActionStatus.STARTED
    assert tpu_api.state_of("v5e-0") == "DELETING"
    assert tpu_api.state_of("v5e-1") == "WAITING_FOR_RESOURCES"


@pytest.mark.parametrize("state", ["SUSPENDING", "SUSPENDED"])
def test_a_suspended_queued_resource_refuses_a_scale_up_instead_of_being_replaced(
    tpu_api: FakeTpuApi, state: str
) -> None:
    clock = SimulatedClock(T0)
    actuator = _actuator(tpu_api, clock)
    actuator.resize("accel", 2, "up")
    tpu_api.advance()
    tpu_api.advance()
    assert _counts(actuator) == (2, 2, 0)
    tpu_api.set_state("v5e-1", state)  # the service took the Spot TPU back
    assert _counts(actuator) == (1, 1, 1)
    with pytest.raises(CapacityUnavailable, match=f"{state.lower()}: insufficient capacity to keep its TPU"):
        actuator.resize("accel", 2, "replace")
    assert tpu_api.state_of("v5e-1") == "DELETING"
    assert tpu_api.calls("POST", "/queuedResources") == 2  # no replacement asked for

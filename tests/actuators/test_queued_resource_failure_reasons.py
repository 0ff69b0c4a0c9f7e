"""The stockout alert of a Cloud TPU queued resource pool quotes why the service failed or suspended its requests.

The adapter passed no failed queued resource's message on, so a request FAILED for a quota used up or a stockout,
or SUSPENDED when the service took its TPU back, reached the operator as "1 units of v5e failed after the request was
accepted (no capacity, suspended or in error)", and a quota went without the advice to have it raised. The error the
service gives (``state.failedData.error``, a ``google.rpc.Status``) is now quoted, a quota read as one; every failed
queued resource still backs its pool off and refuses its scale-ups as before. The real ``TpuClient`` (REST) against
``tests.fakes.tpu_api``, and the agent's removal of failed units (``agent.executor.clear_failed_units``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from actuators.cloud_tpu import CloudTpuQueuedResourceActuator
from agent.executor import MIN_BACKOFF, Execution, clear_failed_units
from agent.executor_failures import QUOTA_ADVICE
from agent.planning import PlannerMemory
from agent.planning.memory import BackoffReason
from models import AcceleratorFamily, AlertEvent, AlertKind, CapacityTier, CapacityUnavailable, PoolKind, PoolSpec
from models.clock import SimulatedClock
from tests.contract.harnesses import POOL, QUEUED
from tests.fakes.fixtures import google_clients
from tests.fakes.tpu_api import QUOTA_MESSAGE, STOCKOUT_MESSAGE, FakeTpuApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)
LEAD = timedelta(minutes=20)
WAIT = timedelta(hours=1)  # how long a queued resource may wait for resources: longer than the tests run
SPEC = PoolSpec(
    POOL, PoolKind.TPU_QUEUED_RESOURCE, CapacityTier.SPOT, AcceleratorFamily.TPU, 8, 0, 4, 8.0, LEAD, ("tpu",)
)
# Sources: tests/fakes/REFERENCE.md (Cloud TPU queued resources: a FAILED one's error; Google's quota wording).
REGION_QUOTA = "Quota 'TPUV4sPreemptiblePodPerProjectPerRegionForTPUAPI' exhausted. Limit 20800 in region us-central2"
SUSPENDED = "suspended: insufficient capacity to keep its TPU (a Spot preemption or a maintenance event)"
USER_SUSPENDED = "suspended at a user's request (the service names a user, not itself, as its initiator)"


def _actuator(tpu_api: FakeTpuApi, clock: SimulatedClock) -> CloudTpuQueuedResourceActuator:
    return CloudTpuQueuedResourceActuator(
        google_clients(tpu_api.url).tpu, "test-project", [QUEUED], clock, {POOL: WAIT}
    )


def _failed(
    tpu_api: FakeTpuApi, *failures: tuple[str, str | None, int], initiator: str | None = None, refused: bool = True
) -> tuple[Execution, SimulatedClock]:
    """One queued resource per failure, each put in (state, error message, code) two minutes after it was asked for
    (long before its valid-until time), by ``initiator`` where given; the agent removes them: what it did. A scale-up
    is ``refused`` while they are listed."""
    clock = SimulatedClock(T0)
    tpu_api.clock = clock.now
    actuator = _actuator(tpu_api, clock)
    actuator.resize(POOL, len(failures), "up")
    clock.advance(timedelta(minutes=2))
    for index, (state, message, code) in enumerate(failures):
        tpu_api.set_state(f"v5e-{index}", state, error=message, code=code, initiator=initiator)
    (pool,) = actuator.list_pools()
    assert (pool.failed_units, pool.target_units) == (len(failures), 0)
    if refused:  # a scale-up is refused while the failed requests are there, as before
        with pytest.raises(CapacityUnavailable):
            actuator.resize(POOL, len(failures), "again")
    done = clear_failed_units({POOL: pool}, actuator, {POOL: SPEC}, PlannerMemory(), clock.now())
    assert done.memory.backoff_until == {POOL: clock.now() + max(MIN_BACKOFF, LEAD)}
    assert done.memory.backoff_reason == {POOL: BackoffReason.STOCKOUT}
    assert all(tpu_api.state_of(f"v5e-{i}") in ("DELETING", None) for i in range(len(failures)))
    return done, clock


def _alert(done: Execution) -> AlertEvent:
    (alert,) = done.alerts
    assert alert.kind is AlertKind.STOCKOUT
    return alert


@pytest.mark.parametrize("message", [QUOTA_MESSAGE, REGION_QUOTA], ids=["zone", "region"])
def test_a_queued_resource_failed_for_a_quota_is_quoted_with_the_advice_to_raise_it(
    tpu_api: FakeTpuApi, message: str
) -> None:
    alert = _alert(_failed(tpu_api, ("FAILED", message, 8))[0])
    assert alert.summary == (
        f"1 units of {POOL} failed after the request was accepted: {message}; removed them, backing off 20m and using "
        f"the next pool. {QUOTA_ADVICE}"
    )
    assert alert.details["error"] == message
    assert alert.details["action"] == QUOTA_ADVICE


def test_a_stockout_is_quoted_with_no_quota_advice(tpu_api: FakeTpuApi) -> None:
    alert = _alert(_failed(tpu_api, ("FAILED", STOCKOUT_MESSAGE, 8), ("FAILED", STOCKOUT_MESSAGE, 8))[0])
    assert alert.summary == (
        f"2 units of {POOL} failed after the request was accepted: {STOCKOUT_MESSAGE}; removed them, backing off 20m "
        "and using the next pool"
    )
    assert alert.details["error"] == STOCKOUT_MESSAGE  # once, though two requests failed with it
    assert "action" not in alert.details


@pytest.mark.parametrize("initiator", [None, "SERVICE"], ids=["unsaid", "service"])
def test_a_suspended_queued_resource_says_the_service_took_its_tpu_back(
    tpu_api: FakeTpuApi, initiator: str | None
) -> None:
    alert = _alert(_failed(tpu_api, ("SUSPENDED", None, 8), initiator=initiator)[0])
    assert alert.details["error"] == SUSPENDED
    assert "action" not in alert.details


def test_one_a_user_suspended_is_not_told_as_a_capacity_loss_and_still_backs_off(tpu_api: FakeTpuApi) -> None:
    """``stateInitiator`` USER: someone of the project, not the service, suspended it; it is not told as a Spot
    preemption. It is still removed and its pool backed off (``_failed``), as every failed queued resource is."""
    alert = _alert(_failed(tpu_api, ("SUSPENDED", None, 8), initiator="USER", refused=False)[0])
    assert alert.details["error"] == USER_SUSPENDED
    assert "insufficient capacity" not in alert.summary


@pytest.mark.parametrize(
    ("code", "named"), [(8, "RESOURCE_EXHAUSTED"), (13, "INTERNAL"), (99, "99")], ids=["exhausted", "internal", "?"]
)
def test_an_error_without_a_message_is_told_by_its_code_and_does_not_hide_a_quota(
    tpu_api: FakeTpuApi, code: int, named: str
) -> None:
    """The service's ``google.rpc.Status`` may carry a code and no message: said so, with the code, and another
    request's quota is still quoted and advised on."""
    alert = _alert(_failed(tpu_api, ("FAILED", "", code), ("FAILED", QUOTA_MESSAGE, 8))[0])
    silent = f"the service failed the request with code {named} and no message"
    assert alert.details["error"] == f"{silent}; {QUOTA_MESSAGE}"
    assert alert.details["action"] == QUOTA_ADVICE


def test_a_failure_that_names_neither_still_backs_the_pool_off_and_is_quoted(tpu_api: FakeTpuApi) -> None:
    message = "An internal error has occurred. Please retry."
    done, _ = _failed(tpu_api, ("FAILED", message, 13), ("FAILED", STOCKOUT_MESSAGE, 8))
    alert = _alert(done)
    assert alert.details["error"] == f"{message}; {STOCKOUT_MESSAGE}"
    assert "action" not in alert.details

"""Failed units whose provider says nothing, or nothing the agent can act on, back their pool off as a stockout.

A Cloud TPU queued resource fails "due to some late-discovered problem with the request itself, or due to
unavailability of resources within the constraints of the request", so the same request asked for again at once fails
again: before, one failed with an empty message (or one naming neither) was deleted with an info line and asked for
again on every tick, with no back-off and no alert. A TPU slice in ERROR with no message (no status message, no
condition) and all its hosts running says nothing either; one short of hosts is said to be so. The real adapters on
the fake GKE and Cloud TPU APIs, and the agent's removal of failed units (``agent.executor.clear_failed_units``) on
what they read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from actuators.cloud_tpu import CloudTpuQueuedResourceActuator
from actuators.gke_tpu_slices import GkeTpuSliceActuator
from agent.executor import MIN_BACKOFF, Execution, clear_failed_units
from agent.planning import PlannerMemory
from models import AcceleratorFamily, AlertKind, CapacityTier, PoolKind, PoolSpec, PoolState
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER, POOL, QUEUED, SLICES
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.tpu_api import FakeTpuApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)
LEAD = timedelta(minutes=20)
WAIT = timedelta(hours=1)  # how long a queued resource may wait for resources: longer than the tests run


def _spec(kind: PoolKind) -> PoolSpec:
    return PoolSpec(POOL, kind, CapacityTier.SPOT, AcceleratorFamily.TPU, 8, 0, 4, 8.0, LEAD, ("tpu",))


def _removed(state: PoolState, actuator: object, kind: PoolKind, now: datetime) -> Execution:
    return clear_failed_units({POOL: state}, actuator, {POOL: _spec(kind)}, PlannerMemory(), now)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("", 8),  # RESOURCE_EXHAUSTED, and no message
        ("", 13),  # INTERNAL, and no message
        ("An internal error has occurred. Please retry.", 13),  # a message that names no capacity
    ],
)
def test_a_failed_queued_resource_backs_its_pool_off_whatever_its_error_says(
    tpu_api: FakeTpuApi, message: str, code: int
) -> None:
    clock = SimulatedClock(T0)
    tpu_api.clock = clock.now
    actuator = CloudTpuQueuedResourceActuator(
        google_clients(tpu_api.url).tpu, "test-project", [QUEUED], clock, {POOL: WAIT}
    )
    actuator.resize(POOL, 1, "up")
    clock.advance(timedelta(minutes=2))  # long before its valid-until time
    tpu_api.set_state("v5e-0", "FAILED", error=message, code=code)

    (state,) = actuator.list_pools()
    # Its error is passed on to be quoted, yet read as one for want of capacity whatever it says.
    assert (state.target_units, state.failed_units, state.failed_for_capacity) == (0, 1, True)
    assert len(state.failed_messages) == 1 and all(state.failed_messages)
    done = _removed(state, actuator, PoolKind.TPU_QUEUED_RESOURCE, clock.now())

    assert tpu_api.state_of("v5e-0") == "DELETING"
    assert done.memory.backoff_until == {POOL: clock.now() + max(MIN_BACKOFF, LEAD)}
    assert [alert.kind for alert in done.alerts] == [AlertKind.STOCKOUT]


@pytest.mark.parametrize(
    ("message", "with_migs", "hosts_lost", "backs_off"),
    [
        ("", False, 0, True),  # GKE says nothing, its hosts are not counted: a stockout, as before messages were read
        ("", True, 0, True),  # GKE says nothing, every host runs: nothing known either
        ("", True, 3, False),  # it lost hosts, none for want of capacity (a broken slice whose job was stopped)
        ("1 node is unhealthy", False, 0, False),  # a message naming no capacity: removed, no back-off
    ],
)
def test_a_failed_slice_gke_says_nothing_of_backs_its_group_off_unless_its_lost_hosts_say_why(
    gke_api: FakeGkeApi, message: str, with_migs: bool, hosts_lost: int, backs_off: bool
) -> None:
    clock = SimulatedClock(T0)
    clients = google_clients(gke_api.url)
    actuator = GkeTpuSliceActuator(clients.gke, CLUSTER, [SLICES], clock, migs=clients.migs if with_migs else None)
    gke_api.add_pool("v5e-0", nodes=SLICES.hosts_per_slice)
    gke_api.add_pool("v5e-1", nodes=SLICES.hosts_per_slice)
    (mig,) = gke_api.pools["v5e-1"].migs
    mig.instances = mig.instances[hosts_lost:]  # deleted, not recreated
    mig.target_size = len(mig.instances)
    gke_api.report_error("v5e-1", message=message)

    (state,) = actuator.list_pools()
    assert (state.ready_units, state.failed_units) == (1, 1)
    said = {
        "": (),
        "lost": (f"in ERROR with 1 of 4 hosts running; missing: {hosts_lost} not in its instance groups",),
        "given": (message,),
    }
    assert state.failed_messages == said["given" if message else "lost" if hosts_lost else ""]
    done = _removed(state, actuator, PoolKind.TPU_SLICE_GROUP, clock.now())

    assert gke_api.pools["v5e-1"].status == "STOPPING"
    assert (POOL in done.memory.backoff_until) is backs_off
    assert [alert.kind for alert in done.alerts] == ([AlertKind.STOCKOUT] if backs_off else [])

"""A GKE node whose last create attempt only hit Compute's rate limit is a node still coming, not a failed unit.

Compute answers too many operations at once with "Rate Limit Exceeded" (reason CONCURRENT_OPERATIONS_QUOTA_EXCEEDED),
and too many on one resource (many boot disks created from one image at once, as a big scale-up does) with
RESOURCE_OPERATION_RATE_EXCEEDED "Operation rate exceeded for resource '...'. Too frequent operations from the source
resource." (tests/fakes/REFERENCE.md); the instance group retries the create by itself. Read as a failed creation,
such a node was deleted at the next tick, and once the creates kept being rate limited for the pool's lead time the
pool was backed off and its demand sent to the next pool, with an alert the operator cannot act on: a rate limit is
retried on a later tick, never a blocked pool nor demand sent to a dearer one. The real clients against
``tests.fakes.gke_api`` and the agent's removal of failed units."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.vendor_errors import from_status, is_rate_limited
from agent.executor import clear_failed_units
from agent.planning import PlannerMemory
from config.cloud import NodePoolMapping
from models import AcceleratorFamily, CapacityTier, PoolKind, PoolSpec, TransientActuatorError
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)
LEAD = timedelta(minutes=20)
GPU = PoolSpec(
    "gpu", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 8, 30.0, LEAD, ("t",)
)
ZONE = "us-central1-a"
RATE_LIMITED = ("CONCURRENT_OPERATIONS_QUOTA_EXCEEDED", "Rate Limit Exceeded")
# Compute's per-resource rate limit: too many disks created from one image at once, as a big scale-up does
# (tests/fakes/REFERENCE.md)
OPERATION_RATE = (
    "RESOURCE_OPERATION_RATE_EXCEEDED",
    "Operation rate exceeded for resource 'projects/test-project/global/images/gke-node-image'. "
    "Too frequent operations from the source resource.",
)
LIMITS = pytest.mark.parametrize("limit", [RATE_LIMITED, OPERATION_RATE], ids=lambda e: e[0])


def _actuator(fake: FakeGkeApi, clock: SimulatedClock) -> GkeNodePoolActuator:
    clients = google_clients(fake.url)
    return GkeNodePoolActuator(
        clients.gke, clients.migs, CLUSTER, [NodePoolMapping(pool="gpu", node_pool="a100")], clock
    )


@LIMITS
def test_a_rate_limited_create_is_a_node_still_coming_and_arrives(gke_api: FakeGkeApi, limit: tuple[str, str]) -> None:
    gke_api.add_pool("a100", nodes=1, zones=(ZONE,))
    gke_api.stockout(ZONE, shown_on=("instances",), code=limit[0], message=limit[1])
    clock = SimulatedClock(T0)
    actuator = _actuator(gke_api, clock)
    actuator.resize("gpu", 3, "up")
    gke_api.advance()
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 3, 0)
    assert state.failed_messages == ()

    cleared = clear_failed_units({"gpu": state}, actuator, {"gpu": GPU}, PlannerMemory(), T0)
    assert (cleared.results, cleared.alerts, cleared.memory.backoff_until) == ((), (), {})
    assert [m.target_size for m in gke_api.pools["a100"].migs] == [3]  # nothing deleted

    gke_api.restock()  # the operations in flight drained: the group's retry creates them
    gke_api.advance()
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (3, 3, 0)


@LIMITS
def test_rate_limited_creates_for_a_lead_time_neither_back_the_pool_off_nor_alert(
    gke_api: FakeGkeApi, limit: tuple[str, str]
) -> None:
    gke_api.add_pool("a100", nodes=1, zones=(ZONE,))
    gke_api.stockout(ZONE, shown_on=("instances",), code=limit[0], message=limit[1])
    clock = SimulatedClock(T0)
    actuator = _actuator(gke_api, clock)
    actuator.resize("gpu", 2, "up")
    memory = PlannerMemory()
    for minute in (0, 10, 20, 30):
        now = T0 + timedelta(minutes=minute)
        clock.advance(now - clock.now())
        gke_api.advance()
        (state,) = actuator.list_pools()
        done = clear_failed_units({"gpu": state}, actuator, {"gpu": GPU}, memory, now)
        memory = done.memory
        assert (state.target_units, state.failed_units, done.alerts) == (2, 0, ())
    assert (memory.backoff_until, memory.units_failing_since) == ({}, {})


@pytest.mark.parametrize(
    ("code", "message", "limited"),
    [
        (*RATE_LIMITED, True),
        ("rateLimitExceeded", "Rate Limit Exceeded", True),
        (*OPERATION_RATE, True),
        ("", OPERATION_RATE[1], True),  # the message alone, as a refused call's says it
        ("", 'Too many operations: cluster "ml" hits the concurrent operations quota 5, please try again later.', True),
        ("QUOTA_EXCEEDED", "Quota 'NVIDIA_A100_GPUS' exceeded.  Limit: 16.0 in region us-central1.", False),
        (
            "IP_SPACE_EXHAUSTED",
            "Instance 'x' creation failed: IP space of 'projects/p/regions/r/subnetworks/s' ...",
            False,
        ),
    ],
)
def test_is_rate_limited_reads_the_code_and_the_message(code: str, message: str, limited: bool) -> None:
    assert is_rate_limited(code, message) is limited


@pytest.mark.parametrize("status", [403, 429])
def test_a_call_refused_for_the_operation_rate_of_a_resource_is_retried(status: int) -> None:
    """Refused at once rather than recorded on an instance, the per-resource rate limit is retried on a later tick,
    not read as a permission refused (403), which would block the pool."""
    error = from_status("gpu", status, f"{OPERATION_RATE[1]} ({OPERATION_RATE[0]})")
    assert type(error) is TransientActuatorError

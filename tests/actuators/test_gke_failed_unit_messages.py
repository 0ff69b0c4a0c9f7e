"""A GKE GPU node pool's failed units carry what Compute Engine said of them into the pool's read, so the stockout
alert quotes it, and a quota used up says to have it raised, as AWS's and Cloud TPU's failed units do.

An instance a zone's managed instance group could not create keeps its cause on ``lastAttempt.errors.errors[]``
(``code``, ``message``; tests/fakes/REFERENCE.md): ``ZONE_RESOURCE_POOL_EXHAUSTED`` for a stockout, ``QUOTA_EXCEEDED``
for a quota. The adapter read it to tell the unit failed, but gave the pool's read no message, so the alert read "2
units of gpu failed after the request was accepted (no capacity, suspended or in error)" whatever the cause, and a
quota used up (which no back-off clears) was told as a stockout. When the pool and its zones back off is pinned here
too: giving the messages must not change it. The real google-cloud-container and google-cloud-compute clients (REST)
against ``tests.fakes.gke_api``, and the agent's removal of failed units (``agent.executor.clear_failed_units``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from actuators.gke_node_pool import GkeNodePoolActuator
from agent.executor import Execution, clear_failed_units
from agent.executor_failures import QUOTA_ADVICE
from agent.planning import PlannerMemory
from agent.planning.memory import BackoffReason
from config.cloud import NodePoolMapping
from models import AcceleratorFamily, AlertKind, CapacityTier, PoolKind, PoolSpec, PoolState
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi, zone_stockout_message

T0 = datetime(2024, 5, 1, tzinfo=UTC)  # the fake's operations start and end at its own now, this time
LEAD = timedelta(minutes=20)
ZONE_BACKOFF = timedelta(minutes=30)  # the adapter's default
GPU = PoolSpec(
    "gpu", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 8, 30.0, LEAD, ("t",)
)
# Compute's words (tests/fakes/REFERENCE.md): a regional quota's QUOTA_EXCEEDED ("Quota '...' exceeded.  Limit: ... in
# region ...") and a zone out of resources (Compute VM troubleshooting).
QUOTA = "Quota 'NVIDIA_A100_GPUS' exceeded.  Limit: 16.0 in region us-central1."
STOCKOUT = (
    "The zone 'projects/test-project/zones/{zone}' does not have enough resources available to fulfill the request."
)
ZONES = ("us-central1-a", "us-central1-b")


def _actuator(fake: FakeGkeApi, clock: SimulatedClock) -> GkeNodePoolActuator:
    clients = google_clients(fake.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100")
    return GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], clock)


def _failed(fake: FakeGkeApi, zones: tuple[str, ...], nodes: int, to: int) -> tuple[GkeNodePoolActuator, PoolState]:
    """A pool of ``nodes`` over ``zones`` grown to ``to``, accepted; the zones stocked out by the test then fail the
    creates: the actuator and its pool as read afterwards. A stockout told on an operation's error alone is told of a
    resize through GKE (``gcloud container clusters resize``: one setSize, ``to`` per zone), which ends with the error
    once GKE gives up on the creates; the agent's own resizes of the groups start no GKE operation."""
    fake.add_pool("a100", nodes=nodes, zones=zones)
    actuator = _actuator(fake, SimulatedClock(T0))
    if all("instances" in out.shown_on for out in fake.stockouts.values()):
        actuator.resize("gpu", to, "up")
    else:
        request = {"name": f"{CLUSTER}/nodePools/a100", "node_count": to // len(zones)}
        google_clients(fake.url).gke.set_node_pool_size(request=request)
        fake.advance()  # the creates fail; GKE's operation runs on
    fake.advance()
    (state,) = actuator.list_pools()
    return actuator, state


def _cleared(actuator: GkeNodePoolActuator, state: PoolState) -> Execution:
    return clear_failed_units({"gpu": state}, actuator, {"gpu": GPU}, PlannerMemory(), T0)


def _zone_backoff(actuator: GkeNodePoolActuator) -> dict[str, datetime | None]:
    (state,) = actuator.list_pools()
    return {z.zone: z.backoff_until for z in state.zones}


def test_a_quota_used_up_on_the_instances_is_quoted_and_the_operator_told_to_have_it_raised(
    gke_api: FakeGkeApi,
) -> None:
    gke_api.stockout(ZONES[0], shown_on=("instances",), code="QUOTA_EXCEEDED", message=QUOTA)
    actuator, state = _failed(gke_api, ZONES[:1], 1, 3)
    assert (state.failed_units, state.failed_messages) == (2, (f"QUOTA_EXCEEDED: {QUOTA}",) * 2)
    assert (state.failed_for_capacity, state.failed_for_quota) == (True, True)

    done = _cleared(actuator, state)
    (alert,) = done.alerts
    assert alert.kind is AlertKind.STOCKOUT
    assert alert.summary == (
        f"2 units of gpu failed after the request was accepted: QUOTA_EXCEEDED: {QUOTA}; removed them, backing off "
        f"20m and using the next pool. {QUOTA_ADVICE}"
    )
    assert alert.details["error"] == f"QUOTA_EXCEEDED: {QUOTA}"
    assert alert.details["action"] == QUOTA_ADVICE


def test_a_stockout_on_the_instances_is_quoted_with_no_quota_advice(gke_api: FakeGkeApi) -> None:
    message = STOCKOUT.format(zone=ZONES[0])
    gke_api.stockout(ZONES[0], shown_on=("instances",), message=message)
    actuator, state = _failed(gke_api, ZONES[:1], 1, 3)
    assert state.failed_messages == (f"ZONE_RESOURCE_POOL_EXHAUSTED: {message}",) * 2
    assert (state.failed_for_capacity, state.failed_for_quota) == (True, False)

    (alert,) = _cleared(actuator, state).alerts
    assert alert.summary.startswith(
        f"2 units of gpu failed after the request was accepted: ZONE_RESOURCE_POOL_EXHAUSTED: {message}; removed them"
    )
    assert "action" not in alert.details


def test_computes_stockout_on_the_instances_is_quoted_with_its_code_once(gke_api: FakeGkeApi) -> None:
    """Compute sends the code and the message apart (ZONE_RESOURCE_POOL_EXHAUSTED; "The zone '...' does not have
    enough resources ...", tests/fakes/REFERENCE.md), and the alert joins them once."""
    gke_api.stockout(ZONES[0], shown_on=("instances",))
    actuator, state = _failed(gke_api, ZONES[:1], 1, 2)
    said = f"ZONE_RESOURCE_POOL_EXHAUSTED: {zone_stockout_message(ZONES[0])}"
    assert state.failed_messages == (said,)
    (alert,) = _cleared(actuator, state).alerts
    assert alert.summary.startswith(f"1 units of gpu failed after the request was accepted: {said}; removed them")
    assert alert.summary.count("ZONE_RESOURCE_POOL_EXHAUSTED") == 1


def test_a_stockout_told_on_the_operation_alone_is_quoted(gke_api: FakeGkeApi) -> None:
    """No instance says why: the resize operation's error ("Not all instances running in IGM ...") is their cause."""
    gke_api.stockout(ZONES[0], shown_on=("operation",))
    actuator, state = _failed(gke_api, ZONES[:1], 1, 3)
    assert state.failed_units == 2
    assert len(state.failed_messages) == 2
    assert all("Not all instances running in IGM" in m for m in state.failed_messages)
    (alert,) = _cleared(actuator, state).alerts
    assert "Not all instances running in IGM" in alert.summary


def test_a_zone_out_and_a_zone_short_of_quota_are_both_told_and_the_quota_advice_given(gke_api: FakeGkeApi) -> None:
    stockout = STOCKOUT.format(zone=ZONES[0])
    gke_api.stockout(ZONES[0], shown_on=("instances",), message=stockout)
    gke_api.stockout(ZONES[1], shown_on=("instances",), code="QUOTA_EXCEEDED", message=QUOTA)
    actuator, state = _failed(gke_api, ZONES, 2, 4)
    # The quota first: the summary quotes the one the advice says to have raised.
    assert state.failed_messages == (f"QUOTA_EXCEEDED: {QUOTA}", f"ZONE_RESOURCE_POOL_EXHAUSTED: {stockout}")
    assert state.failed_for_quota

    (alert,) = _cleared(actuator, state).alerts
    assert f"QUOTA_EXCEEDED: {QUOTA} and 1 more (see error)" in alert.summary
    assert alert.details["error"] == f"QUOTA_EXCEEDED: {QUOTA}; ZONE_RESOURCE_POOL_EXHAUSTED: {stockout}"
    assert alert.details["action"] == QUOTA_ADVICE


# -- when the pool and its zones back off: the same with the provider's messages as without -------------------------
@pytest.mark.parametrize(
    ("code", "message", "shown_on"),
    [
        ("QUOTA_EXCEEDED", QUOTA, ("instances",)),
        ("ZONE_RESOURCE_POOL_EXHAUSTED", STOCKOUT.format(zone=ZONES[0]), ("instances",)),
        ("ZONE_RESOURCE_POOL_EXHAUSTED", STOCKOUT.format(zone=ZONES[0]), ("operation",)),
    ],
)
def test_a_single_zone_pool_backs_off_its_lead_time_and_its_zone_the_zone_back_off(
    gke_api: FakeGkeApi, code: str, message: str, shown_on: tuple[str, ...]
) -> None:
    gke_api.stockout(ZONES[0], shown_on=shown_on, code=code, message=message)
    actuator, state = _failed(gke_api, ZONES[:1], 1, 3)
    done = _cleared(actuator, state)
    assert done.memory.backoff_until == {"gpu": T0 + LEAD}
    assert done.memory.backoff_reason == {"gpu": BackoffReason.STOCKOUT}
    assert _zone_backoff(actuator) == {ZONES[0]: T0 + ZONE_BACKOFF}


def test_a_zone_out_of_resources_backs_off_alone_while_another_has_room(gke_api: FakeGkeApi) -> None:
    """A quota, which the zones share, backs them all off: tests/actuators/test_gke_quota_shared_by_zones.py."""
    gke_api.stockout(ZONES[1], shown_on=("instances",), message=STOCKOUT.format(zone=ZONES[1]))
    actuator, state = _failed(gke_api, ZONES, 2, 4)
    assert state.failed_units == 1
    done = _cleared(actuator, state)
    assert done.memory.backoff_until == {}
    (alert,) = done.alerts
    assert alert.details["zones_out"] == ZONES[1]
    assert _zone_backoff(actuator) == {ZONES[0]: None, ZONES[1]: T0 + ZONE_BACKOFF}


def test_a_pool_whose_every_zone_fails_backs_off_its_lead_time(gke_api: FakeGkeApi) -> None:
    gke_api.stockout(ZONES[0], shown_on=("instances",), message=STOCKOUT.format(zone=ZONES[0]))
    gke_api.stockout(ZONES[1], shown_on=("instances",), code="QUOTA_EXCEEDED", message=QUOTA)
    actuator, state = _failed(gke_api, ZONES, 2, 4)
    done = _cleared(actuator, state)
    assert done.memory.backoff_until == {"gpu": T0 + LEAD}
    assert _zone_backoff(actuator) == dict.fromkeys(ZONES, T0 + ZONE_BACKOFF)

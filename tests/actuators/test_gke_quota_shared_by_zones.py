"""A quota used up is the region's (or the project's), not a zone's: the zones of a GKE node pool share it.

Compute Engine's quotas are regional or global ("Quota 'NVIDIA_A100_GPUS' exceeded.  Limit: 16.0 in region
us-central1.", "... Limit: 0.0 globally."; tests/fakes/REFERENCE.md), and a node pool's zones are all in its
cluster's region. When a pool's creates failed late for a quota in one zone, that zone alone was backed off and its
share moved to the pool's other zones, which the same quota refuses: the pool waited another lead time for creates
that could not succeed before it backed off, and the first alert said "us-central1-a take the nodes" with no word of
the quota. And once a zone backed off for a quota outlived the pool's own back-off (the zone's 30 minutes against a
20-minute lead time), the next scale-up was refused as 'zones out of capacity' with no quota flag, so it read "No
capacity for gpu" and lost the advice to have the quota raised. The real clients against ``tests.fakes.gke_api`` and
the agent's executor."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from actuators.gke_node_pool import GkeNodePoolActuator
from agent.executor import clear_failed_units, execute
from agent.executor_failures import QUOTA_ADVICE
from agent.planning import PlannerMemory
from config.cloud import NodePoolMapping
from models import (
    AcceleratorFamily,
    ActionStatus,
    AlertKind,
    CapacityPlan,
    CapacityTier,
    CapacityUnavailable,
    PoolKind,
    PoolSpec,
    Resize,
)
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)
LEAD = timedelta(minutes=20)
ZONE_BACKOFF = timedelta(minutes=30)  # the adapter's default
GPU = PoolSpec(
    "gpu", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 8, 30.0, LEAD, ("t",)
)
QUOTA = "Quota 'NVIDIA_A100_GPUS' exceeded.  Limit: 16.0 in region us-central1."  # REFERENCE.md
STOCKOUT = "The zone 'projects/test-project/zones/us-central1-b' does not have enough resources available."
ZONES = ("us-central1-a", "us-central1-b")


def _actuator(fake: FakeGkeApi, clock: SimulatedClock) -> GkeNodePoolActuator:
    clients = google_clients(fake.url)
    return GkeNodePoolActuator(
        clients.gke, clients.migs, CLUSTER, [NodePoolMapping(pool="gpu", node_pool="a100")], clock
    )


def test_a_regional_quota_met_in_one_zone_backs_the_pool_and_every_zone_off(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=2, zones=ZONES)
    # The region had room for one more node: zone a's was created, zone b's failed for the quota.
    gke_api.stockout(ZONES[0], room=1, shown_on=("instances",), code="QUOTA_EXCEEDED", message=QUOTA)
    gke_api.stockout(ZONES[1], shown_on=("instances",), code="QUOTA_EXCEEDED", message=QUOTA)
    clock = SimulatedClock(T0)
    actuator = _actuator(gke_api, clock)
    assert actuator.resize("gpu", 4, "up").status is ActionStatus.STARTED
    gke_api.advance()
    (state,) = actuator.list_pools()
    assert (state.target_units, state.failed_units) == (3, 1)

    done = clear_failed_units({"gpu": state}, actuator, {"gpu": GPU}, PlannerMemory(), T0)
    (alert,) = done.alerts
    assert alert.kind is AlertKind.STOCKOUT
    assert alert.details["action"] == QUOTA_ADVICE  # not "us-central1-a take the nodes"
    assert done.memory.backoff_until == {"gpu": T0 + LEAD}
    (state,) = actuator.list_pools()
    assert [z.backoff_until for z in state.zones] == [T0 + ZONE_BACKOFF] * 2

    resizes = gke_api.calls("POST", "/resize")
    with pytest.raises(CapacityUnavailable) as refused:
        actuator.resize("gpu", 4, "again")
    assert refused.value.quota
    assert QUOTA in str(refused.value)
    assert gke_api.calls("POST", "/resize") == resizes  # nothing asked of a zone the same quota refuses


@pytest.mark.parametrize(("code", "message", "quota"), [("QUOTA_EXCEEDED", QUOTA, True), ("", STOCKOUT, False)])
def test_a_scale_up_refused_while_a_zone_is_out_for_a_quota_still_says_it_is_a_quota(
    gke_api: FakeGkeApi, code: str, message: str, quota: bool
) -> None:
    """The pool's back-off (its lead time) ends before its zone's (zone_backoff): the scale-up asked for then is
    refused by the adapter for the zone still out, and tells the quota as the first alert did."""
    gke_api.add_pool("a100", nodes=1, zones=ZONES[1:])
    gke_api.stockout(ZONES[1], shown_on=("instances",), code=code or "ZONE_RESOURCE_POOL_EXHAUSTED", message=message)
    clock = SimulatedClock(T0)
    actuator = _actuator(gke_api, clock)
    actuator.resize("gpu", 2, "up")
    gke_api.advance()
    (state,) = actuator.list_pools()
    first = clear_failed_units({"gpu": state}, actuator, {"gpu": GPU}, PlannerMemory(), T0)
    assert first.memory.backoff_until == {"gpu": T0 + LEAD}

    later = T0 + LEAD
    clock.advance(LEAD)
    plan = CapacityPlan(later, (Resize("gpu", 1, 2, "demand queued", "k2"),))
    done = execute(plan, actuator, {"gpu": GPU}, first.memory, later)
    (alert,) = done.alerts
    assert alert.summary.startswith("Quota used up for gpu" if quota else "No capacity for gpu")
    assert ("action" in alert.details) is quota
    assert f"{ZONES[1]} until 00:30Z" in alert.details["error"]


def test_a_refusal_at_the_call_mixing_a_stockout_and_a_quota_tells_both_and_is_a_quota(gke_api: FakeGkeApi) -> None:
    """setSize refused for zone a's stockout, then zone by zone: a refuses for its stockout, b for GKE's regional quota
    (403). The alert says a quota is used up, with the advice, and its error names each zone's own reason."""
    regional = (
        "Insufficient regional quota to satisfy request: resource \"NVIDIA_A100_GPUS\": request requires '1.0' and is "
        "short '1.0'. project has a quota of '16.0' with '0.0' available."
    )  # GKE's 403 (tests/fakes/REFERENCE.md)
    gke_api.add_pool("a100", nodes=2, zones=ZONES)
    gke_api.stockout(ZONES[0], mode="http")
    mig_b = gke_api.pools["a100"].migs[1].name
    gke_api.fail_next(1, 403, regional, path=f"zones/{ZONES[1]}/instanceGroupManagers/{mig_b}/resize")
    clock = SimulatedClock(T0)
    actuator = _actuator(gke_api, clock)
    plan = CapacityPlan(T0, (Resize("gpu", 2, 4, "demand queued", "k1"),))
    done = execute(plan, actuator, {"gpu": GPU}, PlannerMemory(), T0)
    (alert,) = done.alerts
    assert alert.summary.startswith("Quota used up for gpu; backing off 20m")
    assert alert.details["action"] == QUOTA_ADVICE
    error = alert.details["error"]
    assert f"zone {ZONES[0]}: " in error and "cannot grow in zone us-central1-a" in error
    assert f"zone {ZONES[1]}: " in error and regional in error
    assert f"zones out of capacity: {ZONES[0]} until 00:30Z" in error
    assert f"zones out for a quota used up: {ZONES[1]} until 00:30Z" in error
    assert done.memory.backoff_until == {"gpu": T0 + LEAD}

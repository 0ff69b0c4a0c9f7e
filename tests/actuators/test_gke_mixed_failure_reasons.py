"""A GKE pool whose new nodes failed for different reasons in different zones: a stockout or a quota in one, a subnet
out of addresses (IP_SPACE_EXHAUSTED) in another.

What is quoted and what backs off follow capacity: a refusal under ``move-bounds`` (a quota backs every zone off; a
stockout only its zone, whose share goes to the others) quotes the quota (then the stockout)
and is a quota when any node failed for one, whichever failed instance was listed first; the failed units' messages
put a quota first, then a stockout, so the alert that says to have a quota raised names it. Only zones whose nodes
failed for capacity back off (``ZoneState.failed_for_capacity``): a subnet is its region's and serves every zone of
the pool (its name, 'projects/P/regions/R/subnetworks/S', says so; tests/fakes/REFERENCE.md), so a zone out of
addresses is not backed off and the zone alert says that it still takes nodes. The real clients against
``tests.fakes.gke_api`` and the agent's executor."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Literal

import pytest

from actuators.gke_node_pool import GkeNodePoolActuator
from agent.executor import clear_failed_units, execute
from agent.executor_failures import QUOTA_ADVICE
from agent.planning import PlannerMemory
from config.cloud import NodePoolMapping
from models import (
    AcceleratorFamily,
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
from tests.fakes.gke_api import FakeGkeApi, zone_stockout_message

T0 = datetime(2024, 5, 1, tzinfo=UTC)
LEAD = timedelta(minutes=20)
GPU = PoolSpec(
    "gpu", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 12, 30.0, LEAD, ("t",)
)
ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
IP_SPACE = (
    "Instance 'gke-ml-a100-0-grp-0002' creation failed: IP space of "
    "'projects/test-project/regions/us-central1/subnetworks/default' is exhausted."
)
QUOTA = "Quota 'NVIDIA_A100_GPUS' exceeded.  Limit: 16.0 in region us-central1."  # REFERENCE.md
AUTOSCALING = {"enabled": True, "minNodeCount": 0, "maxNodeCount": 8}


def _actuator(fake: FakeGkeApi, mode: Literal["refuse", "move-bounds"] = "refuse") -> GkeNodePoolActuator:
    clients = google_clients(fake.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100", gke_autoscaling=mode)
    return GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], SimulatedClock(T0))


def _out_of_addresses_in_a(fake: FakeGkeApi, code: str, message: str) -> None:
    """Zone a's new nodes are refused an address, zone b's fail with ``code``; GKE's autoscaler adds one to each."""
    fake.add_pool("a100", nodes=2, zones=ZONES[:2], autoscaling=AUTOSCALING)
    fake.stockout(ZONES[0], shown_on=("instances",), code="IP_SPACE_EXHAUSTED", message=IP_SPACE)
    fake.stockout(ZONES[1], shown_on=("instances",), code=code, message=message)
    fake.autoscale("a100", 4)
    fake.advance()


def test_a_refusal_under_move_bounds_quotes_the_quota_not_the_subnet(gke_api: FakeGkeApi) -> None:
    """A quota is the region's: every zone backs off for it and the scale-up is refused as a quota."""
    _out_of_addresses_in_a(gke_api, "QUOTA_EXCEEDED", QUOTA)
    actuator = _actuator(gke_api, "move-bounds")
    (state,) = actuator.list_pools()
    assert (state.target_units, state.failed_units) == (2, 2)
    with pytest.raises(CapacityUnavailable) as refused:
        actuator.resize("gpu", 3, "up")
    assert refused.value.quota
    assert f"2 instances could not be created: QUOTA_EXCEEDED: {QUOTA}" in str(refused.value)
    assert _group_sizes(gke_api) == [1, 1]


def test_a_stockout_in_one_zone_under_move_bounds_places_the_share_in_the_zone_out_of_addresses(
    gke_api: FakeGkeApi,
) -> None:
    """Zone b, out of capacity, backs off; zone a, whose node was refused an address of the region's subnet, does not
    (every zone meets that), so the scale-up is placed there, as for a pool without GKE autoscaling, and the bounds
    follow. It was refused whole, as a stockout, before."""
    _out_of_addresses_in_a(gke_api, "ZONE_RESOURCE_POOL_EXHAUSTED", zone_stockout_message(ZONES[1]))
    actuator = _actuator(gke_api, "move-bounds")
    result = actuator.resize("gpu", 3, "up")
    assert "target 3 nodes (us-central1-a 2, us-central1-b 1)" in result.detail
    assert _group_sizes(gke_api) == [2, 1]
    assert gke_api.pools["a100"].spec["autoscaling"]["totalMaxNodeCount"] == 3
    (state,) = actuator.list_pools()
    assert [z.backoff_until is not None for z in state.zones] == [False, True]


def test_a_refusal_under_move_bounds_quotes_a_quota_over_a_stockout_listed_before_it(gke_api: FakeGkeApi) -> None:
    """The stockout's zone is listed first, so its failed instance is read first: the quota is still quoted."""
    gke_api.add_pool("a100", nodes=2, zones=ZONES[:2], autoscaling=AUTOSCALING)
    gke_api.stockout(ZONES[0], shown_on=("instances",))
    gke_api.stockout(ZONES[1], shown_on=("instances",), code="QUOTA_EXCEEDED", message=QUOTA)
    gke_api.autoscale("a100", 4)
    gke_api.advance()
    actuator = _actuator(gke_api, "move-bounds")
    with pytest.raises(CapacityUnavailable) as refused:
        actuator.resize("gpu", 3, "up")
    assert refused.value.quota
    assert f"2 instances could not be created: QUOTA_EXCEEDED: {QUOTA}" in str(refused.value)


def _group_sizes(fake: FakeGkeApi) -> list[int]:
    return [mig.target_size for mig in fake.pools["a100"].migs]


def test_a_quota_and_a_subnet_out_of_addresses_under_move_bounds_alert_a_quota_with_the_advice(
    gke_api: FakeGkeApi,
) -> None:
    _out_of_addresses_in_a(gke_api, "QUOTA_EXCEEDED", QUOTA)
    actuator = _actuator(gke_api, "move-bounds")
    plan = CapacityPlan(T0, (Resize("gpu", 2, 3, "demand queued", "k"),))
    done = execute(plan, actuator, {"gpu": GPU}, PlannerMemory(), T0)
    (alert,) = done.alerts
    assert alert.summary.startswith("Quota used up for gpu")
    assert QUOTA in alert.details["error"]
    assert done.memory.in_backoff("gpu", T0)


def test_a_quota_and_a_subnet_out_of_addresses_quote_the_quota_it_says_to_raise(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=2, zones=ZONES[:2])
    gke_api.stockout(ZONES[0], shown_on=("instances",), code="IP_SPACE_EXHAUSTED", message=IP_SPACE)
    gke_api.stockout(ZONES[1], shown_on=("instances",), code="QUOTA_EXCEEDED", message=QUOTA)
    actuator = _actuator(gke_api)
    actuator.resize("gpu", 4, "up")
    gke_api.advance()
    (state,) = actuator.list_pools()
    assert state.failed_messages == (f"QUOTA_EXCEEDED: {QUOTA}", f"IP_SPACE_EXHAUSTED: {IP_SPACE}")
    done = clear_failed_units({"gpu": state}, actuator, {"gpu": GPU}, PlannerMemory(), T0)
    (alert,) = done.alerts
    assert alert.kind is AlertKind.STOCKOUT
    assert f"accepted: QUOTA_EXCEEDED: {QUOTA} and 1 more (see error)" in alert.summary
    assert alert.summary.endswith(QUOTA_ADVICE)


def test_only_the_zone_out_of_capacity_backs_off_and_the_alert_says_the_other_still_takes_nodes(
    gke_api: FakeGkeApi,
) -> None:
    gke_api.add_pool("a100", nodes=1, zones=ZONES)  # one node, in zone a
    gke_api.stockout(ZONES[0], shown_on=("instances",))
    gke_api.stockout(ZONES[1], shown_on=("instances",), code="IP_SPACE_EXHAUSTED", message=IP_SPACE)
    actuator = _actuator(gke_api)
    actuator.resize("gpu", 6, "up")  # two in each zone
    gke_api.advance()
    (state,) = actuator.list_pools()
    assert [(z.zone, z.failed_units, z.failed_for_capacity) for z in state.zones] == [
        ("us-central1-a", 1, True),
        ("us-central1-b", 2, False),
        ("us-central1-c", 0, False),
    ]
    assert state.failed_messages[0].startswith("ZONE_RESOURCE_POOL_EXHAUSTED: ")  # the stockout quoted first

    done = clear_failed_units({"gpu": state}, actuator, {"gpu": GPU}, PlannerMemory(), T0)
    (alert,) = done.alerts
    assert (alert.details["zones_out"], alert.details["zones_open"]) == ("us-central1-a", "us-central1-b,us-central1-c")
    assert "removed them, us-central1-a backs off for want of capacity and us-central1-b, us-central1-c take" in (
        alert.summary
    )
    assert "us-central1-b is not backed off for the units that failed there for a reason of their own" in alert.summary
    assert IP_SPACE in alert.details["error"]
    assert not done.memory.in_backoff("gpu", T0)

    # What the alert says is what the adapter does: zone a is left out, zones b and c take the next nodes.
    (state,) = actuator.list_pools()
    assert [(z.zone, z.backoff_until) for z in state.zones] == [
        ("us-central1-a", T0 + timedelta(minutes=30)),
        ("us-central1-b", None),
        ("us-central1-c", None),
    ]
    actuator.resize("gpu", state.target_units + 2, "again")
    assert [m.target_size for m in gke_api.pools["a100"].migs] == [1, 2, 2]  # b refilled, c holds 2

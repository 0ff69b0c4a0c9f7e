"""GKE node pools that span zones: sizes are per zone in GKE's and Compute's APIs, so the adapter decides whole nodes
per zone, spreads new ones over the zones with room, moves a stocked-out zone's share to the others, and backs that
zone off (``zone_backoff``) before the pool as a whole is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.instrumented import InstrumentedActuator
from config.cloud import NodePoolMapping
from models import ActionStatus, CapacityUnavailable, ZoneState
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
START = datetime(2024, 5, 1, tzinfo=UTC)


def _adapter(fake: FakeGkeApi, clock: SimulatedClock) -> GkeNodePoolActuator:
    clients = google_clients(fake.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100")
    return GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], clock)  # zones backed off for 30m


def _per_zone(fake: FakeGkeApi) -> list[int]:
    return [m.target_size for m in fake.pools["a100"].migs]


def _running(fake: FakeGkeApi) -> int:
    return sum(1 for m in fake.pools["a100"].migs for i in m.instances if i.action == "NONE")


def test_a_scale_up_from_10_to_13_nodes_on_a_three_zone_pool_leaves_13(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=10, zones=ZONES)  # 4 / 3 / 3
    clock = SimulatedClock(START)
    result = _adapter(gke_api, clock).resize("gpu", 13, "up")
    assert result.status is ActionStatus.STARTED
    assert _per_zone(gke_api) == [5, 4, 4]
    gke_api.advance()
    assert _running(gke_api) == 13
    (state,) = _adapter(gke_api, clock).list_pools()
    assert (state.ready_units, state.target_units) == (13, 13)
    assert state.zones == (
        ZoneState("us-central1-a", 5, 5),
        ZoneState("us-central1-b", 4, 4),
        ZoneState("us-central1-c", 4, 4),
    )


def test_a_zone_that_refuses_the_resize_gets_its_share_placed_in_the_other_zones(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=9, zones=ZONES)
    gke_api.stockout("us-central1-a", mode="http")
    clock = SimulatedClock(START)
    actuator = _adapter(gke_api, clock)
    result = actuator.resize("gpu", 12, "up")
    assert result.status is ActionStatus.STARTED
    assert _per_zone(gke_api) == [3, 5, 4]
    (state,) = actuator.list_pools()
    assert state.target_units == 12
    assert state.zones[0].backoff_until == START + timedelta(minutes=30)
    assert [z.backoff_until for z in state.zones[1:]] == [None, None]
    gke_api.advance()
    assert _running(gke_api) == 12


def test_a_late_stockout_in_one_zone_moves_its_failed_nodes_to_the_other_zones(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=9, zones=ZONES)
    gke_api.stockout("us-central1-b", mode="operation", shown_on=("instances",))
    clock = SimulatedClock(START)
    actuator = _adapter(gke_api, clock)
    actuator.resize("gpu", 12, "up")  # 4 / 4 / 4: zone b accepts, then cannot create its new node
    gke_api.advance()
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (11, 11, 1)
    assert state.zones[1] == ZoneState("us-central1-b", 3, 3, failed_units=1, failed_for_capacity=True)

    again = actuator.resize("gpu", 12, "again")
    assert again.status is ActionStatus.STARTED
    assert _per_zone(gke_api) == [5, 3, 4]
    gke_api.advance()
    assert _running(gke_api) == 12
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (12, 12, 0)
    assert state.zones[1].backoff_until == START + timedelta(minutes=30)


def test_the_pool_is_refused_only_when_every_zone_is_out_and_a_zone_comes_back_after_its_backoff(
    gke_api: FakeGkeApi,
) -> None:
    gke_api.add_pool("a100", nodes=3, zones=ZONES)
    for zone in ZONES:
        gke_api.stockout(zone, mode="http")
    clock = SimulatedClock(START)
    actuator = _adapter(gke_api, clock)
    with pytest.raises(CapacityUnavailable, match="us-central1-c"):
        actuator.resize("gpu", 5, "up")
    assert _per_zone(gke_api) == [1, 1, 1]
    gke_api.restock()
    clock.advance(timedelta(minutes=29))
    with pytest.raises(CapacityUnavailable, match="zones out of capacity"):
        actuator.resize("gpu", 5, "still-backed-off")  # nothing is asked of a zone still backed off
    clock.advance(timedelta(minutes=1))
    assert actuator.resize("gpu", 5, "back").status is ActionStatus.STARTED
    assert _per_zone(gke_api) == [2, 2, 1]


def test_a_scale_down_takes_nodes_from_the_fullest_zones(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=13, zones=ZONES)  # 5 / 4 / 4
    actuator = _adapter(gke_api, SimulatedClock(START))
    actuator.resize("gpu", 10, "down")
    assert _per_zone(gke_api) == [4, 3, 3]


def test_per_zone_units_and_backoff_are_exported(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=9, zones=ZONES)
    gke_api.stockout("us-central1-a", mode="http")
    registry = CollectorRegistry()
    actuator = InstrumentedActuator(_adapter(gke_api, SimulatedClock(START)), registry)
    actuator.resize("gpu", 12, "up")
    actuator.list_pools()

    def sample(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {"pool": "gpu", **labels})

    assert [sample("leadtime_pool_zone_units", zone=z, state="target") for z in ZONES] == [3.0, 5.0, 4.0]
    assert [sample("leadtime_pool_zone_units", zone=z, state="ready") for z in ZONES] == [3.0, 3.0, 3.0]
    until = (START + timedelta(minutes=30)).timestamp()
    assert [sample("leadtime_pool_zone_backoff_until_seconds", zone=z) for z in ZONES] == [until, 0.0, 0.0]

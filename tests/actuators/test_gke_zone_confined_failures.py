"""A GKE pool whose new nodes failed in one zone for an error confined to that zone, not for capacity: the zone backs
off and the pool's other zones take its share.

A specific reservation is a zone's resource ('projects/P/zones/Z/reservations/R'), so "Specified reservation '...' does
not have available resources for the request." (CONDITION_NOT_MET, as cluster-autoscaler's ``GetErrorInfo`` reads it)
in zone a says nothing of zones b and c. Read as the pool's own failure, the uniform setSize gave zone a its share at
every scale-up, those nodes failed and were removed, the pool sat at 7 of 9 while b and c had room, and once that had
lasted its lead time the whole pool backed off and sent its demand to a dearer pool. Errors naming a resource of the
region or the project (a subnet out of addresses, a permission, a global image) are met by every zone alike and back
no zone off (tests/fakes/REFERENCE.md). The real clients against ``tests.fakes.gke_api`` and the agent's executor."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.node_pool_zones import is_zonal_error
from agent.executor import clear_failed_units, execute
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
from tests.fakes.gke_api import FakeGkeApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)
LEAD = timedelta(minutes=20)
GPU = PoolSpec(
    "gpu", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 12, 30.0, LEAD, ("t",)
)
ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
RESERVATION = (
    "CONDITION_NOT_MET",
    "Specified reservation 'a100-resv' does not have available resources for the request.",
)
IP_SPACE = (
    "IP_SPACE_EXHAUSTED",
    "Instance 'gke-ml-a100-0-grp-0002' creation failed: IP space of "
    "'projects/test-project/regions/us-central1/subnetworks/default' is exhausted.",
)
PERMISSION = (
    "PERMISSIONS_ERROR",
    "Instance 'gke-ml-a100-0-grp-0002' creation failed: Required 'compute.images.useReadOnly' permission for "
    "'projects/test-project/global/images/gke-node-image'",
)
GLOBAL_IMAGE = (
    "RESOURCE_NOT_FOUND",
    "The resource 'projects/test-project/global/images/gke-node-image' was not found",
)


def _pool(
    fake: FakeGkeApi, zones: tuple[str, ...], error: tuple[str, str]
) -> tuple[GkeNodePoolActuator, SimulatedClock]:
    """One node in each zone; the first zone's new nodes fail with ``error``."""
    fake.add_pool("a100", nodes=len(zones), zones=zones)
    fake.stockout(zones[0], shown_on=("instances",), code=error[0], message=error[1])
    clock = SimulatedClock(T0)
    clients = google_clients(fake.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100")
    return GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], clock), clock


def test_a_reservation_used_up_in_one_zone_backs_that_zone_off_and_the_others_take_its_share(
    gke_api: FakeGkeApi,
) -> None:
    actuator, clock = _pool(gke_api, ZONES, RESERVATION)
    memory = PlannerMemory()
    done = execute(CapacityPlan(T0, (Resize("gpu", 3, 9, "demand", "k0"),)), actuator, {"gpu": GPU}, memory, T0)
    memory = done.memory
    gke_api.advance()
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (7, 7, 2)
    assert [(z.zone, z.failed_units, z.failed_for_capacity, z.failed_in_zone) for z in state.zones] == [
        ("us-central1-a", 2, False, True),
        ("us-central1-b", 0, False, False),
        ("us-central1-c", 0, False, False),
    ]

    cleared = clear_failed_units({"gpu": state}, actuator, {"gpu": GPU}, memory, T0)
    memory = cleared.memory
    (alert,) = cleared.alerts
    assert alert.kind is AlertKind.STOCKOUT
    assert (alert.details["zones_out"], alert.details["zones_open"]) == ("us-central1-a", "us-central1-b,us-central1-c")
    assert (
        "removed them, us-central1-a backs off for the units that failed there for a reason confined to that zone, "
        "not for capacity (see error) and us-central1-b, us-central1-c take the nodes"
    ) in alert.summary
    assert RESERVATION[1] in alert.details["error"]
    assert not memory.in_backoff("gpu", T0)

    # What the alert says is what the adapter does: zone a is left out, b and c take the two nodes.
    (state,) = actuator.list_pools()
    assert [(z.zone, z.backoff_until) for z in state.zones] == [
        ("us-central1-a", T0 + timedelta(minutes=30)),
        ("us-central1-b", None),
        ("us-central1-c", None),
    ]
    for minute in range(2, 25, 2):  # past the lead time: the pool reaches 9 and never backs off
        now = T0 + timedelta(minutes=minute)
        clock.advance(now - clock.now())
        gke_api.advance()
        (state,) = actuator.list_pools()
        memory = clear_failed_units({"gpu": state}, actuator, {"gpu": GPU}, memory, now).memory
        if state.target_units < 9:
            plan = CapacityPlan(now, (Resize("gpu", state.target_units, 9, "demand", f"k{minute}"),))
            memory = execute(plan, actuator, {"gpu": GPU}, memory, now).memory
        assert not memory.in_backoff("gpu", now)
    assert [m.target_size for m in gke_api.pools["a100"].migs] == [1, 4, 4]
    assert (state.ready_units, state.target_units, state.failed_units) == (9, 9, 0)


def test_a_refusal_once_no_zone_is_left_says_which_zone_is_out_for_its_error_and_which_for_capacity(
    gke_api: FakeGkeApi,
) -> None:
    actuator, _ = _pool(gke_api, ZONES[:2], RESERVATION)
    actuator.resize("gpu", 4, "up")
    gke_api.advance()
    (state,) = actuator.list_pools()
    clear_failed_units({"gpu": state}, actuator, {"gpu": GPU}, PlannerMemory(), T0)  # zone a backs off
    gke_api.stockout(ZONES[1], mode="http")
    with pytest.raises(CapacityUnavailable) as refused:
        actuator.resize("gpu", 4, "again")
    assert not refused.value.quota
    assert "zones out of capacity: us-central1-b until 00:30Z" in str(refused.value)
    assert (
        "zones out after units failed there for a reason of the zone: us-central1-a until 00:30Z "
        f"({RESERVATION[0]}: {RESERVATION[1]})"
    ) in str(refused.value)


@pytest.mark.parametrize("error", [IP_SPACE, PERMISSION, GLOBAL_IMAGE], ids=lambda e: e[0])
def test_an_error_every_zone_meets_backs_no_zone_off(gke_api: FakeGkeApi, error: tuple[str, str]) -> None:
    actuator, _ = _pool(gke_api, ZONES, error)
    actuator.resize("gpu", 6, "up")
    gke_api.advance()
    (state,) = actuator.list_pools()
    assert [(z.failed_units, z.failed_in_zone) for z in state.zones] == [(1, False), (0, False), (0, False)]
    cleared = clear_failed_units({"gpu": state}, actuator, {"gpu": GPU}, PlannerMemory(), T0)
    assert cleared.alerts == ()  # removed and asked for again: the pool backs off once they keep failing
    (state,) = actuator.list_pools()
    assert [z.backoff_until for z in state.zones] == [None, None, None]


def test_an_error_confined_to_the_only_zone_is_the_pools(gke_api: FakeGkeApi) -> None:
    """No other zone can take the share: the zone is not backed off, and the pool backs off once its units have kept
    failing for its lead time, as for any reason of their own."""
    actuator, _ = _pool(gke_api, ZONES[:1], RESERVATION)
    actuator.resize("gpu", 3, "up")
    gke_api.advance()
    (state,) = actuator.list_pools()
    assert [(z.failed_units, z.failed_in_zone) for z in state.zones] == [(2, False)]
    cleared = clear_failed_units({"gpu": state}, actuator, {"gpu": GPU}, PlannerMemory(), T0)
    assert (cleared.alerts, cleared.memory.units_failing_since) == ((), {"gpu": T0})
    (state,) = actuator.list_pools()
    assert [z.backoff_until for z in state.zones] == [None]


@pytest.mark.parametrize(
    ("error", "zonal"),
    [
        (": ".join(RESERVATION), True),
        (
            "CONDITION_NOT_MET: Specified reservations [projects/p/zones/us-central1-a/reservations/r] do not exist",
            True,
        ),
        (": ".join(IP_SPACE), False),
        (": ".join(PERMISSION), False),
        (": ".join(GLOBAL_IMAGE), False),
        ("CONDITION_NOT_MET: Constraint constraints/compute.vmExternalIpAccess violated for project p", False),
        ("", False),
    ],
)
def test_which_errors_are_confined_to_a_zone(error: str, zonal: bool) -> None:
    assert is_zonal_error(error) is zonal

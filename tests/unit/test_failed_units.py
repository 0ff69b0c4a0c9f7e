"""Units a pool reports failed after an accepted request: removed and the pool backed off before planning."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from actuators import SimulatedCluster
from agent.executor import clear_failed_units
from agent.planning import PlannerMemory
from models import AcceleratorFamily, ActionStatus, AlertKind, CapacityTier, PoolKind, PoolSpec, ZoneState
from models.clock import SimulatedClock

T0 = datetime(2024, 1, 1, tzinfo=UTC)
LEAD = timedelta(minutes=20)
POOL = PoolSpec("spot", PoolKind.GPU_NODE_POOL, CapacityTier.SPOT, AcceleratorFamily.GPU, 8, 0, 10, 9.0, LEAD, ("a",))
POOLS = {POOL.pool_id: POOL}


def stuck_cluster(ready: int, asked: int) -> SimulatedCluster:
    """A pool with ``ready`` units up and ``asked`` more accepted, then found impossible to create."""
    cluster = SimulatedCluster([POOL], SimulatedClock(T0), {"spot": ready})
    cluster.resize("spot", ready + asked, "up")
    cluster.fail_in_flight("spot")
    return cluster


def test_failed_units_are_removed_and_the_pool_backs_off_for_its_lead_time() -> None:
    cluster = stuck_cluster(ready=2, asked=3)
    (before,) = cluster.list_pools()
    assert (before.target_units, before.failed_units) == (2, 3)

    done = clear_failed_units({"spot": before}, cluster, POOLS, PlannerMemory(), T0)

    (after,) = cluster.list_pools()
    assert (after.ready_units, after.target_units, after.failed_units) == (2, 2, 0)
    assert [(r.pool_id, r.status) for r in done.results] == [("spot", ActionStatus.DONE)]
    assert done.memory.in_backoff("spot", T0 + LEAD - timedelta(seconds=1))
    assert not done.memory.in_backoff("spot", T0 + LEAD)
    (alert,) = done.alerts
    assert (alert.kind, alert.subject, alert.details["failed_units"]) == (AlertKind.STOCKOUT, "spot", "3")


def test_a_pool_already_backed_off_is_cleared_without_a_second_alert() -> None:
    cluster = stuck_cluster(ready=0, asked=2)
    (state,) = cluster.list_pools()
    memory = PlannerMemory().back_off("spot", T0 + timedelta(hours=1))

    done = clear_failed_units({"spot": state}, cluster, POOLS, memory, T0)

    assert cluster.list_pools()[0].failed_units == 0
    assert done.alerts == ()
    assert done.memory.backoff_until["spot"] == T0 + timedelta(hours=1)


def test_pools_without_failed_units_or_blocked_are_left_alone() -> None:
    healthy = SimulatedCluster([POOL], SimulatedClock(T0), {"spot": 2})
    (state,) = healthy.list_pools()
    done = clear_failed_units({"spot": state}, healthy, POOLS, PlannerMemory(), T0)
    assert (done.results, done.alerts, done.memory) == ((), (), PlannerMemory())

    stuck = stuck_cluster(ready=1, asked=1)
    (state,) = stuck.list_pools()
    blocked = PlannerMemory().block("spot", "403 from the cloud")
    done = clear_failed_units({"spot": state}, stuck, POOLS, blocked, T0)
    assert done.results == () and done.alerts == ()
    assert stuck.list_pools()[0].failed_units == 1  # a blocked pool is not touched at all


def test_failed_units_in_one_zone_leave_the_pool_open_while_another_zone_has_room() -> None:
    cluster = stuck_cluster(ready=2, asked=1)
    (state,) = cluster.list_pools()
    zones = (ZoneState("zone-a", 1, 1, failed_units=1), ZoneState("zone-b", 1, 1), ZoneState("zone-c", 0, 0))
    done = clear_failed_units({"spot": replace(state, zones=zones)}, cluster, POOLS, PlannerMemory(), T0)
    assert cluster.list_pools()[0].failed_units == 0
    assert not done.memory.in_backoff("spot", T0)
    (alert,) = done.alerts
    assert (alert.kind, alert.details["zones_out"], alert.details["zones_open"]) == (
        AlertKind.STOCKOUT,
        "zone-a",
        "zone-b,zone-c",
    )


def test_the_pool_backs_off_when_no_zone_has_room_left() -> None:
    cluster = stuck_cluster(ready=2, asked=2)
    (state,) = cluster.list_pools()
    later = T0 + timedelta(minutes=30)
    zones = (
        ZoneState("zone-a", 1, 1, failed_units=1),
        ZoneState("zone-b", 1, 1, 1),
        ZoneState("zone-c", 0, 0, 0, later),
    )
    done = clear_failed_units({"spot": replace(state, zones=zones)}, cluster, POOLS, PlannerMemory(), T0)
    assert done.memory.in_backoff("spot", T0)


def test_a_zone_whose_units_failed_for_a_reason_of_their_own_takes_no_nodes_while_it_is_still_backed_off() -> None:
    """Zone b's units failed for a reason every zone meets (not backed off for it), but b is still backed off from an
    earlier stockout: only zone c takes the nodes, and the alert says so."""
    cluster = stuck_cluster(ready=2, asked=2)
    (state,) = cluster.list_pools()
    later = T0 + timedelta(minutes=30)
    said = ("ZONE_RESOURCE_POOL_EXHAUSTED: out in zone-a", "IP_SPACE_EXHAUSTED: subnet of the region out of addresses")
    zones = (
        ZoneState("zone-a", 1, 1, failed_units=1, failed_for_capacity=True),
        ZoneState("zone-b", 1, 1, failed_units=1, backoff_until=later),
        ZoneState("zone-c", 0, 0),
    )
    read = replace(state, failed_messages=said, failed_for_capacity=True, zones=zones)
    done = clear_failed_units({"spot": read}, cluster, POOLS, PlannerMemory(), T0)
    assert not done.memory.in_backoff("spot", T0)
    (alert,) = done.alerts
    assert (alert.details["zones_out"], alert.details["zones_open"]) == ("zone-a", "zone-c")
    assert "zone-a backs off for want of capacity and zone-c takes the nodes" in alert.summary

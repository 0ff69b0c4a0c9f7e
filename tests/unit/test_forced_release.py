"""Forced releases (a budget's hard stop) through ``NodeDrains`` on the simulated cluster: busy units go once the idle
ones do not cover the release, idle ones first, and the units drained leave the capacity the next step serves with."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from actuators import DryRunDrainer, SimulatedCluster
from agent.daemon.guard import LeaderOnlyDrainer
from agent.drains import NodeDrains
from models import AcceleratorFamily, ActionStatus, CapacityTier, PoolKind, PoolSpec, Resize, drain_key
from models.clock import SimulatedClock

T0 = datetime(2024, 1, 1, tzinfo=UTC)
WINDOW = timedelta(minutes=10)
CHIPS = 8
POOL = PoolSpec("gpu", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, CHIPS, 0, 10, 24.0,
                timedelta(minutes=10), ("a",))  # fmt: skip
REASON = "budget hard stop: the money left pays for 1 unit through the next tick"


def _cluster(units: int, busy: int) -> tuple[SimulatedCluster, SimulatedClock, NodeDrains]:
    """``units`` ready units, ``busy`` of them serving demand from ``T0``."""
    clock = SimulatedClock(T0)
    cluster = SimulatedCluster([POOL], clock, {"gpu": units})
    cluster.serve(clock.now(), {"a": float(CHIPS * busy)})
    return cluster, clock, NodeDrains({"gpu": cluster}, WINDOW)


def _release(from_units: int, to_units: int, *, forced: bool = True) -> Resize:
    return Resize("gpu", from_units, to_units, REASON, f"gpu@{T0.isoformat()}->{to_units}", forced=forced)


def test_a_forced_release_drains_a_busy_unit_and_the_next_step_finds_less_capacity(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster, clock, drains = _cluster(units=3, busy=3)
    refused = drains.scale_down(_release(3, 2, forced=False), clock.now())
    assert [r.status for r in refused.results] == [ActionStatus.REJECTED]
    assert cluster.ready_units() == {"gpu": 3}

    caplog.set_level(logging.INFO, logger="agent.drains")
    release = _release(3, 2)
    outcome = drains.scale_down(release, clock.now())
    assert [(r.key, r.status) for r in outcome.results] == [(drain_key(release.key, "gpu-busy-0"), ActionStatus.DONE)]
    assert cluster.ready_units() == {"gpu": 2}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"draining busy node gpu-busy-0 of pool gpu: {REASON}"]
    step = cluster.serve(clock.now(), {"a": float(CHIPS * 3)})
    assert step.unserved == {"a": float(CHIPS)}  # the drained unit's work waits


def test_a_forced_release_takes_idle_units_first_even_before_the_window(caplog: pytest.LogCaptureFixture) -> None:
    cluster, clock, drains = _cluster(units=4, busy=2)
    clock.advance(WINDOW / 2)  # idle for half the window: a plain release would take none of them
    cluster.serve(clock.now(), {"a": float(CHIPS * 2)})
    idle = list(cluster.idle_nodes("gpu", timedelta(0)))
    assert len(idle) == 2

    caplog.set_level(logging.INFO, logger="agent.drains")
    release = _release(4, 1)
    outcome = drains.scale_down(release, clock.now())
    drained = [r.key.removeprefix(drain_key(release.key, "")) for r in outcome.results]
    assert drained == [*idle, "gpu-busy-0"]
    assert all(r.status is ActionStatus.DONE for r in outcome.results)
    assert cluster.ready_units() == {"gpu": 1}
    busy_warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert busy_warnings == [f"draining busy node gpu-busy-0 of pool gpu: {REASON}"]  # idle ones are no warning


def test_a_forced_release_drains_named_busy_units_before_idle_ones() -> None:
    cluster, clock, drains = _cluster(units=3, busy=2)
    clock.advance(WINDOW)
    cluster.serve(clock.now(), {"a": float(CHIPS * 2)})
    [idle] = cluster.idle_nodes("gpu", WINDOW)
    release = _release(3, 2)
    outcome = drains.scale_down(release, clock.now(), nodes=("gpu-busy-1",))
    assert [(r.key, r.status) for r in outcome.results] == [(drain_key(release.key, "gpu-busy-1"), ActionStatus.DONE)]
    assert list(cluster.idle_nodes("gpu", WINDOW)) == [idle]


def test_a_forced_release_with_no_node_left_to_drain_is_refused() -> None:
    cluster, clock, drains = _cluster(units=1, busy=1)
    drains.scale_down(_release(1, 0), clock.now())
    assert cluster.ready_units() == {"gpu": 0}
    again = drains.scale_down(_release(1, 0), clock.now() + timedelta(minutes=1))
    [result] = again.results
    assert result.status is ActionStatus.REJECTED
    assert "no node of gpu can be drained" in result.detail


def test_in_dry_run_a_forced_release_records_the_busy_drain_and_removes_nothing() -> None:
    cluster, clock, _ = _cluster(units=3, busy=3)
    dry = DryRunDrainer(cluster, clock)
    release = _release(3, 2)
    outcome = NodeDrains({"gpu": dry}, WINDOW).scale_down(release, clock.now())
    assert [r.status for r in outcome.results] == [ActionStatus.RECORDED]
    assert dry.recorded == [("gpu", "gpu-busy-0", drain_key(release.key, "gpu-busy-0"))]
    assert cluster.ready_units() == {"gpu": 3}


class _Deposed:
    def is_leader(self, now: datetime) -> bool:
        return False


def test_a_replica_that_no_longer_leads_reads_the_pool_but_drains_no_busy_unit() -> None:
    cluster, clock, _ = _cluster(units=3, busy=3)
    guarded = LeaderOnlyDrainer(cluster, _Deposed(), clock)
    assert guarded.pool_nodes("gpu") == cluster.pool_nodes("gpu")
    outcome = NodeDrains({"gpu": guarded}, WINDOW).scale_down(_release(3, 2), clock.now())
    [result] = outcome.results
    assert result.status is ActionStatus.FAILED and "no longer leads" in (result.error or "")
    assert cluster.ready_units() == {"gpu": 3}


def test_a_forced_release_that_finds_fewer_nodes_drains_those_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    cluster, clock, drains = _cluster(units=2, busy=2)
    caplog.set_level(logging.WARNING, logger="agent.drains")
    outcome = drains.scale_down(_release(3, 0), clock.now())  # planned with a third node another drain took since
    assert [r.status for r in outcome.results] == [ActionStatus.DONE, ActionStatus.DONE]
    assert cluster.ready_units() == {"gpu": 0}
    assert "forced release of 3 nodes finds only 2 to drain" in caplog.records[0].getMessage()

"""The simulated cluster: lead times, immediate release, idle tracking, stockouts and idempotent keys."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from actuators import DryRunActuator, SimulatedCluster
from agent.simulation.policies import OracleController
from models import AcceleratorFamily, ActionStatus, CapacityTier, CapacityUnavailable, PoolKind, PoolSpec
from models.clock import SimulatedClock

T0 = datetime(2024, 1, 1, tzinfo=UTC)
STEP = timedelta(minutes=5)
POOL = PoolSpec(
    "gpu",
    PoolKind.GPU_NODE_POOL,
    CapacityTier.ON_DEMAND,
    AcceleratorFamily.GPU,
    8,
    0,
    10,
    24.0,
    timedelta(minutes=10),
    ("a",),
)


def make(
    initial: int = 0, stockout: tuple[datetime, datetime] | None = None
) -> tuple[SimulatedCluster, SimulatedClock]:
    clock = SimulatedClock(T0)
    cluster = SimulatedCluster([POOL], clock, {"gpu": initial}, {"gpu": [stockout]} if stockout else None)
    return cluster, clock


def test_units_arrive_after_the_lead_time_and_are_paid_from_the_request() -> None:
    cluster, clock = make()
    result = cluster.resize("gpu", 3, "k1")
    assert result.status is ActionStatus.STARTED
    assert cluster.paid_units() == {"gpu": 3} and cluster.ready_units() == {"gpu": 0}
    clock.advance(STEP)
    cluster.advance(clock.now())
    assert cluster.ready_units() == {"gpu": 0}
    clock.advance(STEP)
    cluster.advance(clock.now())
    assert cluster.ready_units() == {"gpu": 3}


def test_release_is_immediate_and_repeated_keys_do_nothing() -> None:
    cluster, _ = make(initial=4)
    cluster.resize("gpu", 1, "down")
    cluster.resize("gpu", 1, "down")
    assert cluster.ready_units() == {"gpu": 1} and cluster.scale_actions == 1


def test_serving_tracks_idle_units_and_unserved_demand() -> None:
    cluster, clock = make(initial=2)
    outcome = cluster.serve(clock.now(), {"a": 20.0})
    assert outcome.served == {"a": 16.0} and outcome.unserved == {"a": 4.0}
    outcome = cluster.serve(clock.now(), {"a": 3.0})
    (state,) = cluster.list_pools()
    assert state.idle_units == 1 and state.idle_since == (T0,)


def test_stockout_window_refuses_new_units() -> None:
    cluster, clock = make(stockout=(T0, T0 + timedelta(hours=1)))
    with pytest.raises(CapacityUnavailable, match="stockout"):
        cluster.resize("gpu", 2, "k")
    clock.advance(timedelta(hours=1))
    assert cluster.resize("gpu", 2, "k2").status is ActionStatus.STARTED


def test_the_oracle_waits_out_a_stockout_and_scales_up_after_it() -> None:
    cluster, clock = make(stockout=(T0, T0 + timedelta(minutes=10)))
    oracle = OracleController(cluster, {"gpu": np.array([3, 3, 3, 1])})
    for index in range(2):
        assert oracle.tick(index, clock.now()) is None
        assert cluster.paid_units() == {"gpu": 0}
        clock.advance(STEP)
    oracle.tick(2, clock.now())
    assert cluster.paid_units() == {"gpu": 3}
    clock.advance(STEP)
    oracle.tick(3, clock.now())
    assert cluster.paid_units() == {"gpu": 1}


def test_dry_run_records_instead_of_writing() -> None:
    cluster, clock = make(initial=1)
    dry = DryRunActuator(cluster, clock)
    assert dry.resize("gpu", 5, "k").status is ActionStatus.RECORDED
    assert cluster.paid_units() == {"gpu": 1}
    assert dry.recorded == [("gpu", 5, "k")]


def test_draining_an_idle_unit_leaves_the_other_idle_units_their_names() -> None:
    cluster, clock = make(initial=3)
    cluster.serve(clock.now(), {"a": 8.0})
    first, second = cluster.idle_nodes("gpu", timedelta(0))
    assert cluster.drain("gpu", first, "d1").status is ActionStatus.DONE
    assert list(cluster.idle_nodes("gpu", timedelta(0))) == [second]
    assert cluster.drain("gpu", second, "d2").status is ActionStatus.DONE
    assert cluster.ready_units() == {"gpu": 1}
    assert cluster.drain("gpu", first, "d3").status is ActionStatus.REJECTED  # that unit is gone

"""One failed read of a pool in no budget leaves its demand on it: the agent plans an unread pool at the units it
last read it at (with its own resizes carried out since), so nothing is bought on the next pool for a blip.

A spot pool (8 chips a unit, cheapest) and an on-demand pool serve 160 chips of steady demand; neither is in a
budget, so the ledger holds no record the planner could ask. The real agent loop over a simulated cluster: the spot
pool's read fails once with an HTTP 503, either the tick after the agent grew it to 20 units or some ticks later."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from actuators import SimulatedCluster
from agent.ledger import InMemoryLedger
from agent.loop import Agent, AgentParts
from agent.notify import RecordingNotifier
from agent.sources.trace import TraceSource, read_trace
from config import settings_from_mapping
from forecasting.factory import build_forecaster
from models import SkipReason, TransientActuatorError
from models.clock import SimulatedClock
from tests.conftest import TraceWriter

START = datetime(2024, 1, 15, 12, tzinfo=UTC)
TICK = timedelta(minutes=5)


def _pool(pool_id: str, tier: str, price: float) -> dict[str, Any]:
    return {"id": pool_id, "kind": "gpu-node-pool", "tier": tier, "chips_per_unit": 8, "min_units": 0,
            "max_units": 50, "price_per_chip_hour_usd": price, "lead_time": "10m", "serves": ["train"]}  # fmt: skip


CONFIG: dict[str, Any] = {
    "demand_classes": [{"name": "train"}],
    "pools": [_pool("spot", "spot", 0.4), _pool("od", "on-demand", 1.0)],
    "forecast": {"model": "persistence", "history": "1h", "step": "5m", "max_staleness": "10m"},
    "loop": {"tick_interval": "5m"},
}


def _agent(write_trace: TraceWriter, spot_units: int) -> tuple[Agent, SimulatedClock, SimulatedCluster]:
    settings = settings_from_mapping(CONFIG, source="blip config")
    trace = write_trace({"train": [160.0] * 40}, start=(START - timedelta(hours=2)).isoformat(), step="5min")
    clock = SimulatedClock(START)
    cluster = SimulatedCluster(settings.pool_specs(), clock, {"spot": spot_units, "od": 0})
    parts = AgentParts(
        TraceSource(read_trace(trace)), build_forecaster(settings.forecast), cluster, InMemoryLedger(),
        RecordingNotifier(),
    )  # fmt: skip
    return Agent(settings, parts), clock, cluster


@pytest.mark.parametrize("failed_tick", [1, 4])
def test_one_failed_read_of_a_pool_keeps_its_demand_on_it(write_trace: TraceWriter, failed_tick: int) -> None:
    agent, clock, cluster = _agent(write_trace, spot_units=0)
    for tick in range(failed_tick + 2):
        now = START + tick * TICK
        clock.set(now)
        failure = TransientActuatorError("spot", "HTTP 503 from the node pool API") if tick == failed_tick else None
        cluster.fail_reads("spot", failure)
        report = agent.run_once(now)
        resizes = {r.pool_id: (r.from_units, r.to_units) for r in report.plan.resizes}
        if tick == 0:
            assert resizes == {"spot": (0, 20)}
        elif tick == failed_tick:
            # held at the 20 units it holds, its 160 chips with it: nothing bought on demand for the blip
            assert resizes == {}
            assert ("spot", SkipReason.MISSING_DATA) in [(s.pool_id, s.reason) for s in report.plan.skips]
            assert report.plan.decisions["spot"].need_chips == 160.0
        else:
            assert resizes == {}
    assert {s.pool_id: s.target_units for s in cluster.list_pools()} == {"spot": 20, "od": 0}


def test_a_replica_that_takes_over_plans_an_unread_pool_at_what_it_read_as_a_standby(write_trace: TraceWriter) -> None:
    agent, clock, cluster = _agent(write_trace, spot_units=20)
    agent.watch(START)  # a standby's tick: the pools are read, nothing is planned
    now = START + TICK
    clock.set(now)
    cluster.fail_reads("spot", TransientActuatorError("spot", "HTTP 503 from the node pool API"))
    report = agent.run_once(now)  # the first tick it leads, with the spot pool unread
    assert report.plan.resizes == ()
    assert report.plan.decisions["spot"].need_chips == 160.0

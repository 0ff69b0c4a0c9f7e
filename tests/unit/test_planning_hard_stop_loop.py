"""The agent's budget hard stop, planned by the loop, takes the units in flight of a pool shrunk by a size change
(no drainer: the cloud cancels units in flight first) before busy units of another pool: the loop tells the planner
which pools are released by drains of their nodes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from actuators import SimulatedCluster
from agent.ledger import InMemoryLedger
from agent.loop import Agent, AgentParts
from agent.notify import RecordingNotifier
from agent.sources.trace import TraceSource, read_trace
from config import settings_from_mapping
from forecasting.factory import build_forecaster
from models import LedgerEntry
from models.clock import SimulatedClock
from tests.conftest import TraceWriter


def test_the_agent_s_hard_stop_cancels_units_in_flight_of_a_pool_without_a_drainer_before_busy_ones(
    write_trace: TraceWriter,
) -> None:
    # The loop's plan on a simulated cluster with no drainer: its pools shrink by a size change, which cancels the
    # units in flight first. Spot has 4 units requested now, on-demand 4 busy ones; ticks of 5 minutes: the next
    # two cost 26.67 USD, 5 more than the money left. Each spot unit released saves 0.83 USD, each on-demand 2.50.
    start = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
    budget = {"name": "team-a", "pools": ["spot", "ondemand"], "monthly_cap_usd": 1000.0, "commit_horizon": "2h"}
    config: dict[str, Any] = {
        "demand_classes": [{"name": "c"}],
        "pools": [
            {"id": pool_id, "kind": "gpu-node-pool", "tier": tier, "chips_per_unit": 8, "min_units": 0,
             "max_units": 20, "price_per_chip_hour_usd": price / 8, "lead_time": "10m", "serves": ["c"]}
            for pool_id, tier, price in (("spot", "spot", 10.0), ("ondemand", "on-demand", 30.0))
        ],
        "budgets": [budget],
        "forecast": {"model": "persistence", "history": "1h", "step": "5m", "max_staleness": "10m"},
        "loop": {"tick_interval": "5m"},
        "ledger": {"backend": "memory"},
    }  # fmt: skip
    settings = settings_from_mapping(config, source="test config")
    clock = SimulatedClock(start)
    cluster = SimulatedCluster(settings.pool_specs(), clock, {"ondemand": 4})
    cluster.resize("spot", 4, "spot@requested")
    cluster.serve(start, {"c": 32.0})
    ledger = InMemoryLedger()
    ledger.record(LedgerEntry("ondemand", start - timedelta(hours=1), start, 4, 1000.0 - 160.0 / 6 + 5.0))
    trace = write_trace({"c": [32.0] * 24}, start=(start - timedelta(hours=2)).isoformat())
    parts = AgentParts(
        TraceSource(read_trace(trace)), build_forecaster(settings.forecast), cluster, ledger, RecordingNotifier()
    )
    report = Agent(settings, parts, holder="test").run_once(start)
    released = {r.pool_id: (r.from_units, r.to_units, r.forced) for r in report.plan.resizes}
    assert released == {"spot": (4, 0, True), "ondemand": (4, 3, True)}
    assert cluster.ready_units() == {"spot": 0, "ondemand": 3}
    assert cluster.paid_units() == {"spot": 0, "ondemand": 3}

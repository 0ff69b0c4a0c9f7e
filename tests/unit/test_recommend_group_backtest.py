"""recommend's backtest scores what the planner sizes pools on: classes that share their pools are planned on the
forecast of their summed demand, so that summed forecast is backtested too, at the group's service level and peak
steps, and each class's own row says it is the class's own forecast and which series its pools are sized on."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from actuators import SimulatedCluster
from agent.commands.recommend_document import backtest_entry
from agent.ledger import InMemoryLedger
from agent.loop import Agent, AgentParts
from agent.notify import RecordingNotifier
from agent.report.recommendation import markdown
from agent.sources.trace import TraceSource, read_trace
from config import settings_from_mapping
from forecasting.factory import build_forecaster
from models.clock import SimulatedClock
from tests.conftest import TraceWriter

START = datetime(2024, 3, 1, tzinfo=UTC)
DAYS = 3
STEPS = DAYS * 288  # five-minute steps
AT = START + timedelta(days=DAYS)
TOTAL = 16.0  # what the two tenants of the shared pool ask together, at every step


def _pool(pool_id: str, serves: list[str]) -> dict[str, Any]:
    return {
        "id": pool_id,
        "kind": "gpu-node-pool",
        "chips_per_unit": 8,
        "max_units": 8,
        "price_per_chip_hour_usd": 1.0,
        "lead_time": "10m",
        "serves": serves,
    }


def _agent(write_trace: TraceWriter) -> tuple[Agent, TraceSource]:
    config: dict[str, Any] = {
        "demand_classes": [
            {"name": "train", "service_level": 0.8},
            {"name": "serve", "service_level": 0.95},
            {"name": "solo"},
        ],
        "pools": [_pool("shared", ["train", "serve"]), _pool("solo-pool", ["solo"])],
        "forecast": {"model": "seasonal_naive", "history": "2d", "step": "5m"},
        "loop": {"tick_interval": "5m"},
        "ledger": {"backend": "memory"},
    }
    # the two tenants of the shared pool trade places at random, so each alone is hard to forecast, while together
    # they always ask TOTAL
    train = np.random.default_rng(11).integers(0, int(TOTAL) + 1, STEPS).astype(float)
    series = {"train": list(train), "serve": list(TOTAL - train), "solo": [8.0] * STEPS}
    source = TraceSource(read_trace(write_trace(series, start=START.isoformat())))
    settings = settings_from_mapping(config, source="test config")
    cluster = SimulatedCluster(settings.pool_specs(), SimulatedClock(AT), {"shared": 2, "solo-pool": 1})
    parts = AgentParts(source, build_forecaster(settings.forecast), cluster, InMemoryLedger(), RecordingNotifier())
    return Agent(settings, parts, holder="test"), source


def test_the_group_s_summed_forecast_is_backtested_at_its_level_and_the_classes_rows_say_whose_forecast(
    write_trace: TraceWriter,
) -> None:
    agent, source = _agent(write_trace)
    (group,) = [g for g in agent.groups if g.is_aggregate]
    history = source.fetch(agent.classes, AT - agent.settings.forecast.history, AT, agent.step)
    result = backtest_entry(agent, history, AT, None)

    (row,) = result["groups"]
    assert row["demand_group"] == group.name
    assert row["members"] == ["serve", "train"]
    assert row["level"] == 0.95  # the planner sizes the group on the highest of its members' service levels
    assert row["peak_steps"] == math.ceil((timedelta(minutes=10) + agent.tick) / agent.step)
    assert row["origins"] >= 20
    # the summed demand never moves, so its forecast is exact and its peak quantile covers every origin
    assert row["mae"] == 0.0
    assert row["peak_coverage"] == 1.0

    classes = {q["demand_class"]: q for q in result["classes"]}
    for name in ("train", "serve"):
        assert classes[name]["planned_on"] == group.name
        assert classes[name]["level"] == agent.service_levels[name]
        assert classes[name]["mae"] > 1.0  # each tenant's own forecast misses: that is not what is provisioned
    assert classes["solo"]["planned_on"] == "solo"

    document: dict[str, Any] = {
        "at": AT.isoformat(),
        "prometheus": "http://prometheus:9090",
        "pool_state_source": "test",
        "cost": {"current_per_day_usd": 0.0, "recommended_per_day_usd": 0.0, "change_per_day_usd": 0.0},
        "pools": [],
        "classes": [],
        "budgets": [],
        "backtest": result,
    }
    lines = markdown(document).splitlines()
    (group_line,) = [line for line in lines if line.startswith(f"| {group.name} |")]
    assert "summed demand of 2 classes: what their pools are sized on" in group_line
    (train_line,) = [line for line in lines if line.startswith("| train |")]
    assert f"the class's own forecast (its pools are sized on {group.name})" in train_line
    (solo_line,) = [line for line in lines if line.startswith("| solo |")]
    assert "the class's own forecast: what its pools are sized on" in solo_line

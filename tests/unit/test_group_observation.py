"""A group of classes planned together on their summed demand carries its summed demand now, as its classes carry
theirs: the forecast's ``last_observed`` (what /metrics exports as the group's observed demand) is the members'
sum, and unknown when a member has no observation."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

from actuators import SimulatedCluster
from agent.ledger import InMemoryLedger
from agent.loop import Agent, AgentParts
from agent.notify import RecordingNotifier
from agent.sources.trace import TraceSource, read_trace
from config import settings_from_mapping
from forecasting.factory import build_forecaster
from models.clock import SimulatedClock
from tests.conftest import TraceWriter

NOW = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
START = NOW - timedelta(hours=2)


def _agent(write_trace: TraceWriter, serve: list[float]) -> Agent:
    config: dict[str, Any] = {
        "demand_classes": [{"name": "train"}, {"name": "serve"}],
        "pools": [
            {
                "id": "shared",
                "kind": "gpu-node-pool",
                "tier": "on-demand",
                "chips_per_unit": 8,
                "min_units": 0,
                "max_units": 8,
                "price_per_chip_hour_usd": 1.0,
                "lead_time": "10m",
                "serves": ["train", "serve"],
            }
        ],
        "forecast": {"model": "persistence", "history": "1h", "step": "5m", "max_staleness": "10m"},
        "loop": {"tick_interval": "5m"},
        "ledger": {"backend": "memory"},
    }
    trace = write_trace({"train": [16.0] * 24, "serve": serve}, start=START.isoformat())
    settings = settings_from_mapping(config, source="test config")
    cluster = SimulatedCluster(settings.pool_specs(), SimulatedClock(NOW), {"shared": 2})
    parts = AgentParts(
        TraceSource(read_trace(trace)), build_forecaster(settings.forecast), cluster, InMemoryLedger(),
        RecordingNotifier(),
    )  # fmt: skip
    return Agent(settings, parts, holder="test")


def test_a_group_s_observed_demand_is_the_sum_of_its_members(write_trace: TraceWriter) -> None:
    agent = _agent(write_trace, [4.0] * 24)
    (group,) = [g for g in agent.groups if g.is_aggregate]
    report = agent.run_once(NOW)
    assert report.observed == {"train": 16.0, "serve": 4.0}
    assert report.forecasts[group.name].last_observed == 20.0


def test_a_group_with_a_member_without_observation_has_no_observed_demand(write_trace: TraceWriter) -> None:
    agent = _agent(write_trace, [4.0] * 12 + [math.nan] * 12)  # serve's newest value is an hour old
    (group,) = [g for g in agent.groups if g.is_aggregate]
    report = agent.run_once(NOW)
    assert "serve" in report.problems
    forecast = report.forecasts.get(group.name)
    assert forecast is None or math.isnan(forecast.last_observed)

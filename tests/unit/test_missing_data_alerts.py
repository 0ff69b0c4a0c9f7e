"""Missing-data alerts from the loop, through the Slack notifier to a local webhook receiver: each demand class that
loses its data is told once, even when another class is already out."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from actuators import SimulatedCluster
from agent.ledger import InMemoryLedger
from agent.loop import Agent, AgentParts
from agent.notify.slack import build_slack_notifier
from agent.sources.trace import TraceSource, read_trace
from config import settings_from_mapping
from config.alerts import AlertSettings
from forecasting.factory import build_forecaster
from models.clock import SimulatedClock
from tests.conftest import TraceWriter
from tests.fakes.slack_receiver import SlackReceiver

NOW = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
START = NOW - timedelta(hours=2)
STEP = timedelta(minutes=5)


def config() -> dict[str, Any]:
    def pool(name: str) -> dict[str, Any]:
        return {"id": f"{name}-pool", "kind": "gpu-node-pool", "tier": "on-demand", "chips_per_unit": 8,
                "min_units": 0, "max_units": 8, "price_per_chip_hour_usd": 1.0, "lead_time": "10m",
                "serves": [name]}  # fmt: skip

    return {
        "demand_classes": [{"name": "train"}, {"name": "serve"}],
        "pools": [pool("train"), pool("serve")],
        "forecast": {"model": "persistence", "history": "1h", "step": "5m", "max_staleness": "10m"},
        "loop": {"tick_interval": "5m"},
        "ledger": {"backend": "memory"},
    }


def arrive(agent: Agent, clock: SimulatedClock) -> None:
    """Units asked for become ready once their lead time has passed, as a cluster's do."""
    cluster = agent.parts.actuator
    assert isinstance(cluster, SimulatedCluster)
    cluster.advance(clock.now())


@pytest.fixture
def receiver() -> Iterator[SlackReceiver]:
    with SlackReceiver() as running:
        yield running


def test_a_second_class_losing_its_data_is_alerted_while_the_first_is_still_out(
    receiver: SlackReceiver, write_trace: TraceWriter
) -> None:
    # train's newest value covers 9:45-9:50 and serve's 10:25-10:30; either is stale 10 minutes after that
    trace = write_trace({"train": [16.0] * 22, "serve": [16.0] * 30}, start=START.isoformat())
    settings = settings_from_mapping(config(), source="test config")
    clock = SimulatedClock(NOW)
    slack = build_slack_notifier(
        AlertSettings.model_validate({"request_timeout": "1s"}), clock, {"LEADTIME_SLACK_WEBHOOK_URL": receiver.url}
    )
    assert slack is not None
    cluster = SimulatedCluster(settings.pool_specs(), clock, dict.fromkeys((p.id for p in settings.pools), 0))
    parts = AgentParts(
        TraceSource(read_trace(trace)), build_forecaster(settings.forecast), cluster, InMemoryLedger(), slack
    )
    agent = Agent(settings, parts, holder="test")

    missing = []
    for minutes in range(0, 65, 5):
        clock.set(NOW + timedelta(minutes=minutes))
        arrive(agent, clock)
        missing.append(",".join(sorted(agent.run_once(clock.now()).problems)))

    # train is out from 10:05 on, serve joins it at 10:45 and both stay out: two conditions, one message each
    assert missing == [""] + ["train"] * 8 + ["serve,train"] * 4
    assert [m["text"] for m in receiver.received] == [
        "[WARNING] Metrics missing or stale: holding: demand class train - "
        "Holding pools: no trustworthy demand for train",
        "[WARNING] Metrics missing or stale: holding: demand class serve - "
        "Holding pools: no trustworthy demand for serve",
    ]

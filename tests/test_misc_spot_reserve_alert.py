"""A spot pool's interruption reserve that no pool has room for is told, not only written in the decision record: a
warning names the pool and the units not held while it lasts, once per de-duplication window, and its end is told
once it clears, as the other level conditions are.

The loop runs on a replayed trace and a simulated cluster, its alerts posted through the Slack notifier to a local
webhook receiver, as in ``tests/unit/test_missing_data_alerts``."""

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


def config(ondemand_units: int) -> dict[str, Any]:
    """A spot pool of 4 units with an hour's lead time at 0.5 interruptions an hour (half its units again in
    reserve), and an on-demand pool of ``ondemand_units`` to hold what the spot pool's bound cuts."""
    return {
        "demand_classes": [{"name": "train"}],
        "pools": [
            {
                "id": "spot",
                "kind": "gpu-node-pool",
                "tier": "spot",
                "chips_per_unit": 8,
                "min_units": 0,
                "max_units": 4,
                "price_per_chip_hour_usd": 1.0,
                "lead_time": "1h",
                "spot_interruption_per_hour": 0.5,
                "serves": ["train"],
            },
            {
                "id": "ondemand",
                "kind": "gpu-node-pool",
                "tier": "on-demand",
                "chips_per_unit": 8,
                "min_units": 0,
                "max_units": ondemand_units,
                "price_per_chip_hour_usd": 3.0,
                "lead_time": "10m",
                "serves": ["train"],
            },
        ],
        "forecast": {"model": "persistence", "history": "1h", "step": "5m", "max_staleness": "10m"},
        "loop": {"tick_interval": "5m"},
        "planner": {"headroom_units": 0},
        "ledger": {"backend": "memory"},
    }


@pytest.fixture
def receiver() -> Iterator[SlackReceiver]:
    with SlackReceiver() as running:
        yield running


def _run(trace: Any, receiver: SlackReceiver, ondemand_units: int, minutes: range) -> list[str]:
    settings = settings_from_mapping(config(ondemand_units), source="test config")
    clock = SimulatedClock(NOW)
    alerts = {"request_timeout": "1s", "dedup_window": "1h", "resolve_after": "5m"}
    slack = build_slack_notifier(
        AlertSettings.model_validate(alerts), clock, {"LEADTIME_SLACK_WEBHOOK_URL": receiver.url}
    )
    assert slack is not None
    cluster = SimulatedCluster(settings.pool_specs(), clock, dict.fromkeys((p.id for p in settings.pools), 0))
    parts = AgentParts(
        TraceSource(read_trace(trace)), build_forecaster(settings.forecast), cluster, InMemoryLedger(), slack
    )
    agent = Agent(settings, parts, holder="test")
    for minute in minutes:
        clock.set(NOW + timedelta(minutes=minute))
        agent.run_once(clock.now())
    return [m["text"] for m in receiver.received]


def test_a_reserve_no_pool_has_room_for_is_told_until_it_clears(
    receiver: SlackReceiver, write_trace: TraceWriter
) -> None:
    # 32 chips fill the 4 spot units, whose reserve wants 2 more units; on-demand holds 1 of them, the other is held
    # nowhere. From 10:15 the demand is 16 chips: 2 spot units and 1 in reserve fit in the spot pool.
    trace = write_trace({"train": [32.0] * 27 + [16.0] * 12}, start=START.isoformat())

    told = _run(trace, receiver, ondemand_units=1, minutes=range(0, 45, 5))

    spot = [t for t in told if "spot reserve of spot" in t]
    assert spot[0] == (
        "[WARNING] Spot reserve not held: less safety than configured: spot reserve of spot - 1 of the 2 units "
        "spot keeps in reserve against preemption are not held (8 chips): spot cannot hold them and no pool that "
        "may serve its demand has room, so fewer units are planned than its spot reserve asks for. Raise the "
        "max_units of a pool that may serve its demand, or of spot"
    )
    assert len(spot) == 2  # told once in the window, and its end
    assert spot[1] == (
        "[RESOLVED] Resolved: Spot reserve not held: less safety than configured: spot reserve of spot - No longer "
        "holds, after 20m: raised 2024-03-05 10:00 UTC, last seen 2024-03-05 10:15 UTC, gone at 2024-03-05 10:20 UTC."
    )


def test_a_reserve_held_by_another_pool_is_not_told(receiver: SlackReceiver, write_trace: TraceWriter) -> None:
    trace = write_trace({"train": [32.0] * 39}, start=START.isoformat())

    told = _run(trace, receiver, ondemand_units=2, minutes=range(0, 20, 5))

    assert not [t for t in told if "spot reserve" in t]

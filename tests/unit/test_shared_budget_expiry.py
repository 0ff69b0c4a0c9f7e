"""Two agents share one budget and one ledger; the first scales up, the second asks hours later, long after the
first one's scale-up reservation expired. What both clusters then run to the end of the month never costs more
than the cap: the first agent's units stay reserved while it holds them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from actuators import SimulatedCluster
from agent.ledger import InMemoryLedger
from agent.loop import Agent, AgentParts
from agent.notify import RecordingNotifier
from agent.sources.trace import TraceSource, read_trace
from config import settings_from_mapping
from forecasting.factory import build_forecaster
from models import SkipReason
from models.clock import SimulatedClock
from tests.conftest import TraceWriter

NOW = datetime(2024, 1, 15, 12, 0, tzinfo=UTC)
MONTH = (datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 2, 1, tzinfo=UTC))
CHIPS, PRICE_PER_CHIP = 8, 1.0
TICK = timedelta(minutes=5)


def config(cluster: str, other: str, cap: float) -> dict[str, Any]:
    return {
        "demand_classes": [{"name": "train"}],
        "pools": [{"id": cluster, "kind": "gpu-node-pool", "tier": "on-demand", "chips_per_unit": CHIPS,
                   "min_units": 0, "max_units": 16, "price_per_chip_hour_usd": PRICE_PER_CHIP, "lead_time": "10m",
                   "serves": ["train"]}],
        "forecast": {"model": "persistence", "history": "1h", "step": "5m", "max_staleness": "10m"},
        "loop": {"tick_interval": "5m"},
        "ledger": {"backend": "memory", "reservation_ttl": "1h"},
        "budgets": [{"name": "team", "pools": [cluster], "remote_pools": [other], "monthly_cap_usd": cap}],
    }  # fmt: skip


def agent(raw: dict[str, Any], trace: Path, ledger: InMemoryLedger, holder: str) -> tuple[Agent, SimulatedClock]:
    settings = settings_from_mapping(raw, source=f"{holder} config")
    clock = SimulatedClock(NOW)
    cluster = SimulatedCluster(settings.pool_specs(), clock, dict.fromkeys((p.id for p in settings.pools), 0))
    parts = AgentParts(
        TraceSource(read_trace(trace)), build_forecaster(settings.forecast), cluster, ledger, RecordingNotifier()
    )
    return Agent(settings, parts, holder=holder), clock


def test_units_bought_earlier_by_another_agent_still_count_after_their_reservation_expired(
    write_trace: TraceWriter,
) -> None:
    trace = write_trace({"train": [64.0] * 80}, start=(NOW - timedelta(hours=2)).isoformat(), step="5min")
    unit_to_month_end = CHIPS * PRICE_PER_CHIP * (MONTH[1] - NOW) / timedelta(hours=1)
    cap = 12 * unit_to_month_end  # eight units for one cluster to the month end, not sixteen
    ledger = InMemoryLedger()
    west, west_clock = agent(config("west", "east", cap), trace, ledger, "west")
    east, east_clock = agent(config("east", "west", cap), trace, ledger, "east")
    first = west.run_once(NOW)
    assert [(r.pool_id, r.to_units) for r in first.plan.resizes] == [("west", 8)]

    t = NOW
    for _ in range(24):  # two hours of west's ticks: its scale-up's reservation (1h) has long expired
        t += TICK
        west_clock.set(t)
        west.run_once(t)
    east_clock.set(t)
    report = east.run_once(t)

    (up,) = report.plan.resizes
    left = (MONTH[1] - t) / timedelta(hours=1)
    spent = ledger.spent(["west", "east"], MONTH[0], t)
    committed = spent + (8 + up.to_units) * CHIPS * PRICE_PER_CHIP * left
    assert committed <= cap
    assert 0 < up.to_units < 8  # trimmed to what is left, not refused outright
    assert SkipReason.BUDGET in {s.reason for s in report.plan.skips}

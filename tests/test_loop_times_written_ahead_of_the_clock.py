"""A tick that ran while the wall clock was ahead (a VM resumed with a clock 6 h fast, stepped back by NTP at the
next tick) wrote wall times the corrected clock reaches only 6 h later: a stockout's back-off, the last time a
condition was seen. The next tick moves them back within its clock, so the pool is asked for again a back-off
(``max(MIN_BACKOFF, lead_time)``) after the correction and a condition gone since ends ``resolve_after`` after it,
not 6 h later; and the memory saved (the state ConfigMap) holds the corrected times.

The real agent loop over a simulated cluster whose clock is the same stepped wall clock."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from actuators import SimulatedCluster
from agent.ledger import InMemoryLedger
from agent.loop import Agent, AgentParts, TickReport
from agent.notify import RecordingNotifier
from agent.sources.trace import TraceSource, read_trace
from config import settings_from_mapping
from forecasting.factory import build_forecaster
from models import AlertKind
from tests.conftest import TraceWriter
from tests.fakes.stepping_clock import SteppingClock

START = datetime(2024, 1, 15, 12, tzinfo=UTC)
TICK = timedelta(minutes=5)
AHEAD = timedelta(hours=6)
BACKOFF = timedelta(minutes=10)  # MIN_BACKOFF, and the pool's lead time

CONFIG: dict[str, Any] = {
    "demand_classes": [{"name": "train"}],
    "pools": [
        {"id": "od", "kind": "gpu-node-pool", "tier": "on-demand", "chips_per_unit": 8, "min_units": 0,
         "max_units": 50, "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": ["train"]}
    ],
    "forecast": {"model": "persistence", "history": "1h", "step": "5m", "max_staleness": "10m"},
    "loop": {"tick_interval": "5m"},
    "alerts": {"resolve_after": "5m", "dedup_window": "1h"},
}  # fmt: skip


class Rig:
    def __init__(self, write_trace: TraceWriter, hours_of_demand: float) -> None:
        settings = settings_from_mapping(CONFIG, source="clock step config")
        samples = int((timedelta(hours=2 + hours_of_demand)) / TICK)
        trace = write_trace({"train": [160.0] * samples}, start=(START - timedelta(hours=2)).isoformat(), step="5min")
        self.clock = SteppingClock(START)
        self.cluster = SimulatedCluster(settings.pool_specs(), self.clock, {"od": 0})
        self.notifier = RecordingNotifier(dedup_window=timedelta(hours=1))
        parts = AgentParts(
            TraceSource(read_trace(trace)), build_forecaster(settings.forecast), self.cluster, InMemoryLedger(),
            self.notifier,
        )  # fmt: skip
        self.agent = Agent(settings, parts)

    def tick(self) -> TickReport:
        self.cluster.advance(self.clock.now())
        return self.agent.run_once(self.clock.now())

    def ahead_then_corrected(self) -> TickReport:
        """One tick on a clock 6 h fast, then the clock is stepped back and a tick later the next tick runs."""
        self.clock.step(AHEAD)
        ahead = self.tick()
        self.clock.step(-AHEAD)
        return ahead

    def ticks_until(self, done: Any, limit: timedelta) -> datetime | None:
        """Tick every 5 minutes until ``done(report)``; when, or None within ``limit``."""
        while self.clock.now() - START < limit:
            self.clock.run(TICK)
            if done(self.tick()):
                return self.clock.now()
        return None


def test_a_stockout_back_off_written_ahead_ends_a_back_off_after_the_correction(
    write_trace: TraceWriter, caplog: pytest.LogCaptureFixture
) -> None:
    rig = Rig(write_trace, hours_of_demand=7)
    rig.cluster.add_stockout("od", START + AHEAD - timedelta(minutes=1), START + AHEAD + timedelta(minutes=1))
    ahead = rig.ahead_then_corrected()
    assert [(r.pool_id, r.to_units) for r in ahead.plan.resizes] == [("od", 20)]
    assert rig.agent.memory.backoff_until == {"od": START + AHEAD + BACKOFF}
    with caplog.at_level(logging.WARNING, logger="agent.memory_clock"):
        rig.clock.run(TICK)
        rig.tick()
    # saved so: the first tick after the correction moved the back-off to its clock's now and the pool's back-off
    assert rig.agent.memory.backoff_until == {"od": START + TICK + BACKOFF}
    assert "pool od backed off until 2024-01-15T18:10:00+00:00" in caplog.text

    asked_at = rig.ticks_until(lambda r: any(x.pool_id == "od" for x in r.plan.resizes), timedelta(hours=2))
    assert asked_at == START + TICK + BACKOFF  # 6 h 10 min after the stockout before
    ends = [e for e in rig.notifier.events if e.kind is AlertKind.STOCKOUT and e.resolved]
    assert [e.at for e in ends] == [asked_at]  # the stockout's end is told when the back-off ends


def test_a_condition_last_seen_ahead_ends_resolve_after_the_correction(write_trace: TraceWriter) -> None:
    rig = Rig(write_trace, hours_of_demand=1)  # no demand sample 6 h on: the tick ahead finds it missing
    ahead = rig.ahead_then_corrected()
    assert [e.subject for e in ahead.alerts if e.kind is AlertKind.MISSING_DATA] == ["demand class train"]

    def ended(report: TickReport) -> bool:
        return any(e.kind is AlertKind.MISSING_DATA for e in report.resolved)

    # the first tick after the correction finds the class's demand again; its end is told 5 minutes later (365 before)
    assert rig.ticks_until(ended, timedelta(hours=1)) == START + TICK + timedelta(minutes=5)

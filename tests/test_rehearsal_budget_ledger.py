"""``leadtime run --replay`` with monthly budgets: the rehearsal's ledger holds each budget's pools from the start of
the budget's period in the rehearsal's own time (the simulated pools had no spend before the rehearsal began), so
no budget is told incomplete, to Slack or on ``leadtime_budget_spend_incomplete``, while its spend is still counted
and its caps still alert.

The rehearsal is wired as the command wires it (``rehearsal_window``, ``rehearsal_settings``, ``rehearsal_parts``),
assembled into a whole daemon and ticked on a simulated clock that starts on 5 January 2026, four days into the
month; the trace is a day of 8 GPUs as history then 8 GPUs, on one pool of 8-GPU nodes at 1 USD a chip-hour, and
its own time is January 2024."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from agent.commands.run import rehearsal_parts, rehearsal_settings, rehearsal_window
from agent.daemon.wiring import AssembledDaemon, assemble
from agent.ledger.base import Ledger, RecordedSince
from agent.notify import RecordingNotifier
from agent.sources.trace import read_trace
from config.loader import settings_from_mapping
from models import AlertKind
from models.clock import SimulatedClock

TICK = timedelta(minutes=5)
CLOCK_START = datetime(2026, 1, 5, 0, 0, 7, tzinfo=UTC)  # off the trace's grid, as a real start is
MONTH_START = datetime(2026, 1, 1, tzinfo=UTC)
POOL = {
    "id": "gpu",
    "kind": "gpu-node-pool",
    "chips_per_unit": 8,
    "max_units": 50,
    "price_per_chip_hour_usd": 1.0,
    "lead_time": "10m",
    "serves": ["train"],
}


def _trace(tmp_path: Path) -> Path:
    values = [8.0] * (2 * 24 * 12)  # two days of 5-minute steps: the first one is the forecast's history
    stamps = pd.date_range("2024-01-01T00:00:00+00:00", periods=len(values), freq=TICK)
    frame = pd.DataFrame({"unique_id": "train", "ds": stamps.strftime("%Y-%m-%dT%H:%M:%S%z"), "y": values})
    path = tmp_path / "trace.csv"
    frame.to_csv(path, index=False)
    return path


def _rehearsal(
    tmp_path: Path, cap_usd: float, notes: RecordingNotifier
) -> tuple[AssembledDaemon, SimulatedClock, Ledger]:
    settings = settings_from_mapping(
        {
            "demand_classes": [{"name": "train"}],
            "pools": [POOL],
            "forecast": {"history": "1d", "model": "last-value"},
            "loop": {"tick_interval": "5m"},
            "budgets": [{"name": "team", "pools": ["gpu"], "monthly_cap_usd": cap_usd}],
            "daemon": {
                "mode": "enforce",
                "leader_election": {"enabled": False},
                "endpoints": {"bind_address": "127.0.0.1", "port": 0},
            },
        }
    )
    clock = SimulatedClock(CLOCK_START)
    trace = read_trace(_trace(tmp_path))
    window = rehearsal_window(settings, trace, None)
    settings, mode = rehearsal_settings(settings, window, "enforce")
    parts = rehearsal_parts(settings, clock, trace, window, notes)
    assembled = assemble(settings, mode, parts, {"POD_NAME": "leadtime-a", "POD_NAMESPACE": "leadtime"})
    assembled.endpoints.stop()  # driven tick by tick
    return assembled, clock, parts.ledger


def _tick(assembled: AssembledDaemon, clock: SimulatedClock, ticks: int) -> None:
    for _ in range(ticks):
        assembled.daemon.tick()
        clock.advance(TICK)


def test_a_rehearsal_holds_its_budgets_whole_from_the_month_start_in_its_own_time(tmp_path: Path) -> None:
    notes = RecordingNotifier()
    rehearsal, clock, ledger = _rehearsal(tmp_path, 50_000.0, notes)
    _tick(rehearsal, clock, 3)

    incomplete = [e for e in notes.events if e.kind is AlertKind.BUDGET_LEDGER_INCOMPLETE]
    assert incomplete == []
    gauge = rehearsal.metrics.registry.get_sample_value("leadtime_budget_spend_incomplete", {"budget": "team"})
    assert gauge == 0.0
    # held from the month the rehearsal runs in (January 2026), not the month of the trace's own time (2024)
    assert isinstance(ledger, RecordedSince) and ledger.recorded_since(["gpu"]) == {"gpu": MONTH_START}


def test_a_rehearsal_counts_the_spend_of_its_ticks_against_the_cap(tmp_path: Path) -> None:
    """The rehearsal's ticks are charged as before: one 8-GPU node for 15 minutes is 2 USD, past every threshold
    of a 1-USD cap, which the budget says, and nothing more about its ledger."""
    notes = RecordingNotifier()
    rehearsal, clock, ledger = _rehearsal(tmp_path, 1.0, notes)
    _tick(rehearsal, clock, 4)

    kinds = {e.kind for e in notes.events}
    assert AlertKind.BUDGET_THRESHOLD in kinds
    assert AlertKind.BUDGET_LEDGER_INCOMPLETE not in kinds
    spent = ledger.spent(["gpu"], MONTH_START, clock.now())
    assert spent == pytest.approx(2.0)

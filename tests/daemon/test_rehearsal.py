"""``leadtime run --replay``: the rehearsal's parts as the command wires them (a replayed trace, the simulated
cluster), assembled into a whole daemon and ticked on a simulated clock, one tick per 5 minutes.

The trace is short and made here: a day of 8 GPUs of demand as history, then 8, a burst of 40 for an hour, and 8
again, on one pool of 8-GPU nodes with a 10-minute lead time, forecast with the last value."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from agent.cli import main
from agent.commands.run import rehearsal_parts, rehearsal_settings, rehearsal_window
from agent.daemon.wiring import AssembledDaemon, assemble
from agent.notify import RecordingNotifier
from agent.sources.trace import read_trace
from config.loader import settings_from_mapping
from config.schema import Settings
from models.clock import SimulatedClock

TICK = timedelta(minutes=5)
HISTORY = timedelta(days=1)  # forecast.history: the rehearsal starts this long after the trace's start
CLOCK_START = datetime.fromisoformat("2026-01-05T00:00:07+00:00")  # off the trace's grid, as a real start is
BEFORE, BURST, AFTER = timedelta(minutes=30), timedelta(hours=1), timedelta(hours=5)


def _trace(tmp_path: Path, step: timedelta) -> Path:
    """8 GPUs for the history and BEFORE, 40 for BURST, 8 for AFTER, every ``step``."""
    values = [8.0] * ((HISTORY + BEFORE) // step) + [40.0] * (BURST // step) + [8.0] * (AFTER // step)
    stamps = pd.date_range("2024-01-01T00:00:00+00:00", periods=len(values), freq=step)
    path = tmp_path / "trace.csv"
    frame = pd.DataFrame({"unique_id": "train", "ds": stamps.strftime("%Y-%m-%dT%H:%M:%S%z"), "y": values})
    frame.to_csv(path, index=False)
    return path


POOL = {
    "id": "gpu",
    "kind": "gpu-node-pool",
    "chips_per_unit": 8,
    "max_units": 50,
    "price_per_chip_hour_usd": 1.0,
    "lead_time": "10m",
    "serves": ["train"],
}


def _settings(mode: str, forecast: dict[str, str] | None = None) -> Settings:
    return settings_from_mapping(
        {
            "demand_classes": [{"name": "train"}],
            "pools": [POOL],
            "forecast": {"history": "1d", "model": "last-value", **(forecast or {})},
            "loop": {"tick_interval": "5m"},
            "daemon": {
                "mode": mode,
                "leader_election": {"enabled": False},
                "endpoints": {"bind_address": "127.0.0.1", "port": 0},
            },
        }
    )


def _rehearsal(settings: Settings, trace_path: Path, clock: SimulatedClock) -> AssembledDaemon:
    """Wired as ``leadtime run --replay`` wires it, from the configured mode."""
    trace = read_trace(trace_path)
    window = rehearsal_window(settings, trace, None)
    settings, mode = rehearsal_settings(settings, window, settings.daemon.mode)
    parts = rehearsal_parts(settings, clock, trace, window, RecordingNotifier())
    assembled = assemble(settings, mode, parts, {"POD_NAME": "leadtime-a", "POD_NAMESPACE": "leadtime"})
    assembled.endpoints.stop()  # driven tick by tick
    return assembled


def _run(assembled: AssembledDaemon, clock: SimulatedClock, span: timedelta) -> list[int]:
    """Tick every TICK for ``span``; the pool's target units after each tick, as the daemon's metrics say."""
    targets: list[int] = []
    for _ in range(span // TICK):
        assembled.daemon.tick()
        value = assembled.metrics.registry.get_sample_value("leadtime_pool_target_units", {"pool": "gpu"})
        assert value is not None
        targets.append(int(value))
        clock.advance(TICK)
    return targets


@pytest.mark.parametrize("mode", ["dry-run", "enforce"])
def test_a_rehearsal_serves_its_trace_and_releases_what_a_burst_left_idle(
    mode: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The cluster starts with the unit the first lead time's 8 GPUs need, grows for the burst, and shrinks back
    once the units the burst left sit idle; in dry-run too, since the simulated cluster is no cloud."""
    clock = SimulatedClock(CLOCK_START)
    rehearsal = _rehearsal(_settings(mode), _trace(tmp_path, TICK), clock)
    assert rehearsal.shadow is None and rehearsal.daemon.mode == "enforce"
    with caplog.at_level(logging.INFO, logger="agent.daemon.replay"):
        targets = _run(rehearsal, clock, BEFORE + BURST + AFTER)

    before, burst = BEFORE // TICK, BURST // TICK
    assert targets[:before] == [1] * before  # started at 1 unit for 8 GPUs: nothing asked for from 0
    assert max(targets[before : before + burst]) == 5  # 40 GPUs
    assert targets[-(AFTER // TICK) // 2 :] == [1] * ((AFTER // TICK) // 2)  # the burst's units released
    waits = [r.getMessage() for r in caplog.records if "of demand wait" in r.getMessage()]
    assert waits and waits[0].startswith("rehearsal: 32 of 40 accelerators of demand wait")  # within the lead time


@pytest.mark.parametrize("configured", [None, "5m"])
def test_a_rehearsal_reads_its_trace_at_the_trace_step(
    configured: str | None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A trace of 10-minute steps, under forecast.step 5m (the default, or written): every tick plans on the trace,
    none is held for want of demand, and a step written in the configuration is said to be overridden."""
    forecast = {} if configured is None else {"step": configured}
    clock = SimulatedClock(CLOCK_START)
    with caplog.at_level(logging.WARNING):
        rehearsal = _rehearsal(_settings("enforce", forecast), _trace(tmp_path, 2 * TICK), clock)
        targets = _run(rehearsal, clock, BEFORE + BURST + AFTER)

    held = rehearsal.metrics.registry.get_sample_value(
        "leadtime_skips_total", {"pool": "gpu", "reason": "missing-data"}
    )
    assert held is None  # no tick held the pool
    assert max(targets) == 5 and targets[-1] == 1  # it followed the burst up and back down
    overridden = [r.getMessage() for r in caplog.records if "but the trace's step is 10m" in r.getMessage()]
    assert len(overridden) == (configured is not None)


def test_a_class_without_values_in_the_rehearsal_is_refused_naming_replay_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A class whose values end before the rehearsal starts: no step could be served, so no unit would ever be
    seen idle; the refusal says which start it came from and how to choose another."""
    trace = _trace(tmp_path, TICK)
    frame = pd.read_csv(trace)
    early = frame.head(12).assign(unique_id="eval")  # the first hour only
    frame = pd.concat([frame, early])
    frame.to_csv(trace, index=False)
    config = tmp_path / "leadtime.yaml"
    config.write_text(
        json.dumps(
            {
                "demand_classes": [{"name": "train"}, {"name": "eval"}],
                "pools": [{**POOL, "serves": ["train", "eval"]}],
                "forecast": {"history": "1d", "model": "last-value"},
                "daemon": {"leader_election": {"enabled": False}},
            }
        )
    )
    assert main(["run", "--config", str(config), "--replay", str(trace)]) == 2
    err = capsys.readouterr().err
    assert "cannot rehearse from the trace's start plus forecast.history (2024-01-02T00:00:00+00:00)" in err
    assert "demand class 'eval' has no observed value" in err and "set with --replay-from" in err

"""``forecast.history`` has a floor. A number without a unit is seconds, so ``history: 72`` was 72 seconds: the
configuration loaded ("ok"), ``recommend`` then stopped blaming Prometheus for an empty time range, and ``simulate``
forecast every class as its bare last value (never calibrated: 6.94% of demand unserved on a ten-day cluster history
where 3d gave 0.16%). A history shorter than the calibration takes is now refused at load, naming the key and the
seconds; one shorter than a day loads with a warning; ``export-trace --since 3`` names the flag and the seconds."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from agent.cli import main
from config import settings_from_mapping
from config.schema import calibration_history
from forecasting.calibrated import last_value_forecaster
from models import ConfigError
from tests.conftest import TraceWriter
from tests.scenario.test_simulate import run_cli

BASE: dict[str, Any] = {
    "demand_classes": [{"name": "train"}],
    "pools": [
        {
            "id": "a100",
            "kind": "gpu-node-pool",
            "chips_per_unit": 8,
            "max_units": 4,
            "price_per_chip_hour_usd": 3.0,
            "lead_time": "10m",
            "serves": ["train"],
        }
    ],
}


def _config(tmp_path: Path, forecast: dict[str, Any]) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({**BASE, "forecast": forecast}), encoding="utf-8")
    return path


@pytest.mark.parametrize("step", [timedelta(minutes=5), timedelta(minutes=1), timedelta(minutes=15)])
def test_the_floor_is_what_the_calibration_says_it_takes(step: timedelta) -> None:
    """The calibrated last value (``naive``, every model's fallback) fitted on too little history says how much it
    takes; the configuration's floor is that, at every step."""
    index = pd.date_range("2026-01-01", periods=3, freq=step, tz="UTC")
    frame = pd.DataFrame({"unique_id": "train", "ds": index, "y": np.arange(3.0)})
    forecast = last_value_forecaster().fit(frame, step).predict(frame, 12, (0.5, 0.9))
    quoted = re.search(r"it takes (\S+) of history", str(forecast["note"].iloc[0]))
    assert quoted is not None, forecast["note"].iloc[0]
    assert quoted.group(1) == str(calibration_history(step))
    assert calibration_history(timedelta(minutes=5)) == timedelta(hours=3)


def test_a_history_of_bare_seconds_is_refused_at_load_naming_the_key_and_the_unit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, {"history": 72})
    assert main(["validate-config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "forecast: history 1m12s is too short" in err
    assert "takes 3h at forecast.step 5m" in err and "every class is forecast as its bare last value" in err
    assert "Give at least 3h" in err and "a number without a unit is seconds (72 is 1m12s)" in err


def test_the_floor_follows_the_step_and_persistence_needs_two_steps_only() -> None:
    # at a 1m step the calibration takes 24 + 60 steps: 1h24m
    with pytest.raises(ConfigError, match=r"history 1h is too short: .* takes 1h24m at forecast\.step 1m"):
        settings_from_mapping({**BASE, "forecast": {"history": "1h", "step": "1m"}})
    assert settings_from_mapping({**BASE, "forecast": {"history": "1h24m", "step": "1m"}}).forecast.history == (
        timedelta(hours=1, minutes=24)
    )
    # persistence learns and calibrates nothing: an hour is plenty, but a range without two steps is not
    persistence = {"model": "persistence", "step": "5m"}
    hour = settings_from_mapping({**BASE, "forecast": {**persistence, "history": "1h"}})
    assert hour.forecast.short_history() is None
    with pytest.raises(ConfigError, match=r"history 5m is too short: it must hold two forecast\.step"):
        settings_from_mapping({**BASE, "forecast": {**persistence, "history": 300}})


def test_a_history_shorter_than_a_day_loads_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    config = _config(tmp_path, {"history": "6h"})
    assert main(["validate-config", str(config)]) == 0
    assert "ok (1 demand classes" in capsys.readouterr().out
    (warning,) = [r.getMessage() for r in caplog.records if "forecast.history" in r.getMessage()]
    assert "forecast.history: 6h is shorter than a day" in warning and "forecast.model auto" in warning
    caplog.clear()
    assert main(["validate-config", str(_config(tmp_path, {"history": "1d"}))]) == 0
    assert not [r for r in caplog.records if "forecast.history" in r.getMessage()]


def test_export_trace_names_since_when_its_range_holds_fewer_than_two_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused before Prometheus is asked anything: the configuration has no prometheus section to ask."""
    config = _config(tmp_path, {})
    out = str(tmp_path / "trace.csv")
    end = "2026-12-05T12:00:00Z"
    assert main(["export-trace", "--config", str(config), "--out", out, "--since", "3", "--end", end]) != 0
    err = capsys.readouterr().err
    assert (
        "export-trace: the range --since 3s (a number without a unit is seconds), 2026-12-05T11:59:57+00:00 .. "
        "2026-12-05T12:00:00+00:00, holds fewer than two steps of forecast.step (5m): give a longer range, e.g. "
        "--since 14d"
    ) in err
    assert main(["export-trace", "--config", str(config), "--out", out, "--start", "2026-12-05T11:55Z", "--end", end])
    assert "the range --start .. --end, 2026-12-05T11:55:00+00:00" in capsys.readouterr().err


# A trace is replayed at its own step, not at forecast.step: the floor is checked again at the trace's step
# (15m here, where the calibration takes 7h), and so is backtest's --history. Two days of 15-minute steps.
QUARTER = timedelta(minutes=15)
DAYS = 2 * 96


def _quarter_trace(write_trace: TraceWriter) -> Path:
    return write_trace({"train": [4.0 + 6.0 * (i % 96 > 40) + (i % 5) for i in range(DAYS)]}, step="15min")


def test_simulate_refuses_a_history_too_short_at_the_traces_step(
    tmp_path: Path, write_trace: TraceWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    """3h loads at the 5m step, but a 15m trace needs 7h: it was replayed with every class forecast as its bare
    last value, and the settings results.json recorded (3h at forecast.step 15m) did not load back."""
    trace, out = str(_quarter_trace(write_trace)), tmp_path / "out"
    argv = ["simulate", "--trace", trace, "--out", str(out), "--start", "2024-01-02", "--equal-service", "none"]
    assert run_cli([*argv, "--config", str(_config(tmp_path, {"history": "3h"})), "--policy", "reactive"]) == 2
    err = capsys.readouterr().err
    assert (
        "forecast.history 3h is too short for the trace, whose step is 15m (a trace is replayed at its own step, not "
        "at forecast.step 5m): the calibration of the forecast's band takes 7h at forecast.step 15m"
    ) in err
    assert "Give at least 7h" in err
    assert not out.exists()

    # at the floor the run goes on, and the settings it records load back as they ran
    assert run_cli([*argv, "--config", str(_config(tmp_path, {"history": "7h"})), "--policy", "reactive"]) == 0
    written = json.loads((out / "results.json").read_text())["config"]["settings"]
    reloaded = settings_from_mapping(written, "results.json config.settings")
    assert (reloaded.forecast.step, reloaded.forecast.history) == (QUARTER, timedelta(hours=7))


def _backtest(tmp_path: Path, trace: Path, history: str, models: str, horizons: str = "15m,1h") -> list[str]:
    out = tmp_path / "backtest.json"
    window = ["--start", "2024-01-02T00:00Z", "--end", "2024-01-02T03:00Z", "--horizons", horizons]
    return ["backtest", "--trace", str(trace), *window, "--models", models, "--history", history, "--out", str(out)]


def test_backtest_refuses_a_history_too_short_to_calibrate_at_the_traces_step(
    tmp_path: Path, write_trace: TraceWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --history 3h on a 15m trace every forecast of naive was persistence's, at every origin ("naive fell
    back to persistence in 12 of 12 forecast rows", told after the run): the scores of a model never run."""
    trace = _quarter_trace(write_trace)
    assert run_cli(_backtest(tmp_path, trace, "3h", "naive,persistence")) == 2
    assert (
        "--history 3h is too short for naive at the trace's step 15m: their calibration takes 7h (24 errors of "
        "forecasts 1h ahead, the longest of --horizons and 1h)"
    ) in capsys.readouterr().err
    # calibrated that far ahead, the models need as much more history: 2h ahead at 15m takes 8h
    assert run_cli(_backtest(tmp_path, trace, "7h45m", "naive", horizons="15m,2h")) == 2
    assert "their calibration takes 8h (24 errors of forecasts 2h ahead" in capsys.readouterr().err

    # at the floor, naive forecasts on its own at every origin; persistence needs no calibration
    assert run_cli(_backtest(tmp_path, trace, "7h", "naive")) == 0
    result = json.loads((tmp_path / "backtest.json").read_text())
    assert result["models"]["naive"]["models_used"] == {"naive": 12}
    assert "fell back" not in capsys.readouterr().out
    assert run_cli(_backtest(tmp_path, trace, "1h", "persistence")) == 0

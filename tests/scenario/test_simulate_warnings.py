"""``leadtime simulate`` says on stderr what it does not simulate as asked: a window mostly of gaps, a
``forecast.step`` other than the trace's; and it refuses two sources of demand at once."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from tests.conftest import TraceWriter
from tests.scenario.test_simulate import run_cli, two_class_config


def _simulate(tmp_path: Path, config: dict[str, object], trace: Path, *extra: str) -> int:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    argv = ["simulate", "--config", str(path), "--trace", str(trace), "--out", str(tmp_path / "o"), "--no-progress"]
    return run_cli([*argv, "--policy", "reactive", "--equal-service", "none", *extra])


def test_a_window_mostly_of_gaps_is_warned_about_naming_the_class(
    tmp_path: Path, write_trace: TraceWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace({"a": [4.0] * 400, "b": [4.0] * 330 + [math.nan] * 70})

    assert _simulate(tmp_path, two_class_config(), trace, "--start", "2024-01-02T00:00:00+00:00") == 0

    err = capsys.readouterr().err
    assert "70 of the window's 112 steps (62%) are gaps" in err
    assert "'b' has no value at 70 step(s) (its values end at 2024-01-02T03:30:00+00:00)" in err
    window = json.loads((tmp_path / "o" / "results.json").read_text())["window"]
    assert (window["gap_steps"], window["missing_steps_by_class"]) == (70, {"b": 70})


def test_a_forecast_step_other_than_the_traces_is_said_and_the_traces_is_used(
    tmp_path: Path, write_trace: TraceWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    config = two_class_config()
    config["forecast"] = {"history": "1d", "step": "7m"}
    trace = write_trace({"a": [4.0] * 400, "b": [4.0] * 400})

    assert _simulate(tmp_path, config, trace, "--start", "2024-01-02T00:00:00+00:00") == 0

    err = capsys.readouterr().err
    assert "forecast.step is 7m in the configuration but the trace's step is 5m: simulating at the trace's step" in err
    assert "are gaps" not in err
    assert json.loads((tmp_path / "o" / "results.json").read_text())["trace"]["step_s"] == 300


def test_trace_and_source_prometheus_together_are_refused(
    tmp_path: Path, write_trace: TraceWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace({"a": [4.0] * 10, "b": [4.0] * 10})

    assert _simulate(tmp_path, two_class_config(), trace, "--source", "prometheus") == 2

    err = capsys.readouterr().err
    assert "--trace and --source prometheus are two sources of demand: give one" in err
    assert not (tmp_path / "o").exists()

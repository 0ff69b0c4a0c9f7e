"""The settings a replay runs with, and ``simulate`` records in results.json, load back when the trace's step is
longer than ``prometheus.max_staleness``: a trace is replayed at its own step (``forecast.step`` is switched to
it), and loading requires ``prometheus.max_staleness`` to be at least one forecast step. With a 30-minute trace
the recorded settings had ``forecast.step`` 30m beside the default ``max_staleness`` of 15m and were refused on
reload; the limit is now raised to the trace's step with them, and a limit set in the configuration is said to
be raised, as the step is."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.commands.run import rehearsal_settings, rehearsal_window
from agent.sources.trace import read_trace
from config import settings_from_mapping
from config.durations import parse_duration
from tests.conftest import TraceWriter
from tests.scenario.test_simulate import run_cli, two_class_config

STEP = timedelta(minutes=30)
STEPS = 2 * 48  # two days of 30-minute steps: a day of history, then a day simulated
RAISED = "prometheus.max_staleness is 15m in the configuration but the trace's step is 30m: simulating with 30m"


def _config(max_staleness: str | None) -> dict[str, Any]:
    config = two_class_config()
    prometheus: dict[str, Any] = {"url": "http://127.0.0.1:9"}  # never read: the demand is the trace's
    if max_staleness is not None:
        prometheus["max_staleness"] = max_staleness
    config["prometheus"] = prometheus
    return config


def _trace(write_trace: TraceWriter) -> Path:
    demand = [4.0 + 6.0 * (i % 48 > 20) for i in range(STEPS)]
    return write_trace({"a": demand, "b": [2.0] * STEPS}, step="30min")


@pytest.mark.parametrize(("configured", "recorded"), [(None, "30m"), ("15m", "30m"), ("1h", "1h")])
def test_the_settings_a_simulation_of_a_30m_trace_records_load_back(
    configured: str | None,
    recorded: str,
    tmp_path: Path,
    write_trace: TraceWriter,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(_config(configured)))
    out = tmp_path / "o"
    argv = ["simulate", "--config", str(path), "--trace", str(_trace(write_trace)), "--out", str(out)]
    assert run_cli([*argv, "--start", "2024-01-02", "--policy", "reactive", "--equal-service", "none"]) == 0

    written = json.loads((out / "results.json").read_text())["config"]["settings"]
    assert (written["forecast"]["step"], written["prometheus"]["max_staleness"]) == ("30m", recorded)
    reloaded = settings_from_mapping(written, "results.json config.settings")
    assert reloaded.prometheus is not None
    assert (reloaded.forecast.step, reloaded.prometheus.max_staleness) == (STEP, parse_duration(recorded))
    # a limit the configuration set is not changed unsaid; the default is raised as the default step is switched
    assert (RAISED in capsys.readouterr().err) == (configured == "15m")


def test_a_rehearsal_of_a_30m_trace_runs_with_settings_that_load_back(
    write_trace: TraceWriter, caplog: pytest.LogCaptureFixture
) -> None:
    settings = settings_from_mapping(_config("15m"))
    trace = read_trace(_trace(write_trace))

    rehearsed, mode = rehearsal_settings(settings, rehearsal_window(settings, trace, None), "enforce")

    assert mode == "enforce"
    assert rehearsed.prometheus is not None
    assert (rehearsed.forecast.step, rehearsed.prometheus.max_staleness) == (STEP, STEP)
    reloaded = settings_from_mapping(json.loads(json.dumps(rehearsed.model_dump(mode="json"))))
    assert reloaded == rehearsed
    assert RAISED in caplog.text

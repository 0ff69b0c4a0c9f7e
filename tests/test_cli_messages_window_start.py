"""A trace shorter than the default history, simulated without --start: the window the default start makes is
refused saying the start was defaulted, where it fell and what to give instead. The message was a reversed
window ('window 2024-01-08 .. 2024-01-03 is outside the trace') naming a date the user never typed."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from agent.simulation.window import select_window
from agent.sources.trace import read_trace
from config import settings_from_mapping
from models import TraceError
from tests.conftest import TraceWriter
from tests.scenario.test_simulate import run_cli, two_class_config

DAYS = 2


def _trace(write_trace: TraceWriter) -> Path:
    steps = DAYS * 288
    return write_trace({"a": [4.0 + (i % 12) for i in range(steps)], "b": [2.0] * steps})


def test_a_trace_shorter_than_the_default_history_is_refused_saying_the_start_was_defaulted(
    tmp_path: Path, write_trace: TraceWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(two_class_config()))
    trace = _trace(write_trace)
    argv = ["simulate", "--config", str(config), "--trace", str(trace), "--out", str(tmp_path / "o"), "--no-progress"]

    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert (
        "no --start given: the window starts 7 days after the trace starts (2024-01-08T00:00:00+00:00, the trace "
        "starting 2024-01-01T00:00:00+00:00), but the trace ends 2024-01-03T00:00:00+00:00; give --start before "
        "2024-01-03T00:00:00+00:00, e.g. --start 2024-01-02T00:00:00+00:00"
    ) in err
    assert "outside the trace" not in err

    # the start it suggests is taken
    assert run_cli([*argv, "--start", "2024-01-02T00:00:00+00:00", "--policy", "reactive"]) == 0


def test_an_end_before_the_defaulted_start_is_refused_naming_the_end(write_trace: TraceWriter) -> None:
    trace = read_trace(write_trace({"a": [4.0] * 10 * 288, "b": [2.0] * 10 * 288}))
    classes = settings_from_mapping(two_class_config()).demand_class_models()
    end = (trace.index[0] + timedelta(days=4)).to_pydatetime()

    with pytest.raises(TraceError) as refused:
        select_window(trace, classes, None, end)
    assert (
        "but the --end given is 2024-01-05T00:00:00+00:00; give --start before 2024-01-05T00:00:00+00:00, e.g. "
        "--start 2024-01-03T00:00:00+00:00" in str(refused.value)
    )


def test_a_start_given_keeps_its_message(write_trace: TraceWriter) -> None:
    trace = read_trace(_trace(write_trace))
    classes = settings_from_mapping(two_class_config()).demand_class_models()
    after = (trace.index[-1] + trace.step).to_pydatetime()

    with pytest.raises(TraceError, match="is outside the trace") as refused:
        select_window(trace, classes, after, None)
    assert "no --start given" not in str(refused.value)

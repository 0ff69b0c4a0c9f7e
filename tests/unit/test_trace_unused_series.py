"""A series the configuration does not use sets neither the trace's step nor its grid. A probe's two rows a minute
apart among 5-minute series made the whole trace a 1-minute grid: every configured class then had a gap at 4 steps
of 5, and every cost covered a fifth of the window with no warning; a probe off the 5-minute grid got the
configured classes refused as off the grid. ``simulate`` and ``run --replay`` read the configured classes' series
only (``read_trace``'s ``series``), and ``simulate`` warns when gaps of any kind take more than 5% of the window."""

from __future__ import annotations

import json
import math
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from agent.cli import main
from agent.sources.trace import read_trace
from models import TraceError
from tests.conftest import TraceWriter
from tests.scenario.test_simulate import run_cli, two_class_config


def _with_probe(path: Path, *stamps: str) -> Path:
    """The trace at ``path`` with a series ``probe`` of one row at each of ``stamps``, after the others."""
    rows = "".join(f"probe,{stamp},0\n" for stamp in stamps)
    stray = path.with_name("stray.csv")
    stray.write_text(path.read_text() + rows)
    return stray


def test_a_series_left_out_sets_neither_the_step_nor_the_grid(write_trace: TraceWriter) -> None:
    path = _with_probe(
        write_trace({"a": [1.0] * 40, "b": [2.0] * 40}), "2024-01-01T00:00:00+0000", "2024-01-01T00:01:00+0000"
    )

    assert read_trace(path).step == timedelta(minutes=1)  # every series read: the probe's spacing wins, as before
    trace = read_trace(path, series=["a", "b"])

    assert trace.step == timedelta(minutes=5)
    assert trace.series == ("a", "b") and len(trace.index) == 40
    assert not np.isnan(trace.values).any()


def test_a_series_left_out_off_the_grid_does_not_get_the_used_ones_refused(write_trace: TraceWriter) -> None:
    # 30 s before the trace's first step: the grid from the probe's first row put every row of a and b off it
    path = _with_probe(
        write_trace({"a": [1.0] * 40, "b": [2.0] * 40}), "2023-12-31T23:59:30+0000", "2024-01-01T00:04:30+0000"
    )
    with pytest.raises(TraceError, match="series 'a' has 40 row"):
        read_trace(path)

    trace = read_trace(path, series=["a", "b"])

    assert trace.index[0].isoformat() == "2024-01-01T00:00:00+00:00" and trace.step == timedelta(minutes=5)


def test_a_series_asked_for_that_the_file_lacks_is_named(write_trace: TraceWriter) -> None:
    with pytest.raises(TraceError, match=r"has no series \['c'\]; it has \['a', 'b'\]"):
        read_trace(write_trace({"a": [1.0] * 4, "b": [2.0] * 4}), series=["a", "c"])


def _simulate(tmp_path: Path, trace: Path, *policies: str) -> dict[str, Any]:
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(two_class_config()))
    out = tmp_path / trace.stem
    argv = ["simulate", "--config", str(config), "--trace", str(trace), "--out", str(out), "--no-progress"]
    argv += ["--policy", ",".join(policies), "--equal-service", "none", "--start", "2024-01-02T00:00:00+00:00"]
    assert run_cli(argv) == 0
    document: dict[str, Any] = json.loads((out / "results.json").read_text())
    return document


def test_simulate_costs_the_whole_window_whatever_other_series_the_trace_holds(
    tmp_path: Path, write_trace: TraceWriter
) -> None:
    clean = write_trace({"a": [8.0 + (i % 7) for i in range(400)], "b": [4.0] * 400})
    stray = _with_probe(clean, "2024-01-02T00:00:00+0000", "2024-01-02T00:01:00+0000")

    plain, probed = _simulate(tmp_path, clean, "static", "oracle"), _simulate(tmp_path, stray, "static", "oracle")

    assert probed["trace"]["step_s"] == 300
    window = probed["window"]
    assert window["steps"] == window["observed_steps"] == 112
    for policy in ("static", "oracle"):
        assert probed["policies"][policy]["cost_usd"] == plain["policies"][policy]["cost_usd"]


def test_simulate_warns_when_a_collector_outage_takes_more_than_5_percent_of_the_window(
    tmp_path: Path, write_trace: TraceWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = [8.0] * 400, [4.0] * 400
    a[320:340] = b[320:340] = [math.nan] * 20  # 20 of the window's 112 steps: no class has a value

    document = _simulate(tmp_path, write_trace({"a": a, "b": b}), "static")

    err = capsys.readouterr().err
    assert "WARNING" in err  # at the default log level, on stderr
    assert "20 of the window's 112 steps (18%) are gaps" in err
    assert "every cost and service figure covers the other 92 steps, 82% of the window" in err
    assert (
        "no class has a value at 20 steps (1 h 40 min from 2024-01-02T02:40:00+00:00; the trace's collector was down)"
        in err
    )
    assert document["window"]["observed_steps"] == 92


def test_a_rehearsal_reads_the_configured_classes_series_only(
    tmp_path: Path, write_trace: TraceWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    """A probe off the grid before the trace got the configured class refused as off the grid; read alone, the
    class reaches the rehearsal's own checks (here: 'eval' has no value from the rehearsal's start, refused before
    the daemon starts)."""
    trace = write_trace({"train": [8.0] * 400, "eval": [1.0] * 12 + [math.nan] * 388})
    stray = _with_probe(trace, "2023-12-31T23:59:30+0000", "2023-12-31T23:59:50+0000")
    config = tmp_path / "leadtime.yaml"
    config.write_text(
        json.dumps(
            {
                "demand_classes": [{"name": "train"}, {"name": "eval"}],
                "pools": [{**two_class_config()["pools"][0], "serves": ["train", "eval"]}],
                "forecast": {"history": "1d", "model": "last-value"},
                "daemon": {"leader_election": {"enabled": False}},
            }
        )
    )

    assert main(["run", "--config", str(config), "--replay", str(stray)]) == 2

    err = capsys.readouterr().err
    assert "off the trace's regular grid" not in err
    assert "demand class 'eval' has no observed value" in err and "cannot rehearse from" in err

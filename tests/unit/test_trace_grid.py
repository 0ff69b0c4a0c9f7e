"""The trace's step and grid: inferred per series from the most common spacing, so one odd row cannot shrink the step
to a millisecond (a 23.5 GB dense grid); rows off the grid are refused naming the series and rows; the grid has
a size limit; timestamps with mixed UTC offsets are read as the instants they name."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from agent.sources import trace as trace_module
from agent.sources.trace import read_trace
from models import TraceError
from tests.conftest import TraceWriter


def test_a_one_millisecond_offset_on_one_row_is_refused_naming_the_series_and_row(tmp_path: Path) -> None:
    stamps = pd.date_range("2024-01-01", periods=288, freq="5min", tz="UTC")
    rows = [f"a,{t.isoformat()},1" for t in stamps]
    odd = stamps[100] + pd.Timedelta(milliseconds=1)
    rows += [f"b,{(odd if i == 100 else t).isoformat()},2" for i, t in enumerate(stamps)]
    path = tmp_path / "t.csv"
    path.write_text("unique_id,ds,y\n" + "\n".join(rows) + "\n")

    with pytest.raises(TraceError) as refused:
        read_trace(path)

    message = str(refused.value)
    assert "series 'b' has 1 row(s) off the trace's regular grid of 300 s" in message
    assert "rows 390," in message and "00.001000+00:00" in message


def test_the_step_is_the_most_common_spacing_so_gaps_do_not_change_it(write_trace: TraceWriter) -> None:
    values = [1.0] * 20
    path = write_trace({"a": values, "b": values}, step="10min")
    lines = path.read_text().splitlines()
    # drop most rows of series a: its spacings become 20 and 30 minutes, b still says 10
    kept = [lines[0], *lines[1:21:3], *lines[21:]]
    path.write_text("\n".join(kept) + "\n")

    trace = read_trace(path)

    assert trace.step == timedelta(minutes=10)
    assert len(trace.index) == 20
    assert np.isnan(trace.column("a")).sum() == 20 - 7


def test_a_step_below_one_second_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    stamps = pd.date_range("2024-01-01", periods=5, freq="500ms", tz="UTC")
    path.write_text("unique_id,ds,y\n" + "".join(f"a,{t.isoformat()},1\n" for t in stamps))
    with pytest.raises(TraceError, match=r"the step is 0.5 s; it must be at least 1 s"):
        read_trace(path)


def test_a_grid_above_the_size_limit_is_refused_before_it_is_built(
    write_trace: TraceWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trace_module, "MAX_GRID_CELLS", 100)
    path = write_trace({"a": [1.0] * 60, "b": [1.0] * 60})
    with pytest.raises(TraceError, match=r"60 steps of 300 s x 2 series is 120 cells, above the limit of 100"):
        read_trace(path)


def test_timestamps_with_mixed_offsets_are_converted_to_utc(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(
        "unique_id,ds,y\n"
        "a,2024-01-01T08:00:00+08:00,1\n"
        "a,2024-01-01T00:05:00+00:00,2\n"
        "a,2023-12-31T19:10:00-05:00,3\n"
        "a,2024-01-01T00:15:00Z,4\n"  # a row without an offset among these is refused (test_trace_offsets_and_order)
    )
    trace = read_trace(path)
    assert [t.isoformat() for t in trace.index] == [
        "2024-01-01T00:00:00+00:00",
        "2024-01-01T00:05:00+00:00",
        "2024-01-01T00:10:00+00:00",
        "2024-01-01T00:15:00+00:00",
    ]
    assert trace.column("a").tolist() == [1.0, 2.0, 3.0, 4.0]

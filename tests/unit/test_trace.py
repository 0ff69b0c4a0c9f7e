"""Reading traces: real data loads; every malformed trace is refused with a message naming the problem;
gaps stay gaps (NaN), never zero."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from agent.simulation import select_window
from agent.sources.trace import TraceSource, read_trace
from models import DemandClass, TraceError
from tests.conftest import TraceWriter


def test_bundled_trace_loads_with_its_gaps(bundled_trace: Path) -> None:
    trace = read_trace(bundled_trace)
    assert trace.step == timedelta(minutes=5)
    assert len(trace.series) == 17 and "earth/total" in trace.series
    total = trace.column("earth/total")
    day = trace.position(datetime(2020, 5, 9, 16, tzinfo=UTC))  # 2020-05-10 00:00 +08:00
    assert np.isnan(total[day : day + 288]).all(), "the collector outage of 2020-05-10 must stay missing"
    assert not np.isnan(total[:day]).any()


def test_fetch_keeps_missing_steps_missing(write_trace: TraceWriter) -> None:
    trace = read_trace(write_trace({"a": [1.0, math.nan, 3.0]}))
    start = trace.index[0].to_pydatetime()
    frame = TraceSource(trace).fetch([DemandClass("a")], start, start + timedelta(minutes=30), trace.step)
    assert frame["y"].isna().tolist() == [False, True, False]
    assert frame["ds"].dt.tz is not None


@pytest.mark.parametrize(
    ("csv", "message"),
    [
        ("unique_id,ds,y,runing\na,2024-01-01T00:00:00,1,1\n", r"column\(s\) 'runing' \(meant 'running'\?\)"),
        ("unique_id,y\na,1\n", r"lacks column\(s\) \['ds'\]"),
        ("unique_id,ds,y\na,2024-01-01T00:10:00,1\na,2024-01-01T00:05:00,2\n", "must increase strictly; row 3"),
        ("unique_id,ds,y\na,2024-01-01T00:00:00,1\na,2024-01-01T00:00:00,2\n", "must increase strictly"),
        ("unique_id,ds,y\na,2024-01-01T00:00:00,1\na,2024-01-01T00:05:00,-2\n", "must not be negative; row 3"),
        ("unique_id,ds,y\na,2024-01-01T00:00:00,1\na,2024-01-01T00:05:00,lots\n", "must be numeric; row 3"),
        ("unique_id,ds,y\na,yesterday,1\na,today,2\n", "ISO-8601"),
        ("unique_id,ds,y\n", "no rows"),
        ("unique_id,ds,y\na,2024-01-01T00:00:00,1\na,2024-01-01T00:07:00,1\na,2024-01-01T00:12:00,1\n", "regular grid"),
    ],
)
def test_malformed_traces_are_refused(tmp_path: Path, csv: str, message: str) -> None:
    path = tmp_path / "t.csv"
    path.write_text(csv)
    with pytest.raises(TraceError, match=message):
        read_trace(path)


def test_missing_trace_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="trace file not found"):
        read_trace(tmp_path / "nope.csv")


def test_window_of_only_missing_values_is_refused(write_trace: TraceWriter) -> None:
    trace = read_trace(write_trace({"a": [1.0] * 10 + [math.nan] * 10}))
    start = trace.index[10].to_pydatetime()
    with pytest.raises(TraceError, match="no observed demand in the window"):
        select_window(trace, [DemandClass("a")], start, None)


def test_class_without_any_value_in_window_is_refused(write_trace: TraceWriter) -> None:
    trace = read_trace(write_trace({"a": [1.0] * 20, "b": [2.0] * 10 + [math.nan] * 10}))
    start = trace.index[10].to_pydatetime()
    with pytest.raises(TraceError, match="'b' has no observed value in the window") as refused:
        select_window(trace, [DemandClass("a"), DemandClass("b")], start, None)
    # where its data is, so a person can pick a window or leave the class out
    assert f"its values from {trace.index[0].isoformat()} to {trace.index[10].isoformat()}" in str(refused.value)


def test_empty_window_is_refused(bundled_trace: Path) -> None:
    trace = read_trace(bundled_trace)
    at = datetime(2020, 5, 12, tzinfo=UTC)
    with pytest.raises(TraceError, match="empty window"):
        select_window(trace, [DemandClass("earth/vc3sl")], at, at)
    with pytest.raises(TraceError, match="outside the trace"):
        select_window(trace, [DemandClass("earth/vc3sl")], datetime(2021, 1, 1, tzinfo=UTC), None)


def test_unknown_series_is_named(bundled_trace: Path) -> None:
    trace = read_trace(bundled_trace)
    with pytest.raises(TraceError, match=r"no series for demand class\(es\) \['earth/nope'\]"):
        select_window(trace, [DemandClass("earth/nope")], None, None)


@pytest.mark.parametrize(
    ("stamp", "shown"),
    [
        ("garbage", "row 3 has 'garbage'"),
        ("2024-01-01T00:05:00+25:00", "row 3 has '2024-01-01T00:05:00+25:00'"),
        ("1704067500", "row 3 has '1704067500' (it looks like a Unix epoch time)"),
    ],
)
def test_an_unreadable_timestamp_is_refused_in_one_line_naming_the_row(tmp_path: Path, stamp: str, shown: str) -> None:
    path = tmp_path / "t.csv"
    path.write_text(f"unique_id,ds,y\na,2024-01-01T00:00:00,1\na,{stamp},2\na,2024-01-01T00:10:00,3\n")
    with pytest.raises(TraceError) as refused:
        read_trace(path)
    message = str(refused.value)
    assert shown in message and "must be ISO-8601" in message
    assert "\n" not in message and "format=" not in message


def test_a_row_with_an_empty_unique_id_is_refused_naming_the_row(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("unique_id,ds,y\na,2024-01-01T00:00:00,1\na,2024-01-01T00:05:00,2\n,2024-01-01T00:10:00,3\n")
    with pytest.raises(TraceError, match="row 4 has an empty unique_id"):
        read_trace(path)


def test_series_names_are_read_as_written(tmp_path: Path) -> None:
    # an empty name is refused above; a name pandas would read as missing ("NA") or a number ("01") stays as is
    path = tmp_path / "t.csv"
    path.write_text(
        "unique_id,ds,y\nNA,2024-01-01T00:00:00,1\nNA,2024-01-01T00:05:00,NA\n"
        "01,2024-01-01T00:00:00,3\n01,2024-01-01T00:05:00,\n"
    )
    trace = read_trace(path)
    assert set(trace.series) == {"NA", "01"}
    assert np.isnan(trace.column("NA")[1]) and np.isnan(trace.column("01")[1])


def test_a_directory_is_not_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="is a directory; give the trace's CSV file"):
        read_trace(tmp_path)

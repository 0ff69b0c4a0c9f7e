"""Reading a trace row by row: an error names the row's line in the file (blank lines count), a row cut short is
refused naming its line instead of becoming a gap, and the step is the most common spacing, so one stray row in a
short series is the only row blamed."""

from __future__ import annotations

import gzip
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from agent.sources.trace import read_trace
from models import TraceError

HEADER = "unique_id,ds,y\n"


def _write(path: Path, text: str) -> Path:
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_bytes(text.encode())
    return path


@pytest.mark.parametrize("name", ["t.csv", "t.csv.gz"])
def test_an_error_names_the_line_in_the_file_past_blank_lines(tmp_path: Path, name: str) -> None:
    text = HEADER + "a,2024-01-01T00:00:00Z,1\na,2024-01-01T00:05:00Z,2\n\n\na,2024-01-01T00:10:00Z,x\n"
    with pytest.raises(TraceError, match=r"column y must be numeric; row 6 has 'x'"):
        read_trace(_write(tmp_path / name, text))


def test_lines_count_from_the_file_with_windows_line_endings_and_blank_lines_before_the_header(
    tmp_path: Path,
) -> None:
    text = "\r\n" + HEADER.replace("\n", "\r\n") + "a,2024-01-01T00:00:00Z,1\r\n\r\na,2024-01-01T00:05:00Z,-3\r\n"
    with pytest.raises(TraceError, match=r"demand y must not be negative; row 5 has -3"):
        read_trace(_write(tmp_path / "t.csv", text))


def test_a_row_cut_short_is_refused_naming_its_line_and_the_field_it_lacks(tmp_path: Path) -> None:
    text = HEADER + "a,2024-01-01T00:00:00Z,1\n\na,2024-01-01T00:05:00Z\na,2024-01-01T00:10:00Z,3\n"
    with pytest.raises(TraceError) as refused:
        read_trace(_write(tmp_path / "t.csv", text))
    message = str(refused.value)
    assert "row 4 has 2 field(s) where the header has 3: it lacks y" in message


def test_an_empty_field_is_still_a_gap_and_blank_lines_are_no_rows(tmp_path: Path) -> None:
    text = HEADER + "a,2024-01-01T00:00:00Z,1\na,2024-01-01T00:05:00Z,\n   \na,2024-01-01T00:10:00Z,3\n\n\n"
    trace = read_trace(_write(tmp_path / "t.csv", text))
    values = trace.column("a")
    assert values[0] == 1.0 and np.isnan(values[1]) and values[2] == 3.0
    assert len(values) == 3


def test_a_field_over_two_lines_keeps_the_numbering_of_the_file(tmp_path: Path) -> None:
    text = HEADER + '"a\nb",2024-01-01T00:00:00Z,1\n"a\nb",2024-01-01T00:05:00Z\n'
    with pytest.raises(TraceError, match=r"row 4 has 2 field\(s\) where the header has 3: it lacks y"):
        read_trace(_write(tmp_path / "t.csv", text))


def test_one_stray_row_in_a_short_series_is_the_only_row_off_the_grid(tmp_path: Path) -> None:
    rows = ["00:00", "00:01", "00:05", "00:10", "00:15"]
    text = HEADER + "".join(f"a,2024-01-01T{t}:00Z,1\n" for t in rows)
    with pytest.raises(TraceError) as refused:
        read_trace(_write(tmp_path / "t.csv", text))
    message = str(refused.value)
    assert "series 'a' has 1 row(s) off the trace's regular grid of 300 s" in message
    assert "(rows 3, first at 2024-01-01T00:01:00+00:00)" in message


def test_the_step_is_the_most_common_spacing_of_a_series_not_its_median(tmp_path: Path) -> None:
    # spacings 10, 10, 10, 20, 20, 30, 30 minutes: the median is 20, which half the rows are off
    rows = ["00:00", "00:10", "00:20", "00:30", "00:50", "01:10", "01:40", "02:10"]
    text = HEADER + "".join(f"a,2024-01-01T{t}:00Z,1\n" for t in rows)
    trace = read_trace(_write(tmp_path / "t.csv", text))
    assert trace.step == timedelta(minutes=10)
    assert len(trace.index) == 14
    assert int(np.isnan(trace.column("a")).sum()) == 14 - len(rows)

"""A trace's timestamps as a person edits them: a row that lost its time-zone offset among rows that have one is
refused naming it (not read as UTC, hours from its neighbours), and rows out of order or repeated are refused naming
both rows of the series and what to do."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from agent.sources.trace import read_trace
from models import TraceError
from tests.conftest import BUNDLED_TRACE

SERIES = "earth/vc3sl"  # the bundled trace's first series, every row with +08:00


def _bundled_lines() -> list[str]:
    with gzip.open(BUNDLED_TRACE, "rt", encoding="utf-8") as handle:
        return handle.read().splitlines()


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _drop_offset(line: str) -> str:
    uid, ds, rest = line.split(",", 2)
    assert ds.endswith("+08:00")
    return f"{uid},{ds.removesuffix('+08:00')},{rest}"


def _rows_of(lines: list[str], uid: str) -> list[int]:
    """File lines (from 1) of ``uid``'s rows."""
    return [n for n, line in enumerate(lines, start=1) if line.startswith(f"{uid},")]


@pytest.mark.parametrize("where", ["last", "middle"])
def test_a_row_that_lost_its_offset_is_refused_naming_it(tmp_path: Path, where: str) -> None:
    lines = _bundled_lines()
    rows = _rows_of(lines, SERIES)
    row = rows[-1] if where == "last" else rows[len(rows) // 2]
    lines[row - 1] = _drop_offset(lines[row - 1])
    written = lines[row - 1].split(",")[1]
    # Read as UTC the last row would land 8 hours after the series' end, the trace growing by 96 gap steps; in the
    # middle it would come after its successor, which the order check blamed.
    with pytest.raises(TraceError) as refused:
        read_trace(_write(tmp_path, lines))
    message = str(refused.value)
    assert f"row {row} has no offset ({written!r})" in message
    assert "rows mix timestamps with and without a time-zone offset (102,815 with, 1 without)" in message
    assert "give every row an explicit offset" in message


def test_a_row_with_an_offset_among_rows_without_one_is_the_one_named(tmp_path: Path) -> None:
    lines = ["unique_id,ds,y"] + [f"a,2024-01-01T00:{m:02d}:00,1" for m in range(0, 60, 5)]
    lines[4] = "a,2024-01-01T00:15:00+00:00,1"  # file line 5: the only row with an offset
    with pytest.raises(TraceError, match=r"row 5 has an offset \('2024-01-01T00:15:00\+00:00'\) where row 2 has none"):
        read_trace(_write(tmp_path, lines))


def test_a_trace_without_any_offset_is_read_as_utc(tmp_path: Path) -> None:
    lines = ["unique_id,ds,y"] + [f"a,2024-01-01 00:{m:02d}:00,{m}" for m in range(0, 60, 5)]
    trace = read_trace(_write(tmp_path, lines))
    assert trace.index[0].isoformat() == "2024-01-01T00:00:00+00:00"
    assert len(trace.index) == 12


def test_rows_with_different_offsets_are_read_at_their_instants(tmp_path: Path) -> None:
    lines = ["unique_id,ds,y", "a,2024-01-01T08:00:00+08:00,1", "a,2024-01-01T00:05:00Z,2", "a,2024-01-01T00:10:00,3"]
    with pytest.raises(TraceError, match="row 4 has no offset"):  # Z and +08:00 are offsets alike
        read_trace(_write(tmp_path, lines))
    lines[3] = "a,2024-01-01T00:10:00+0000,3"
    trace = read_trace(_write(tmp_path, lines))
    assert [t.isoformat() for t in trace.index] == [f"2024-01-01T00:{m}:00+00:00" for m in ("00", "05", "10")]


def test_a_shuffled_trace_is_refused_naming_two_rows_of_one_series_and_saying_to_sort(tmp_path: Path) -> None:
    header, *rows = _bundled_lines()
    rows = rows[::7] + [r for n, r in enumerate(rows) if n % 7]  # every series' rows out of order, interleaved
    lines = [header, *rows]
    with pytest.raises(TraceError) as refused:
        read_trace(_write(tmp_path, lines))
    message = str(refused.value)
    found = re.search(r"series '([^']+)' must increase strictly; row (\d+) \('([^']+)'\) is earlier than row (\d+) "
                      r"\('([^']+)'\), the row of the series before it", message)  # fmt: skip
    assert found is not None, message
    uid, later, later_ds, earlier, earlier_ds = found.groups()
    # both rows named are the series' own, as the file has them, and the second comes first in the file
    assert lines[int(later) - 1].split(",")[:2] == [uid, later_ds]
    assert lines[int(earlier) - 1].split(",")[:2] == [uid, earlier_ds]
    series_rows = _rows_of(lines, uid)
    assert series_rows[series_rows.index(int(later)) - 1] == int(earlier)
    assert message.endswith("; sort the file by unique_id, then ds")


def test_series_interleaved_in_time_order_are_read(tmp_path: Path) -> None:
    lines = ["unique_id,ds,y"]
    for m in range(0, 30, 5):
        lines += [f"a,2024-01-01T00:{m:02d}:00Z,1", f"b,2024-01-01T00:{m:02d}:00Z,2"]
    trace = read_trace(_write(tmp_path, lines))
    assert trace.series == ("a", "b") and len(trace.index) == 6


@pytest.mark.parametrize(
    ("second", "instant"),
    [
        ("2024-01-01T00:05:00+00:00", "2024-01-01T00:05:00+00:00"),
        ("2024-01-01T08:05:00+08:00", "2024-01-01T00:05:00+00:00"),  # the same instant written in another zone
    ],
)
def test_a_repeated_timestamp_is_called_a_duplicate_naming_both_rows(tmp_path: Path, second: str, instant: str) -> None:
    lines = ["unique_id,ds,y", "a,2024-01-01T00:00:00+00:00,1", "b,2024-01-01T00:00:00+00:00,1",
             "a,2024-01-01T00:05:00+00:00,1", "b,2024-01-01T00:05:00+00:00,1", f"a,{second},2",
             "a,2024-01-01T00:10:00+00:00,1"]  # fmt: skip
    with pytest.raises(TraceError) as refused:
        read_trace(_write(tmp_path, lines))
    assert str(refused.value) == (
        f"trace {tmp_path / 'trace.csv'}: series 'a' has a duplicate timestamp: rows 4 ('2024-01-01T00:05:00+00:00') "
        f"and 6 ({second!r}) are both at {instant}; its timestamps must increase strictly: keep one row per series "
        "and time"
    )

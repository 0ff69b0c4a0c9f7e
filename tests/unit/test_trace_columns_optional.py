"""A trace's optional columns (``running``, ``pending``, ``capacity``) are checked as ``y`` is, naming the file, the
line and the column: text that is not a number, a negative or infinite value, and parts of the demand that do not
make it (``y = running + pending``) were read without a word, though nothing in the trace could mean them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from agent.sources.trace import read_trace
from models import TraceError

HEADER = "unique_id,ds,y,running,pending,capacity\n"
FIRST = "a,2024-01-01T00:00:00Z,3,1,2,8\n"


def _trace(tmp_path: Path, row: str, header: str = HEADER, first: str = FIRST) -> Path:
    path = tmp_path / "demand.csv"
    path.write_text(header + first + row + "a,2024-01-01T00:10:00Z,4,4,0,8\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("a,2024-01-01T00:05:00Z,3,1,two,8\n", "column pending must be numeric; row 3 has 'two'"),
        ("a,2024-01-01T00:05:00Z,3,x,2,8\n", "column running must be numeric; row 3 has 'x'"),
        ("a,2024-01-01T00:05:00Z,3,1,2,8 GPUs\n", "column capacity must be numeric; row 3 has '8 GPUs'"),
        ("a,2024-01-01T00:05:00Z,3,4,-1,8\n", "column pending must not be negative; row 3 has -1"),
        ("a,2024-01-01T00:05:00Z,3,1,2,-8\n", "column capacity must not be negative; row 3 has -8"),
        ("a,2024-01-01T00:05:00Z,3,1,2,inf\n", "column capacity must be finite and at most 1e+09 accelerators; row 3"),
        ("a,2024-01-01T00:05:00Z,3,-inf,2,8\n", "column running must not be negative; row 3 has -inf"),
    ],
)
def test_a_bad_value_in_an_optional_column_is_refused_naming_file_line_and_column(
    tmp_path: Path, row: str, message: str
) -> None:
    path = _trace(tmp_path, row)
    with pytest.raises(TraceError) as refused:
        read_trace(path)
    assert str(refused.value).startswith(f"trace {path}: ")
    assert message in str(refused.value)


@pytest.mark.parametrize(
    ("row", "shown"),
    [
        ("a,2024-01-01T00:05:00Z,3,0,5,8\n", "row 3 has running 0, pending 5 and y 3"),  # pending above the demand
        ("a,2024-01-01T00:05:00Z,3,2,2,8\n", "row 3 has running 2, pending 2 and y 3"),
        ("a,2024-01-01T00:05:00Z,3,1,1,8\n", "row 3 has running 1, pending 1 and y 3"),
    ],
)
def test_running_and_pending_that_do_not_make_the_demand_are_refused(tmp_path: Path, row: str, shown: str) -> None:
    with pytest.raises(TraceError) as refused:
        read_trace(_trace(tmp_path, row))
    message = str(refused.value)
    assert "running + pending must equal the demand y" in message
    assert shown in message


def test_a_part_given_alone_may_not_exceed_the_demand(tmp_path: Path) -> None:
    header, first = "unique_id,ds,y,pending\n", "a,2024-01-01T00:00:00Z,3,2\n"
    path = tmp_path / "demand.csv"
    path.write_text(header + first + "a,2024-01-01T00:05:00Z,3,3\na,2024-01-01T00:10:00Z,3,7\n", encoding="utf-8")
    with pytest.raises(TraceError, match=r"pending must not exceed the demand y \(it is part of it\); row 4 has "):
        read_trace(path)


def test_consistent_parts_gaps_and_rounding_are_read_and_only_y_is_replayed(tmp_path: Path) -> None:
    rows = (
        "a,2024-01-01T00:05:00Z,0.3,0.1,0.2,8\n"  # 0.1 + 0.2 is 0.30000000000000004
        "a,2024-01-01T00:10:00Z,,,,8\n"  # a collector outage: a gap in each value column
        "a,2024-01-01T00:15:00Z,5,5,,\n"  # pending and capacity unknown
    )
    path = tmp_path / "demand.csv"
    path.write_text(HEADER + FIRST + rows, encoding="utf-8")
    trace = read_trace(path)
    values = trace.column("a")
    assert values[[0, 1, 3]].tolist() == [3.0, 0.3, 5.0]
    assert np.isnan(values[2])

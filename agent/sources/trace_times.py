"""A trace's timestamps: reading the ``ds`` column as UTC instants and checking each series' order.

A timestamp without an offset is read as UTC, so a trace written all in UTC without offsets reads as written. A
trace that mixes rows with and without an offset is refused: a row that lost its offset (``+08:00`` dropped by a
hand edit or another tool) would otherwise move by the offset, hours from its neighbours, and either extend the
trace or be refused as out of order, the message naming a row that is not at fault.

Each series' rows must come in increasing time in the file. The rows are not sorted here: a row out of order is
refused naming it and the row of its series before it, saying to sort the file (the trace's format promises no
order, and sorting is what a person does once, where a row out of order can be a row in the wrong zone that
sorting would hide). A timestamp that a series repeats is refused as a duplicate, naming both rows, before the
order is checked, since sorting does not remove it."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from models import TraceError

# An ISO-8601 time of day followed by an offset (Z, +HH, +HHMM, +HH:MM), as pandas reads them; the separator
# before the time tells a date's own hyphens ('2024-01-01') from an offset's.
_WITH_OFFSET = re.compile(r"[T ].*\d\s*(?:Z|[+-]\d\d(?::?\d\d)?)\s*$")


def timestamps(column: pd.Series, source: str) -> pd.Series:
    """``column`` (one timestamp per row, indexed by file line) as tz-aware UTC; every problem is a ``TraceError``
    naming the row."""
    if column.isna().any():
        row = int(np.flatnonzero(column.isna().to_numpy())[0])
        raise TraceError(f"trace {source}: row {column.index[row]} has an empty timestamp")
    try:  # the usual trace: every row without an offset, or every row with the same one
        alike = pd.to_datetime(column, format="ISO8601")
        return alike.dt.tz_localize("UTC") if alike.dt.tz is None else alike.dt.tz_convert("UTC")
    except (ValueError, TypeError, OverflowError):
        pass
    try:
        # Offsets (even different ones) are converted to UTC; a time without one is read as UTC.
        parsed = pd.to_datetime(column, format="ISO8601", utc=True)
    except (ValueError, TypeError, OverflowError):
        parsed = None
    if parsed is None:
        bad = _first_bad_timestamp(column)
        text = str(column.iloc[bad]) if bad is not None else ""
        hint = " (it looks like a Unix epoch time)" if text.strip().lstrip("-").replace(".", "", 1).isdigit() else ""
        where = f"row {column.index[bad]} has {text!r}{hint}" if bad is not None else "one cannot be read"
        raise TraceError(
            f"trace {source}: timestamps must be ISO-8601 (e.g. 2024-01-01T00:05:00+00:00, an offset below 24h); "
            f"{where}"
        )
    _check_offsets(column, source)
    return parsed


def _first_bad_timestamp(column: pd.Series) -> int | None:
    """Position of the first value that does not read as an ISO-8601 instant, if one alone can be found."""
    parsed = pd.to_datetime(column, format="ISO8601", utc=True, errors="coerce")
    bad = np.flatnonzero(parsed.isna().to_numpy())
    if len(bad):
        return int(bad[0])
    for row, value in enumerate(column):  # every value reads alone, but not all of them together
        try:
            pd.to_datetime(pd.Series([value]), format="ISO8601", utc=True)
        except (ValueError, TypeError, OverflowError):
            return row
    return None


def _check_offsets(column: pd.Series, source: str) -> None:
    """Refuse a trace whose rows mix timestamps with and without an offset, naming the first row of the fewer kind
    (on a tie, of the kind the first row is not) and one row of the other."""
    written = [str(v) for v in column.tolist()]
    with_offset = np.fromiter((_WITH_OFFSET.search(v) is not None for v in written), dtype=bool, count=len(written))
    offsets = int(with_offset.sum())
    if offsets in (0, len(written)):
        return
    without = len(written) - offsets
    odd_has_offset = offsets < without or (offsets == without and not with_offset[0])
    odd = int(np.flatnonzero(with_offset == odd_has_offset)[0])
    usual = int(np.flatnonzero(with_offset != odd_has_offset)[0])
    kind, other = ("an", "none") if odd_has_offset else ("no", "one")
    raise TraceError(
        f"trace {source}: rows mix timestamps with and without a time-zone offset ({offsets:,} with, {without:,} "
        f"without): row {column.index[odd]} has {kind} offset ({written[odd]!r}) where row {column.index[usual]} has "
        f"{other} ({written[usual]!r}); a time without an offset is read as UTC, so such a row would move by the "
        "offset the others carry: give every row an explicit offset (e.g. +00:00 for UTC)"
    )


def check_order(frame: pd.DataFrame, written: pd.Series, source: str) -> None:
    """Each series' timestamps (``frame.ds``, UTC) increase strictly in file order; ``written`` is the column as
    the file has it, for the message. ``frame`` is indexed by file line."""
    lines = frame.index.to_numpy()
    series = frame["unique_id"]
    repeated = frame.duplicated(subset=["unique_id", "ds"], keep="first").to_numpy()
    if repeated.any():
        row = int(np.flatnonzero(repeated)[0])
        uid, when = series.iloc[row], frame["ds"].iloc[row]
        first = int(np.flatnonzero(((series == uid) & (frame["ds"] == when)).to_numpy())[0])
        raise TraceError(
            f"trace {source}: series {uid!r} has a duplicate timestamp: rows {lines[first]} "
            f"({written.iloc[first]!r}) and {lines[row]} ({written.iloc[row]!r}) are both at {when.isoformat()}"
            f"{_more(int(repeated.sum()), 'repeated row(s)')}; its timestamps must increase strictly: keep one row "
            "per series and time"
        )
    grouped = frame.groupby("unique_id", sort=False)
    earlier = (grouped["ds"].diff() < pd.Timedelta(0)).to_numpy()
    if earlier.any():
        row = int(np.flatnonzero(earlier)[0])
        same = np.flatnonzero((series == series.iloc[row]).to_numpy())
        previous = int(same[same < row][-1])
        raise TraceError(
            f"trace {source}: timestamps of series {series.iloc[row]!r} must increase strictly; row {lines[row]} "
            f"({written.iloc[row]!r}) is earlier than row {lines[previous]} ({written.iloc[previous]!r}), the row of "
            f"the series before it{_more(int(earlier.sum()), 'rows earlier than the row of their series before them')}"
            "; sort the file by unique_id, then ds"
        )


def _more(count: int, what: str) -> str:
    return f" ({count:,} {what})" if count > 1 else ""

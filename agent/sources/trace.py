"""Recorded demand traces: reading and checking a long-format CSV, writing one, and replaying it as a
MetricSource.

Besides the demand ``y`` a row may carry ``running`` and ``pending`` (the parts of ``y`` running and queued:
``y = running + pending``) and ``capacity`` (the quota or cluster size it ran under). They are for reference and
are not replayed, but they are checked as ``y`` is: numbers, never negative or infinite, and the parts adding up to
the demand; an empty field is a gap. A column of any other name is not read (a note names it), unless its name
looks like one of these misspelt. Timestamps are read and each series' order checked by
``agent.sources.trace_times``."""

from __future__ import annotations

import csv
import difflib
import gzip
import io
import logging
import re
import zlib
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from agent.sources.trace_times import check_order, timestamps
from models import DemandClass, MetricsUnavailable, TraceError
from models.demand import MAX_DEMAND

log = logging.getLogger(__name__)

REQUIRED = ("unique_id", "ds", "y")
OPTIONAL = ("running", "pending", "capacity")
# A trace becomes a dense steps x series grid of float64; past this many cells it would not fit in memory.
MAX_GRID_CELLS = 50_000_000
MIN_STEP = timedelta(seconds=1)
# What reads as missing in a value or timestamp column (pandas' own defaults). A series name is read as written:
# a class may be called "NA" or "None", and an empty one is refused rather than turned into a series of its own.
MISSING = (
    "",
    "#N/A",
    "#N/A N/A",
    "#NA",
    "-1.#IND",
    "-1.#QNAN",
    "-NaN",
    "-nan",
    "1.#IND",
    "1.#QNAN",
    "<NA>",
    "N/A",
    "NA",
    "NULL",
    "NaN",
    "None",
    "n/a",
    "nan",
    "null",
)


@dataclass(frozen=True)
class Trace:
    """A checked trace as a dense grid: ``values[t, i]`` is series ``series[i]`` at ``index[t]`` (NaN = gap)."""

    path: str
    index: pd.DatetimeIndex
    series: tuple[str, ...]
    values: np.ndarray
    step: timedelta

    def column(self, series_id: str) -> np.ndarray:
        try:
            return self.values[:, self.series.index(series_id)]
        except ValueError:
            known = ", ".join(self.series[:20])
            raise TraceError(f"trace {self.path} has no series {series_id!r} (it has: {known})") from None

    def position(self, when: datetime) -> int:
        """Index of the first step at or after ``when``."""
        return int(self.index.searchsorted(pd.Timestamp(when)))


def read_trace(path: str | Path, series: Collection[str] | None = None, *, series_option: str | None = None) -> Trace:
    """Read a long-format demand CSV (optionally gzipped) and check it; every problem is a ``TraceError``.

    With ``series``, the trace holds those series only, each required in the file, and only they set its step and
    grid: every row is checked, but a series the caller does not use (a probe's two rows a minute apart, say) must
    neither shrink the step of the series it does use, leaving them a gap at most steps, nor be off their grid.
    Without it every series does; ``series_option`` is then the option by which the caller's user names the series
    to read (backtest's ``--series``): a few series that would set a step at which most of the others are mostly
    gaps, or that are off the grid most rows are on, are refused, naming them and that option."""
    source = str(path)
    if Path(path).is_dir():
        raise TraceError(f"trace {source} is a directory; give the trace's CSV file (.csv or .csv.gz)")
    if not Path(path).is_file():
        raise TraceError(f"trace file not found: {source}")
    try:
        data = _raw_bytes(Path(path))
        lines = _FileLines(data)
        frame = pd.read_csv(
            io.BytesIO(data),
            dtype={"unique_id": str},
            keep_default_na=False,
            na_values={c: list(MISSING) for c in ("ds", *REQUIRED[2:], *OPTIONAL)},
            skiprows=lines.leading_blank,
            skip_blank_lines=False,  # kept as rows so that each row's line in the file is known; dropped below
        )
    except (ValueError, OSError, EOFError, UnicodeDecodeError, zlib.error) as exc:
        raise TraceError(f"cannot read trace {source} as CSV (is it complete?): {exc}") from None
    frame = _numbered_rows(frame, lines, source)
    frame = _check_columns(frame, source)
    _check_names(frame, source)
    written = frame["ds"]
    frame["ds"] = timestamps(written, source)
    for column in ("y", *(c for c in OPTIONAL if c in frame.columns)):
        frame[column] = _numbers(frame, column, source)
    _check_parts(frame, source)
    check_order(frame, written, source)
    if series is not None:
        frame = _only(frame, series, source)
    elif series_option is not None:
        _check_odd_series(frame, source, series_option)
    step = _step(frame, source)
    _check_grid(frame, step, source)
    wide = frame.pivot(index="ds", columns="unique_id", values="y")
    full = pd.date_range(wide.index[0], wide.index[-1], freq=step)
    wide = wide.reindex(full)
    return Trace(
        path=source,
        index=pd.DatetimeIndex(full),
        series=tuple(str(c) for c in wide.columns),
        values=wide.to_numpy(dtype=float),
        step=step,
    )


def write_trace(trace: Trace, path: str | Path) -> int:
    """Write ``trace`` as a long-format CSV (gzipped when the name ends in ``.gz``) that ``read_trace`` reads back
    unchanged: one row per series and step, UTC ISO-8601 timestamps, an empty ``y`` for a gap. Returns rows."""
    steps = len(trace.index)
    stamps = trace.index.tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%S+00:00")
    frame = pd.DataFrame(
        {
            "unique_id": np.repeat(np.array(trace.series, dtype=object), steps),
            "ds": np.tile(np.asarray(stamps, dtype=object), len(trace.series)),
            "y": trace.values.T.reshape(-1),
        }
    )
    try:
        frame.to_csv(path, index=False, float_format="%.10g")
    except OSError as exc:
        raise TraceError(f"cannot write trace {path}: {exc}") from None
    return len(frame)


def _raw_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped when its name ends in ``.gz``."""
    if path.suffix == ".gz":
        with gzip.open(path, "rb") as handle:
            return handle.read()
    return path.read_bytes()


class _FileLines:
    """The lines of a trace file, found by their newlines (8 bytes per line, not a copy of the text)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n"))
        self.starts = np.concatenate(([0], newlines + 1))
        self.ends = np.append(newlines, len(data))
        if self.starts[-1] == len(data):  # the file ends with a newline: no line after it
            self.starts, self.ends = self.starts[:-1], self.ends[:-1]
        self.leading_blank = 0
        while self.leading_blank < len(self.starts) and not self.text(self.leading_blank + 1).strip():
            self.leading_blank += 1

    def __len__(self) -> int:
        return len(self.starts)

    def text(self, line: int) -> str:
        """Line ``line`` (from 1) without its line ending."""
        raw = self.data[int(self.starts[line - 1]) : int(self.ends[line - 1])].rstrip(b"\r")
        return raw.decode("utf-8-sig" if line == 1 else "utf-8", errors="replace")


def _numbered_rows(frame: pd.DataFrame, lines: _FileLines, source: str) -> pd.DataFrame:
    """The rows indexed by their line in the file, blank lines left out. A row with fewer fields than the header
    is refused naming its line: pandas fills the fields it lacks as empty, which made a row cut short a gap."""
    numbers, fields, blank = _layout(frame, lines, source)
    columns = len(frame.columns)
    short = np.flatnonzero(~blank & (fields < columns))
    if len(short):
        row = int(short[0])
        lacking = ", ".join(str(c) for c in frame.columns[int(fields[row]) :])
        more = f" ({len(short)} such row(s))" if len(short) > 1 else ""
        raise TraceError(
            f"trace {source}: row {int(numbers[row])} has {int(fields[row])} field(s) where the header has "
            f"{columns}: it lacks {lacking}{more}; write every field, an empty one for a gap"
        )
    kept = frame.loc[~blank].copy()
    kept.index = pd.Index(numbers[~blank], name="line")
    return kept


def _layout(frame: pd.DataFrame, lines: _FileLines, source: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``frame``: its line in the file, how many fields it has and whether it is blank. When each row
    is one line, only the rows whose last field reads empty can be short, and those alone are read again."""
    rows, header = len(frame), lines.leading_blank + 1
    if len(lines) == header + rows:
        numbers = np.arange(header + 1, header + rows + 1)
        fields = np.full(rows, len(frame.columns))
        blank = np.zeros(rows, dtype=bool)
        last = frame[frame.columns[-1]]
        for row in np.flatnonzero((last.isna() | (last.astype(str) == "")).to_numpy()):
            text = lines.text(int(numbers[row]))
            blank[row] = not text.strip()
            fields[row] = len(next(csv.reader([text]), []))
        return numbers, fields, blank
    # A quoted field runs over several lines (or lines end in a bare \r): number the records as csv reads them.
    reader = csv.reader(io.StringIO(lines.data.decode("utf-8-sig", errors="replace"), newline=""))
    starts: list[int] = []
    counts: list[int] = []
    line = 1
    for record in reader:
        if starts or any(f.strip() for f in record):  # blank lines before the header are not rows
            starts.append(line)
            counts.append(0 if not any(f.strip() for f in record) and len(record) < 2 else len(record))
        line = reader.line_num + 1
    if len(starts) != rows + 1:
        raise TraceError(f"trace {source}: its {rows} rows cannot be matched to the file's {len(starts) - 1} records")
    counts_array = np.array(counts[1:], dtype=int)
    return np.array(starts[1:], dtype=int), counts_array, counts_array == 0


def _check_columns(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """The frame with only the columns a trace has read. A column of another name is left out with a note naming
    it (a file shared with other tools may carry more, request rates or token counts) and, where its name looks
    like one of those, that one; a name that is one of those misspelt (``_lookalike``) is refused, since a column
    meant to be read would then be dropped unread."""
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        found = [str(c) for c in frame.columns]
        raise TraceError(
            f"trace {source} lacks column(s) {missing}; found: {found!r}; expected {list(REQUIRED)} "
            f"(+ {list(OPTIONAL)}){_header_hint(found)}"
        )
    unknown = [str(c) for c in frame.columns if c not in REQUIRED + OPTIONAL]
    alike = {c: like for c in unknown if (like := _lookalike(c)) is not None}
    misspelt = {c: known for c, (known, is_misspelt) in alike.items() if is_misspelt}
    if misspelt:
        shown = ", ".join(f"{c!r} (meant {known!r}?)" for c, known in misspelt.items())
        raise TraceError(
            f"trace {source} has column(s) {shown} that look like a misspelt column of a trace; rename or drop "
            f"{'it' if len(misspelt) == 1 else 'them'} (a trace reads {list(REQUIRED + OPTIONAL)})"
        )
    if unknown:
        near = "".join(f"; {c!r} looks like {known!r}" for c, (known, _) in alike.items())
        log.warning(
            "trace %s: column(s) %s are not read (a trace reads %s, and %s where given)%s",
            source,
            unknown,
            ", ".join(REQUIRED),
            ", ".join(OPTIONAL),
            f"{near}: rename {'it' if len(alike) == 1 else 'them'} if meant to be read" if near else "",
            extra={"trace": source, "columns_not_read": unknown},
        )
        frame = frame.drop(columns=unknown)
    if frame.empty:
        raise TraceError(f"trace {source} has no rows")
    return frame


# How alike (``difflib``'s ratio) an unknown column's name must be to a known one for the note to name that one:
# 'spending' (0.93 to 'pending') or 'capacity_gpu' (0.8 to 'capacity') is, 'rate_rps' (0.25 at most) or
# 'mean_input_tokens' (0.33) is not.
_ALIKE_RATIO = 0.8
# Names shorter than this ('y', 'ds') are not taken for one another a letter off: 'dsl' or 'id' may well be columns
# of their own.
_MISSPELT_MIN_LENGTH = 5


def _lookalike(name: str) -> tuple[str, bool] | None:
    """The known column ``name`` looks like, and whether it is that column misspelt, or None. Misspelt (refused:
    a column meant to be read would be dropped unread) is the name in another case, with spaces or underscores
    around or inside it, or, for a name of five letters or more, one letter off inside it, the first and last kept
    (one dropped, added, changed, or two swapped: 'runing', 'capcity'). A name that adds a letter at either end
    ('spending', 'capacity2', 'unique_ids'), or merely looks alike ('opening', 'capacity_gpu'), is a column of its
    own: only named in the note."""
    plain = _compact(name)
    for known in REQUIRED + OPTIONAL:
        target = _compact(known)
        if plain == target or (len(target) >= _MISSPELT_MIN_LENGTH and _one_letter_inside(plain, target)):
            return known, True
    close = difflib.get_close_matches(name.strip().lower(), REQUIRED + OPTIONAL, n=1, cutoff=_ALIKE_RATIO)
    return (close[0], False) if close else None


def _compact(name: str) -> str:
    return re.sub(r"[\s_]+", "", name).lower()


def _one_letter_inside(name: str, known: str) -> bool:
    """Whether ``name`` is ``known`` with one letter dropped, added, changed, or two adjacent ones swapped, its
    first and last letters kept."""
    if not name or name[0] != known[0] or name[-1] != known[-1]:
        return False
    if len(name) == len(known):
        off = [i for i, (a, b) in enumerate(zip(name, known, strict=True)) if a != b]
        swapped = (
            len(off) == 2 and off[1] == off[0] + 1 and name[off[0]] == known[off[1]] and name[off[1]] == known[off[0]]
        )
        return len(off) == 1 or swapped
    longer, shorter = (name, known) if len(name) > len(known) else (known, name)
    if len(longer) != len(shorter) + 1:
        return False
    return any(longer[:i] + longer[i + 1 :] == shorter for i in range(len(longer)))


def _header_hint(found: list[str]) -> str:
    """What is likely wrong with a header that lacks required columns: spaces around its names, or fields
    separated by something other than a comma."""
    if any(c in REQUIRED and c not in found for c in (name.strip() for name in found)):
        return "; the names have spaces around them (after the commas?): write the header as unique_id,ds,y"
    for mark, name in ((";", "semicolons"), ("\t", "tabs")):
        if any(mark in c for c in found):
            return (
                f"; the header is separated by {name}: the trace is comma-separated, numbers with a decimal point "
                "(unique_id,ds,y)"
            )
    return ""


def _check_names(frame: pd.DataFrame, source: str) -> None:
    names = frame["unique_id"].astype(str).str.strip()
    empty = np.flatnonzero((names == "").to_numpy())
    if len(empty):
        row = int(empty[0])
        raise TraceError(
            f"trace {source}: row {frame.index[row]} has an empty unique_id ({len(empty)} such row(s)); every row "
            "names its series"
        )


def _numbers(frame: pd.DataFrame, column: str, source: str) -> pd.Series:
    """``column`` as floats (NaN for a gap); text that is not a number, a negative, an infinite or an absurdly large
    value is refused naming its line. The optional columns count accelerators as ``y`` does."""
    values = pd.to_numeric(frame[column], errors="coerce")
    bad = frame[column].notna() & values.isna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise TraceError(
            f"trace {source}: column {column} must be numeric; row {frame.index[row]} has {frame[column].iloc[row]!r}"
        )
    numbers = values.to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        suspect = np.flatnonzero(np.isinf(numbers) | (numbers < 0) | (numbers > MAX_DEMAND))
    if len(suspect):
        row = int(suspect[0])
        value = float(numbers[row])
        rule = "must not be negative" if value < 0 else f"must be finite and at most {MAX_DEMAND:g} accelerators"
        what = "demand y" if column == "y" else f"column {column}"
        raise TraceError(f"trace {source}: {what} {rule}; row {frame.index[row]} has {value:g}")
    return values.astype(float)


# How far running + pending may be from y: what a value written with 10 significant digits (``write_trace``'s
# float format) can lose, with room to spare.
_PARTS_TOLERANCE = 1e-6


def _check_parts(frame: pd.DataFrame, source: str) -> None:
    """``running`` and ``pending`` are the parts of the demand ``y``: together they make it, and either alone is at
    most it. Rows where a value is a gap are not compared."""
    parts = [c for c in ("running", "pending") if c in frame.columns]
    if not parts:
        return
    y = frame["y"].to_numpy(dtype=float)
    given = frame[parts].to_numpy(dtype=float)
    slack = _PARTS_TOLERANCE * np.maximum(1.0, np.abs(y))
    with np.errstate(invalid="ignore"):
        if len(parts) == 2:
            total = given.sum(axis=1)
            off = np.flatnonzero(np.abs(total - y) > slack)
            rule = "running + pending must equal the demand y (the accelerators running and queued)"
        else:
            total = given[:, 0]
            off = np.flatnonzero(total - y > slack)
            rule = f"{parts[0]} must not exceed the demand y (it is part of it)"
    if len(off):
        row = int(off[0])
        shown = ", ".join(f"{c} {given[row, i]:g}" for i, c in enumerate(parts))
        more = f" ({len(off)} such row(s))" if len(off) > 1 else ""
        raise TraceError(f"trace {source}: {rule}; row {frame.index[row]} has {shown} and y {y[row]:g}{more}")


def _only(frame: pd.DataFrame, series: Collection[str], source: str) -> pd.DataFrame:
    """The rows of ``series``, each of which the file must have."""
    names = frame["unique_id"]
    missing = sorted(set(series) - set(names.unique()))
    if missing:
        known = list(dict.fromkeys(names.tolist()))
        more = f" and {len(known) - 20} more" if len(known) > 20 else ""
        raise TraceError(f"trace {source} has no series {missing}; it has {known[:20]}{more}")
    return frame.loc[names.isin(set(series)).to_numpy()]


def _step(frame: pd.DataFrame, source: str) -> timedelta:
    """The trace's step: the smallest of the series' most common spacings (the smallest of them on a tie), so a
    few odd rows or gaps change neither the step nor the grid, even in a short series."""
    steps = [_most_common_spacing(s) for _, s in _series_stamps(frame) if len(s) >= 2]
    if not steps:
        raise TraceError(f"trace {source} has no series with two timestamps; a step cannot be inferred")
    step = pd.Timedelta(min(steps), unit="ns").to_pytimedelta()
    if step < MIN_STEP:
        raise TraceError(f"trace {source}: the step is {step.total_seconds():g} s; it must be at least 1 s")
    return step


def _check_odd_series(frame: pd.DataFrame, source: str, option: str) -> None:
    """Refuse the few series that would make the trace of every series one at which most of them are gaps or off
    the grid: those whose spacing, finer than the others', would set the step while the series at another spacing
    are most of them (by count or by rows), and those off the grid the most rows are on, while they are fewer rows
    than the rest. Read with the others only, neither happens; without this, a probe's two rows a minute apart made
    every 5-minute series a gap at 4 steps of 5, every score blank."""
    stamps = {str(uid): s for uid, s in _series_stamps(frame)}
    rows = {uid: len(s) for uid, s in stamps.items()}
    spacing = {uid: _most_common_spacing(s) for uid, s in stamps.items() if len(s) >= 2}
    if not spacing:
        return
    step = min(spacing.values())
    setting = [uid for uid, ns in spacing.items() if ns == step]
    others = [uid for uid, ns in spacing.items() if ns != step]
    if others and (len(setting) < len(others) or _rows(setting, rows) < _rows(others, rows)):
        spacings = " or ".join(_seconds(ns) for ns in sorted({spacing[u] for u in others}))
        raise TraceError(
            f"trace {source}: series {_few(setting)} ({_share(setting, rows)}) {_verb(setting, 'sets', 'set')} the "
            f"trace's step to {_seconds(step)}, at which the other {len(others)} series, a row every {spacings}, "
            f"would be mostly gaps or off the grid; {_leave_out(option, setting, others)}"
        )
    phases = {uid: frozenset((s % step).tolist()) for uid, s in stamps.items()}
    on: Counter[int] = Counter()
    for uid, phase in phases.items():
        if len(phase) == 1:
            on[next(iter(phase))] += rows[uid]
    if not on:
        return
    grid = frozenset({on.most_common(1)[0][0]})
    off = [uid for uid, phase in phases.items() if phase != grid]
    kept = [uid for uid in rows if uid not in off]
    if off and _rows(off, rows) < _rows(kept, rows):
        first = pd.Timestamp(min(int(stamps[uid][0]) for uid in kept), tz="UTC")
        raise TraceError(
            f"trace {source}: series {_few(off)} ({_share(off, rows)}) {_verb(off, 'is', 'are')} off the grid of "
            f"{_seconds(step)} the other series are on (from {first.isoformat()}); "
            f"{_leave_out(option, off, kept)}, or align every series to the same grid"
        )


def _leave_out(option: str, odd: Sequence[str], others: Sequence[str]) -> str:
    return (
        f"give {option} with the series to read, leaving {'it' if len(odd) == 1 else 'them'} out (e.g. the other "
        f"series: {_few(others)})"
    )


def _rows(names: Sequence[str], rows: dict[str, int]) -> int:
    return sum(rows[n] for n in names)


def _verb(names: Sequence[str], one: str, more: str) -> str:
    return one if len(names) == 1 else more


def _few(names: Sequence[str], shown: int = 3) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(repr(n) for n in names[:shown]) + more


def _share(names: Sequence[str], rows: dict[str, int]) -> str:
    return f"{_rows(names, rows):,} of the trace's {sum(rows.values()):,} rows"


def _seconds(ns: int) -> str:
    return f"{ns / 1e9:g} s"


def _most_common_spacing(stamps: np.ndarray) -> int:
    spacings, counts = np.unique(np.diff(stamps), return_counts=True)
    return int(spacings[int(np.argmax(counts))])


def _check_grid(frame: pd.DataFrame, step: timedelta, source: str) -> None:
    """Every row on one grid of ``step`` from the first timestamp, and a grid small enough to hold in memory."""
    step_ns = int(pd.Timedelta(step).value)
    origin = int(frame["ds"].min().value)
    for uid, stamps in _series_stamps(frame):
        off = np.flatnonzero((stamps - origin) % step_ns != 0)
        if len(off):
            rows = frame.index[frame["unique_id"] == uid][off]
            shown = ", ".join(str(int(r)) for r in rows[:5]) + (" ..." if len(rows) > 5 else "")
            raise TraceError(
                f"trace {source}: series {uid!r} has {len(rows)} row(s) off the trace's regular grid of "
                f"{step.total_seconds():g} s from {frame['ds'].min().isoformat()} (rows {shown}, first at "
                f"{frame['ds'].loc[int(rows[0])].isoformat()}); align every series to the same grid"
            )
    steps = (int(frame["ds"].max().value) - origin) // step_ns + 1
    cells = steps * int(frame["unique_id"].nunique())
    if cells > MAX_GRID_CELLS:
        raise TraceError(
            f"trace {source}: {steps:,} steps of {step.total_seconds():g} s x {frame['unique_id'].nunique()} series "
            f"is {cells:,} cells, above the limit of {MAX_GRID_CELLS:,}; use a coarser step or a shorter trace"
        )


def _series_stamps(frame: pd.DataFrame) -> list[tuple[object, np.ndarray]]:
    """Each series' timestamps as int64 nanoseconds, in file order."""
    return [
        (uid, pd.DatetimeIndex(group["ds"]).as_unit("ns").asi8) for uid, group in frame.groupby("unique_id", sort=False)
    ]


class TraceSource:
    """Replays a trace as a MetricSource. Steps outside the trace are missing, never zero."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace

    def fetch(self, classes: Sequence[DemandClass], start: datetime, end: datetime, step: timedelta) -> pd.DataFrame:
        if step != self.trace.step:
            raise MetricsUnavailable("*", f"trace step is {self.trace.step}, asked for {step}")
        lo, hi = self.trace.position(start), self.trace.position(end)
        stamps = self.trace.index[lo:hi]
        columns = [self.trace.column(c.series_id)[lo:hi] for c in classes]
        names = np.repeat(np.array([c.name for c in classes], dtype=object), len(stamps))
        return pd.DataFrame(
            {
                "unique_id": names,
                "ds": pd.DatetimeIndex(np.tile(stamps.as_unit("ns").asi8, len(classes)), tz="UTC"),
                "y": np.concatenate(columns) if columns else np.empty(0),
            }
        )

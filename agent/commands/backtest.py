"""``leadtime backtest``: score forecasters by rolling-origin backtest on a recorded trace, write JSON.

Each model is refitted at every origin on the history before it and asked for quantiles over the horizons; the
JSON has ``models.<name>.{family, mase, pinball, coverage, fit_seconds, predict_seconds}`` averaged over series,
``pinball_weighted`` (level-weighted over series) and ``ratio_median`` (median per-series ratio to ``naive``),
keys as written on the command line, a per-series table under ``series``, and under ``trace`` its path and the
credit a bundled trace requires (``attribution``, printed under the table too). Under the printed table, each model
whose forecasts another model made (``models_used``: a fallback) is named with that model, in how many forecast rows
and why, and ``auto`` with the models it selected: a model that fell back scores as its fallback does.
"""

from __future__ import annotations

import argparse
import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, Self

import numpy as np
import pandas as pd

from agent.simulation.results import trace_attribution
from agent.sources import read_trace
from agent.strict_json import write_json
from config.durations import parse_duration
from forecasting.backtest import BacktestResult, BacktestSpec, Grid, run_backtest
from forecasting.base import Forecaster
from forecasting.calibrated import CALIBRATION_HORIZON
from forecasting.calibration import MIN_RESIDUALS
from forecasting.registry import FAMILIES, build
from models import BacktestInputError
from models.durations import format_duration

DEFAULT_MODELS = "naive,seasonal_naive,ets,stl,lightgbm,auto"
UNCALIBRATED = ("persistence", "last-value")  # forecast with no calibration: a step of history is enough


def register(sub: Any) -> None:
    parser = sub.add_parser("backtest", help="score forecasters on a recorded demand trace")
    parser.add_argument("--trace", required=True, help="long-format demand CSV (unique_id, ds, y), may be gzipped")
    parser.add_argument("--start", required=True, help="first origin, ISO-8601 (naive means UTC)")
    parser.add_argument("--end", help="origins stop before this time (default: the end of the trace)")
    parser.add_argument("--horizons", default="15m,30m,60m", help="comma-separated lead times (default 15m,30m,60m)")
    parser.add_argument("--quantiles", default="0.5,0.9", help="comma-separated quantile levels (default 0.5,0.9)")
    parser.add_argument("--models", default=DEFAULT_MODELS, help=f"comma-separated, from: {', '.join(FAMILIES)}")
    parser.add_argument("--every", default="1h", help="time between origins (default 1h)")
    parser.add_argument("--history", default="7d", help="history each fit sees (default 7d)")
    parser.add_argument("--series", help="comma-separated series to keep (default: all)")
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    out = _writable(Path(args.out))
    # with --series, those series alone set the trace's step and grid: another one in the file is not read; without
    # it, a few series that would set a step most others are gaps at, or are off their grid, are refused, naming it
    trace = read_trace(
        args.trace, series=_split(args.series, "series") if args.series else None, series_option="--series"
    )
    keep = _names(args.series, trace.series, "series") if args.series else list(trace.series)
    _once("series", [(name, name) for name in keep])
    columns = [trace.series.index(s) for s in keep]
    grid = Grid(trace.index, tuple(keep), trace.values[:, columns], trace.step)
    quantiles = tuple((label, _quantile(label)) for label in _split(args.quantiles, "quantiles"))
    horizons = tuple((label, _duration(label, "--horizons")) for label in _split(args.horizons, "horizons"))
    _once("quantiles", quantiles)
    _once("horizons", horizons)
    spec = BacktestSpec(
        start=_time(args.start, "--start"),
        end=_time(args.end, "--end") if args.end else trace.index[-1] + trace.step,
        horizons=horizons,
        quantiles=quantiles,
        origin_every=_duration(args.every, "--every"),
        history=_duration(args.history, "--history"),
    )
    last = trace.index[-1]
    if not args.end and spec.start > last:
        raise BacktestInputError(
            f"--start {spec.start.isoformat()} is after the trace ends ({last.isoformat()}); the trace runs from "
            f"{trace.index[0].isoformat()}"
        )
    if spec.end <= spec.start:
        raise BacktestInputError(f"--end {spec.end.isoformat()} must come after --start {spec.start.isoformat()}")
    beyond = [label for label, ahead in spec.horizons if spec.start + ahead > last]
    if beyond:
        raise BacktestInputError(
            f"--horizons {','.join(beyond)}: no origin from --start {spec.start.isoformat()} has its target within "
            f"the trace (it ends {last.isoformat()}); choose shorter horizons or an earlier --start"
        )
    _require_data(grid, spec)
    names = _names(args.models, FAMILIES, "models")
    _once("models", [(name, name) for name in names])
    levels = tuple(q for _, q in quantiles)
    furthest = max(ahead for _, ahead in spec.horizons)  # calibrated that far ahead, not only the first hour
    _check_history(args.history, spec.history, trace.step, furthest, names)
    noted = {name: _Noted(name) for name in names}
    factories = {
        name: (lambda n=name: noted[n].wrap(build(n, quantiles=tuple(sorted({0.5, *levels})), horizon=furthest)))
        for name in names
    }

    def bar(origins: Iterable[int]) -> Iterable[int]:
        from tqdm import tqdm

        return tqdm(origins, desc="backtest origins", unit="origin")

    result = run_backtest(grid, factories, spec, progress=bar, families=FAMILIES)
    result["trace"]["path"] = args.trace
    credit = trace_attribution(args.trace)
    result["trace"]["attribution"] = credit  # the credit a bundled trace requires; None otherwise
    write_json(out, result)
    print(_table(result, quantiles[-1][0], [h for h, _ in spec.horizons]))
    for line in _fallbacks(result, {name: n.reasons for name, n in noted.items()}):
        print(line)
    if credit is not None:
        print(credit)
    print(f"wrote {args.out}")
    return 0


class _Noted:
    """A model as the backtest runs it, keeping why its rows were made by another model: a forecaster that falls
    back names the model that made each row and says why in its note (``forecasting.base``), and the scores alone
    cannot tell a model that fell back from one that forecast as well as its fallback."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.reasons: Counter[tuple[str, str]] = Counter()  # (model that made the rows, note) -> forecast rows
        self.model: Forecaster | None = None

    def wrap(self, model: Forecaster) -> _Noted:
        self.model = model
        return self

    @property
    def min_history_steps(self) -> int:
        assert self.model is not None
        return self.model.min_history_steps

    def fit(self, history: pd.DataFrame, step: timedelta) -> Self:
        assert self.model is not None
        self.model.fit(history, step)
        return self

    def predict(self, recent: pd.DataFrame, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        assert self.model is not None
        forecast = self.model.predict(recent, horizon, quantiles)
        if FAMILIES.get(self.name) != "auto":  # auto's rows name the model it selected: no fallback
            other = forecast[forecast["model"] != self.name]
            self.reasons.update(zip(other["model"].astype(str), other["note"].astype(str), strict=True))
        return forecast


def _fallbacks(result: BacktestResult, reasons: Mapping[str, Counter[tuple[str, str]]]) -> list[str]:
    """Per model whose forecasts another model made (``models_used``), in how many forecast rows (one per series,
    origin and step ahead) and why, so a row equal to its fallback's does not read as a model no better than it;
    for ``auto``, the models it selected."""
    lines = []
    for name, scores in result["models"].items():
        used = scores["models_used"]
        total = sum(used.values())
        if FAMILIES.get(name) == "auto":
            picks = ", ".join(f"{model} in {count} of {total}" for model, count in used.items())
            lines.append(f"{name} selected {picks} forecast rows")
            continue
        for model, count in used.items():
            if model == name:
                continue
            why = Counter({note: n for (made_by, note), n in reasons.get(name, Counter()).items() if made_by == model})
            line = f"{name} fell back to {model} in {count} of {total} forecast rows"
            if why:
                (note, times), *others = why.most_common()
                line += f": {note.removeprefix(f'{name}: ') or 'no reason given'}"
                if others:
                    line += f" (in {times} of them; {len(others)} other reason(s) in the rest)"
            lines.append(line)
    return ([""] if lines else []) + lines


def _writable(out: Path) -> Path:
    """Checked before any work is done: a run of many minutes must not end on a path it cannot write."""
    if out.is_dir():
        raise BacktestInputError(f"--out {out} is a directory: give a file name, e.g. {out / 'backtest.json'}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BacktestInputError(f"--out {out}: cannot create its directory: {exc.strerror}") from None
    if not os.access(out.parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise BacktestInputError(f"--out {out}: not writable")
    return out


def calibration_history(step: timedelta, furthest: timedelta) -> timedelta:
    """The history a calibrated model (every one but ``UNCALIBRATED``) needs at ``step`` to forecast ``furthest``
    ahead with a band: ``MIN_RESIDUALS`` errors of forecasts as far ahead as it is calibrated (``furthest``, at
    least ``CALIBRATION_HORIZON``), in whole steps: 7h at a 15m step up to an hour ahead."""
    ahead = max(1, -(-max(furthest, CALIBRATION_HORIZON) // step))
    return (MIN_RESIDUALS + ahead) * step


def _check_history(label: str, history: timedelta, step: timedelta, furthest: timedelta, names: list[str]) -> None:
    """Refuse a ``--history`` too short for the models asked for to be calibrated at the trace's step: each fit
    would see too little to calibrate, at every origin, and every forecast of theirs would be the bare last value
    (``persistence``), scored under their names."""
    needed = calibration_history(step, furthest)
    calibrated = [name for name in names if name not in UNCALIBRATED]
    if history >= needed or not calibrated:
        return
    raise BacktestInputError(
        f"--history {label} is too short for {', '.join(calibrated)} at the trace's step "
        f"{format_duration(step)}: their calibration takes {format_duration(needed)} ({MIN_RESIDUALS} errors of "
        f"forecasts {format_duration(max(furthest, CALIBRATION_HORIZON))} ahead, the longest of --horizons and "
        f"{format_duration(CALIBRATION_HORIZON)}); shorter, every forecast of theirs is the bare last value. Give "
        f"--history {format_duration(needed)} or more (the default is 7d; a number without a unit is seconds), or "
        f"score only {' and '.join(UNCALIBRATED)}"
    )


def _split(text: str, what: str) -> list[str]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise BacktestInputError(f"--{what} is empty")
    return parts


def _once(what: str, items: Iterable[tuple[str, object]]) -> None:
    """Each value listed once: a repeated one (``0.5,0.5``, or ``15m,900s`` for the same horizon) is refused,
    naming the entries that repeat it."""
    seen: dict[object, str] = {}
    for label, value in items:
        if value in seen:
            twice = label if label == seen[value] else f"one value ({seen[value]} and {label})"
            raise BacktestInputError(f"--{what} lists {twice} twice; list each once")
        seen[value] = label


def _names(text: str, known: Iterable[str], what: str) -> list[str]:
    allowed = list(known)
    names = _split(text, what)
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise BacktestInputError(f"unknown {what} {unknown}; known: {', '.join(allowed[:30])}")
    return names


def _quantile(label: str) -> float:
    try:
        value = float(label)
    except ValueError:
        raise BacktestInputError(f"--quantiles: {label!r} is not a number; write e.g. 0.5,0.9") from None
    if not 0.0 < value < 1.0:
        raise BacktestInputError(f"--quantiles: {label} must be strictly between 0 and 1")
    return value


def _duration(label: str, flag: str) -> timedelta:
    try:
        value = parse_duration(label)
    except ValueError as exc:
        raise BacktestInputError(f"{flag}: {exc}") from None
    if value <= timedelta(0):
        raise BacktestInputError(f"{flag}: {label} must be longer than zero")
    return value


def _time(text: str, flag: str) -> pd.Timestamp:
    try:
        stamp = pd.Timestamp(text)
    except ValueError:
        raise BacktestInputError(f"{flag}: cannot read {text!r} as an ISO-8601 time") from None
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def _table(result: BacktestResult, q_label: str, horizons: list[str]) -> str:
    """Per-series pinball loss at the highest quantile, averaged over the horizons, one column per model."""
    names = list(result["models"])
    lines = [
        f"pinball@{q_label} / mean level, averaged over {','.join(horizons)}",
        "series".ljust(24) + "".join(n[:14].rjust(15) for n in names),
    ]
    for uid, by_model in result["series"].items():
        cells = []
        for name in names:
            values = [by_model[name].get(f"pinball_{q_label}_{h}") for h in horizons]
            finite = [v for v in values if v is not None and math.isfinite(v)]
            cells.append(f"{sum(finite) / len(finite):.4f}".rjust(15) if finite else "-".rjust(15))
        lines.append(uid[:24].ljust(24) + "".join(cells))
    summary = []
    for name in names:
        values = [result["models"][name]["pinball"][q_label][h] for h in horizons]
        finite = [v for v in values if v is not None]
        summary.append(f"{sum(finite) / len(finite):.4f}".rjust(15) if finite else "-".rjust(15))
    lines.append("mean".ljust(24) + "".join(summary))
    lines.extend(_aggregates(result, q_label, horizons))
    return "\n".join(lines)


def _aggregates(result: BacktestResult, q_label: str, horizons: list[str]) -> list[str]:
    """Per model and horizon: the level-weighted pinball loss, its ratio to ``naive``, the median per-series ratio."""
    models = result["models"]
    naive = models.get("naive")
    bar = naive["pinball_weighted"].get(q_label, {}) if naive else {}
    lines = [
        "",
        f"pinball@{q_label} level-weighted (sum of losses / sum of mean levels); ratios against naive",
        "model".ljust(24)
        + "".join(f"weighted {h}".rjust(15) for h in horizons)
        + "".join(f"x naive {h}".rjust(13) for h in horizons)
        + "".join(f"median x {h}".rjust(13) for h in horizons),
    ]
    for name, scores in models.items():
        weighted = scores["pinball_weighted"][q_label]
        medians = (scores["ratio_median"] or {}).get(q_label, {})
        cells = [_cell(weighted[h], 15, ".5f") for h in horizons]
        cells += [_cell(_over(weighted[h], bar.get(h)), 13, ".3f") for h in horizons]
        cells += [_cell(medians.get(h), 13, ".3f") for h in horizons]
        lines.append(name[:24].ljust(24) + "".join(cells))
    return lines


def _over(value: float | None, base: float | None) -> float | None:
    """``value`` as a ratio to ``base``; None when either is missing or ``base`` is zero."""
    return value / base if value is not None and base else None


def _cell(value: float | None, width: int, fmt: str) -> str:
    return (format(value, fmt) if value is not None and math.isfinite(value) else "-").rjust(width)


def _require_data(grid: Grid, spec: BacktestSpec) -> None:
    """A window without a single observed value has nothing to score: say so instead of writing empty scores."""
    lo, hi = grid.index.searchsorted(spec.start), grid.index.searchsorted(spec.end)
    if lo < hi and not np.isfinite(grid.values[lo:hi]).any():  # outside the trace: "no origin" says more
        raise BacktestInputError(
            f"no observed demand in the window {spec.start.isoformat()} .. {spec.end.isoformat()} of the trace "
            f"({grid.index[0].isoformat()} .. {grid.index[-1].isoformat()}); choose --start/--end where it has data"
        )

"""The rolling-origin backtest engine: every model refitted and asked for quantiles at each origin.

At each origin (default hourly) in [start, end) a model is fitted on the history before the origin (up to
``history`` long) and predicts from the newest ``min_history_steps`` steps; it never sees the origin or anything
after it. Scores per series and model: MASE of the median at each horizon (scaled by the one-step naive error of
the history before ``start``), pinball loss at each quantile and horizon divided by the series' mean level over
the evaluated window, and coverage of each quantile over the listed horizons, averaged over series.

Two aggregates a per-series mean cannot be skewed by (one tiny series with a huge relative loss dominates that
mean): ``pinball_weighted``, the level-weighted loss (the sum over series of each one's mean pinball loss in
demand units, divided by the sum of their mean levels, over the series scored at that quantile and horizon), and
``ratio_median``, the median over series of the model's pinball loss divided by the baseline's (``naive``, the
calibrated last value), on the same points; absent when the baseline was not run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import NotRequired, TypedDict

import numpy as np
import pandas as pd

from forecasting.base import Forecaster, quantile_column
from forecasting.calibration import pinball
from models import ForecastError


@dataclass(frozen=True)
class BacktestSpec:
    """What to evaluate. ``horizons`` and ``quantiles`` pair the label written on the command line with its value."""

    start: pd.Timestamp
    end: pd.Timestamp
    horizons: tuple[tuple[str, timedelta], ...]
    quantiles: tuple[tuple[str, float], ...]
    origin_every: timedelta = timedelta(hours=1)
    history: timedelta = timedelta(days=7)


class TraceSummary(TypedDict):
    """The window asked for (origins in [start, end), ISO-8601), how many origins and series, the trace step."""

    start: str
    end: str
    origins: int
    series: int
    step_seconds: float
    path: NotRequired[str]  # the trace file: set by ``leadtime backtest``, which reads it (the engine gets a grid)
    attribution: NotRequired[str | None]  # the credit a bundled trace requires (``leadtime backtest``); None for others


# Keyed by quantile label, then horizon label, as written in ``BacktestSpec``; None where nothing was scored.
ByQuantileAndHorizon = dict[str, dict[str, float | None]]


class ModelScores(TypedDict):
    """One model's scores averaged over series (None where no series had a score), in the order written."""

    mase: dict[str, float | None]  # by horizon label
    pinball: ByQuantileAndHorizon
    pinball_weighted: ByQuantileAndHorizon
    coverage: dict[str, float | None]  # by quantile label
    fit_seconds: float
    predict_seconds: float
    models_used: dict[str, int]  # forecast rows by the model that made them (``auto`` picks one per series)
    ratio_median: ByQuantileAndHorizon | None  # None when the baseline was not run
    family: str


# One series' scores for one model: ``pinball_<quantile>_<horizon>`` and ``coverage_<quantile>``; NaN where none.
SeriesScores = dict[str, float]


class BacktestResult(TypedDict):
    """What ``run_backtest`` returns, and ``leadtime backtest`` writes as JSON (NaN written as null)."""

    trace: TraceSummary
    models: dict[str, ModelScores]  # by model name
    series: dict[str, dict[str, SeriesScores]]  # by series, then model name


@dataclass
class _Collected:
    forecasts: dict[tuple[str, float], list[float]] = field(default_factory=dict)  # (horizon label, level)
    actuals: dict[str, list[float]] = field(default_factory=dict)
    fit_seconds: list[float] = field(default_factory=list)
    predict_seconds: list[float] = field(default_factory=list)
    models: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Grid:
    """A trace as a dense matrix: ``values[t, i]`` is series ``series[i]`` at ``index[t]``; NaN is a gap."""

    index: pd.DatetimeIndex
    series: tuple[str, ...]
    values: np.ndarray
    step: timedelta


def run_backtest(
    grid: Grid,
    models: Mapping[str, Callable[[], Forecaster]],
    spec: BacktestSpec,
    progress: Callable[[Iterable[int]], Iterable[int]] = lambda it: it,
    families: Mapping[str, str] | None = None,
    baseline: str = "naive",
) -> BacktestResult:
    """Scores of every model, averaged over series (``models``) and per series (``series``)."""
    step_ns = round(grid.step.total_seconds() * 1e9)
    steps = {label: _steps(h, grid.step, label) for label, h in spec.horizons}
    levels = tuple(sorted({0.5, *(q for _, q in spec.quantiles)}))
    max_h = max(steps.values())
    first = int(grid.index.searchsorted(spec.start))
    last = int(grid.index.searchsorted(spec.end))
    every = max(1, round(spec.origin_every / grid.step))
    origins = list(range(max(first, 1), last, every))
    if not origins:
        raise ForecastError(f"no origin in [{spec.start}, {spec.end}): the trace ends {grid.index[-1]}")
    keep = max(1, round(spec.history / grid.step))
    instances = {name: make() for name, make in models.items()}
    collected = {name: _Collected() for name in models}
    for origin in progress(origins):
        history = _frame(grid, max(0, origin - keep), origin)
        for name, model in instances.items():
            box = collected[name]
            began = time.perf_counter()
            model.fit(history, grid.step)
            fitted = time.perf_counter()
            recent = _frame(grid, max(0, origin - model.min_history_steps), origin)
            forecast = model.predict(recent, max_h, levels)
            box.fit_seconds.append(fitted - began)
            box.predict_seconds.append(time.perf_counter() - fitted)
            _collect(box, forecast, grid, origin, steps, levels, step_ns)
    return _summarise(grid, spec, steps, levels, collected, first, last, origins, baseline, families or {})


def _steps(horizon: timedelta, step: timedelta, label: str) -> int:
    count = horizon / step
    if count < 1 or abs(count - round(count)) > 1e-9:
        raise ForecastError(f"horizon {label} is not a whole number of trace steps ({step})")
    return round(count)


def _frame(grid: Grid, lo: int, hi: int) -> pd.DataFrame:
    n = hi - lo
    return pd.DataFrame(
        {
            "unique_id": np.repeat(np.asarray(grid.series, dtype=object), n),
            "ds": np.tile(grid.index[lo:hi], len(grid.series)),
            "y": grid.values[lo:hi].T.reshape(-1),
        }
    )


def _collect(
    box: _Collected,
    forecast: pd.DataFrame,
    grid: Grid,
    origin: int,
    steps: Mapping[str, int],
    levels: Sequence[float],
    step_ns: int,
) -> None:
    by_uid = {str(u): g for u, g in forecast.groupby("unique_id", sort=False)}
    for model in forecast["model"]:
        box.models[str(model)] = box.models.get(str(model), 0) + 1
    for i, uid in enumerate(grid.series):
        rows = by_uid.get(uid)
        for label, h in steps.items():
            target = origin - 1 + h
            actual = grid.values[target, i] if target < len(grid.index) else np.nan
            box.actuals.setdefault(f"{uid}|{label}", []).append(float(actual))
            for level in levels:
                value = np.nan
                if rows is not None and len(rows) >= h:
                    value = float(rows[quantile_column(level)].iloc[h - 1])
                box.forecasts.setdefault((f"{uid}|{label}", level), []).append(value)


def _column_means(values: np.ndarray) -> np.ndarray:
    """Each column's mean over its values that are not NaN; NaN for a column with none (``np.nanmean`` warns there,
    and such a series is no error: it is scored NaN and left out of the aggregates)."""
    known = ~np.isnan(values)
    counts = known.sum(axis=0)
    totals = np.where(known, values, 0.0).sum(axis=0)
    return np.where(counts > 0, totals / np.maximum(counts, 1), np.nan)


def _summarise(
    grid: Grid,
    spec: BacktestSpec,
    steps: Mapping[str, int],
    levels: Sequence[float],
    collected: Mapping[str, _Collected],
    first: int,
    last: int,
    origins: Sequence[int],
    baseline: str,
    families: Mapping[str, str],
) -> BacktestResult:
    window = grid.values[first:last]
    before = grid.values[max(0, first - round(spec.history / grid.step)) : first]
    level_mean = _column_means(window)  # NaN for a series with no value in the window (scored as NaN)
    naive_mae = _column_means(np.abs(np.diff(before, axis=0))) if len(before) > 1 else np.full(len(grid.series), np.nan)
    common = _common_mask(grid, steps, levels, collected)
    mases: dict[str, dict[str, list[float]]] = {}
    losses: dict[str, dict[str, dict[str, list[float]]]] = {}
    covers: dict[str, dict[str, list[float]]] = {}
    per_series: dict[str, dict[str, SeriesScores]] = {uid: {} for uid in grid.series}
    for name, box in collected.items():
        mase: dict[str, list[float]] = {label: [] for label in steps}
        pin: dict[str, dict[str, list[float]]] = {q: {label: [] for label in steps} for q, _ in spec.quantiles}
        cover: dict[str, list[float]] = {q_label: [] for q_label, _ in spec.quantiles}
        for i, uid in enumerate(grid.series):
            series_scores: SeriesScores = {}
            hits: dict[str, list[np.ndarray]] = {q_label: [] for q_label, _ in spec.quantiles}
            for label in steps:
                actual = np.where(common[f"{uid}|{label}"], np.asarray(box.actuals[f"{uid}|{label}"]), np.nan)
                median = np.asarray(box.forecasts[(f"{uid}|{label}", 0.5)])
                ok = ~np.isnan(actual) & ~np.isnan(median)
                mase[label].append(_ratio(np.abs(actual - median)[ok].mean() if ok.any() else np.nan, naive_mae[i]))
                for q_label, q in spec.quantiles:
                    f = np.asarray(box.forecasts[(f"{uid}|{label}", q)])
                    ok = ~np.isnan(actual) & ~np.isnan(f)
                    loss = _ratio(pinball(actual[ok], f[ok], q).mean() if ok.any() else np.nan, level_mean[i])
                    pin[q_label][label].append(loss)
                    series_scores[f"pinball_{q_label}_{label}"] = loss
                    hits[q_label].append((actual[ok] <= f[ok]).astype(float))
            for q_label, _ in spec.quantiles:
                joined = np.concatenate(hits[q_label]) if hits[q_label] else np.empty(0)
                value = float(joined.mean()) if len(joined) else float("nan")
                cover[q_label].append(value)
                series_scores[f"coverage_{q_label}"] = value
            per_series[uid][name] = series_scores
        mases[name], losses[name], covers[name] = mase, pin, cover
    # Assembled once every model is scored: the ratios need the baseline's losses, whichever order it ran in.
    out_models: dict[str, ModelScores] = {}
    for name, box in collected.items():
        pin = losses[name]
        out_models[name] = {
            "mase": {label: _mean(v) for label, v in mases[name].items()},
            "pinball": {q: {label: _mean(v) for label, v in by_h.items()} for q, by_h in pin.items()},
            "pinball_weighted": {
                q: {label: _weighted(v, level_mean) for label, v in by_h.items()} for q, by_h in pin.items()
            },
            "coverage": {q: _mean(v) for q, v in covers[name].items()},
            "fit_seconds": float(np.mean(box.fit_seconds)),
            "predict_seconds": float(np.mean(box.predict_seconds)),
            "models_used": dict(sorted(box.models.items())),
            "ratio_median": (
                {
                    q: {label: _median_ratio(v, losses[baseline][q][label]) for label, v in by_h.items()}
                    for q, by_h in pin.items()
                }
                if baseline in losses
                else None
            ),
            "family": families.get(name, "unknown"),
        }
    return {
        "trace": {
            "start": spec.start.isoformat(),
            "end": spec.end.isoformat(),
            "origins": len(origins),
            "series": len(grid.series),
            "step_seconds": grid.step.total_seconds(),
        },
        "models": out_models,
        "series": per_series,
    }


def _common_mask(
    grid: Grid, steps: Mapping[str, int], levels: Sequence[float], collected: Mapping[str, _Collected]
) -> dict[str, np.ndarray]:
    """Where every model gave every quantile and the outcome was observed: all models are scored on the same
    (series, origin, horizon) points, so a model that declines to forecast from stale data is not rewarded."""
    masks = {}
    for uid in grid.series:
        for label in steps:
            key = f"{uid}|{label}"
            ok = None
            for box in collected.values():
                here = ~np.isnan(np.asarray(box.actuals[key]))
                for level in levels:
                    here &= ~np.isnan(np.asarray(box.forecasts[(key, level)]))
                ok = here if ok is None else ok & here
            masks[key] = ok if ok is not None else np.zeros(0, dtype=bool)
    return masks


def _ratio(value: float, scale: float) -> float:
    if not np.isfinite(value) or not np.isfinite(scale) or scale <= 0:
        return float("nan")
    return float(value / scale)


def _weighted(normalized: Sequence[float], level_mean: np.ndarray) -> float | None:
    """Level-weighted loss: each series' loss in demand units (normalized loss times its mean level), summed,
    over the sum of the mean levels of the series that have a loss."""
    losses = np.asarray(normalized, dtype=float)
    ok = np.isfinite(losses) & np.isfinite(level_mean) & (level_mean > 0)
    if not ok.any():
        return None
    return float(np.sum(losses[ok] * level_mean[ok]) / np.sum(level_mean[ok]))


def _median_ratio(model: Sequence[float], baseline: Sequence[float]) -> float | None:
    """Median over series of the model's loss over the baseline's (series where either is missing or the
    baseline's loss is zero are left out)."""
    mine, bar = np.asarray(model, dtype=float), np.asarray(baseline, dtype=float)
    ok = np.isfinite(mine) & np.isfinite(bar) & (bar > 0)
    return float(np.median(mine[ok] / bar[ok])) if ok.any() else None


def _mean(values: Sequence[float]) -> float | None:
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else None

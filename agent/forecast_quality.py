"""How good the configured forecaster is on the history at hand: a rolling-origin backtest.

The model is fitted once on the history before the first origin; from each origin (every ``every``) it forecasts
the horizon using only what was observed before the origin, and is scored against what came. Persistence (the
last value) is scored the same way, so ``skill`` = 1 - MAE / persistence MAE says whether the model beats the
bar at this horizon (positive: better). ``coverage`` is the share of actual values at or below the per-step
quantile of the class's service level; it should be close to that level. The planner provisions for the peak of
demand over a class's lead time and one tick (``agent.planning.needs``): ``peak_coverage`` is the share of origins
where the highest actual value over those steps stayed at or below the forecast's peak quantile (``peak_q<level>``)
at the last of them, which is what the capacity planned would have covered; NaN when the forecaster publishes no
peaks or the class has no peak steps (only fixed pools serve it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import pandas as pd

from forecasting.base import Forecaster, peak_column, quantile_column
from models import ForecastError


@dataclass(frozen=True)
class ClassQuality:
    demand_class: str
    origins: int
    points: int
    mae: float
    persistence_mae: float
    level: float
    coverage: float
    peak_coverage: float = math.nan
    peak_steps: int | None = None

    @property
    def skill(self) -> float:
        if not self.points or self.persistence_mae <= 0.0:
            return math.nan
        return 1.0 - self.mae / self.persistence_mae

    def summary(self) -> dict[str, float | int | str | None]:
        return {
            "origins": self.origins,
            "points": self.points,
            "mae": _rounded(self.mae),
            "persistence_mae": _rounded(self.persistence_mae),
            "skill": _rounded(self.skill),
            "level": self.level,
            "coverage": _rounded(self.coverage),
            "peak_steps": self.peak_steps,
            "peak_coverage": _rounded(self.peak_coverage),
        }


def backtest(
    forecaster: Forecaster,
    history: pd.DataFrame,
    step: timedelta,
    horizon: int,
    levels: Mapping[str, float],
    first_origin: datetime,
    every: timedelta,
    peak_steps: Mapping[str, int] | None = None,
) -> dict[str, ClassQuality]:
    """Score ``forecaster`` from origins ``first_origin, first_origin + every, ...`` up to the end of ``history``;
    ``peak_steps``: per class, the steps the planner takes the peak over (at most ``horizon``)."""
    peak_steps = {uid: min(max(1, k), horizon) for uid, k in (peak_steps or {}).items()}
    if history.empty or history["y"].isna().all():
        return {}
    history = history.sort_values(["unique_id", "ds"], kind="stable")
    last = history["ds"].max()
    origins = list(pd.date_range(pd.Timestamp(first_origin), last - horizon * step, freq=every))
    before = history[history["ds"] < pd.Timestamp(first_origin)]
    quantiles = sorted({0.5, *levels.values()})
    errors: dict[str, list[float]] = {}
    naive: dict[str, list[float]] = {}
    covered: dict[str, list[bool]] = {}
    peak_covered: dict[str, list[bool]] = {}
    counted: dict[str, int] = {}
    if not origins or before.empty:
        return {}
    try:
        forecaster.fit(before, step)
    except ForecastError:
        return {}
    actual = history.set_index(["unique_id", "ds"])["y"]
    for origin in origins:
        recent = history[history["ds"] < origin]
        try:
            predicted = forecaster.predict(recent, horizon, quantiles)
        except ForecastError:
            continue
        last_values = recent.dropna(subset=["y"]).groupby("unique_id")["y"].last()
        for name, rows in predicted.groupby("unique_id"):
            uid = str(name)
            keys = list(zip([uid] * len(rows), rows["ds"], strict=True))
            truth = actual.reindex(keys).to_numpy(dtype=float)
            median = rows[quantile_column(0.5)].to_numpy(dtype=float)
            upper = rows[quantile_column(levels.get(uid, 0.9))].to_numpy(dtype=float)
            ok = ~np.isnan(truth) & ~np.isnan(median)
            if not ok.any() or uid not in last_values:
                continue
            counted[uid] = counted.get(uid, 0) + 1
            errors.setdefault(uid, []).extend(np.abs(truth[ok] - median[ok]).tolist())
            naive.setdefault(uid, []).extend(np.abs(truth[ok] - float(last_values[uid])).tolist())
            covered.setdefault(uid, []).extend((truth[ok] <= upper[ok] + 1e-9).tolist())
            column = peak_column(levels.get(uid, 0.9))
            if (k := peak_steps.get(uid)) is not None and column in rows and len(truth) >= k:
                seen = truth[:k][~np.isnan(truth[:k])]
                peak = float(rows[column].iloc[k - 1])
                if seen.size and not math.isnan(peak):  # a peak over the steps observed (a gap is not a zero)
                    peak_covered.setdefault(uid, []).append(bool(seen.max() <= peak + 1e-9))
    return {
        uid: ClassQuality(
            demand_class=uid,
            origins=counted[uid],
            points=len(errors[uid]),
            mae=float(np.mean(errors[uid])),
            persistence_mae=float(np.mean(naive[uid])),
            level=levels.get(uid, 0.9),
            coverage=float(np.mean(covered[uid])),
            peak_coverage=float(np.mean(peak_covered[uid])) if peak_covered.get(uid) else math.nan,
            peak_steps=peak_steps.get(uid),
        )
        for uid in sorted(errors)
    }


def quality_table(results: Mapping[str, ClassQuality], classes: Sequence[str]) -> list[dict[str, object]]:
    return [{"demand_class": name, **results[name].summary()} for name in classes if name in results]


def _rounded(value: float) -> float | str:
    return "n/a" if math.isnan(value) else round(value, 4)

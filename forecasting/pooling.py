"""Choosing a global model on the evidence of every series at once, level by level.

A global model (one trained on every series together) is one model, so ``auto`` judges it as one: at each
quantile level, the pinball losses of its calibrated forecasts are summed over all series on each scoring fold
and set against the baseline's sums over the same series. Summed losses are in demand units, so a series weighs
in proportion to its level, as in the backtest's level-weighted score. The model wins a level when it beats the
baseline on every fold: summed over many series the evidence is far less noisy than one series', so it need not
clear the 5% margin a single series must. A series then forecasts that level from it unless its own losses (both
folds together) are more than the margin above those of what the series chose for itself: a series the model
clearly serves worse (an aggregate, a series unlike the rest) keeps its own choice.

Judged one series at a time, the global model rarely cleared the margin on a bursty tenant's two days of
residuals, though it beat the calibrated last value on the tenants together: on the Helios tenants' last week
``auto`` stayed at 0.917 / 0.937 / 0.956 of the last value's level-weighted q0.9 loss (15 / 30 / 60 minutes).
Pooled, with the margin kept only for leaving, it reached 0.822 / 0.876 / 0.858 (``bench_forecast_accuracy``);
with no way for a series to leave, 0.821 / 0.879 / 0.868, and with a 5% margin to enter, 0.908 / 0.927 / 0.897.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

FOLDS = 2


@dataclass(frozen=True)
class PooledScore:
    """One level's pooled evidence: the summed losses of the model and of the baseline on each fold."""

    level: float
    series: int
    model: tuple[float, ...]
    baseline: tuple[float, ...]

    @property
    def ratio(self) -> float:
        """The model's summed loss over the baseline's on its worse fold (lower is better; inf if unknown)."""
        ratios = [m / b if b > 0 else float("inf") for m, b in zip(self.model, self.baseline, strict=True)]
        return max(ratios) if self.series else float("inf")


def pooled_scores(
    losses: Mapping[str, Mapping[str, np.ndarray]], model: str, baseline: str, quantiles: Sequence[float]
) -> list[PooledScore]:
    """Per level, ``model``'s and ``baseline``'s losses summed per fold over the series that have both.

    ``losses[uid][name]`` holds a series' mean pinball loss per fold and level, shape (folds, levels), in demand
    units; non-finite entries mark what could not be scored.
    """
    scores = []
    for k, level in enumerate(quantiles):
        mine, bar, count = np.zeros(FOLDS), np.zeros(FOLDS), 0
        for by_name in losses.values():
            a, b = by_name.get(model), by_name.get(baseline)
            if a is None or b is None or not (np.isfinite(a[:, k]).all() and np.isfinite(b[:, k]).all()):
                continue
            mine, bar, count = mine + a[:, k], bar + b[:, k], count + 1
        scores.append(PooledScore(level, count, tuple(mine.tolist()), tuple(bar.tolist())))
    return scores


def won_levels(scores: Sequence[PooledScore]) -> tuple[float, ...]:
    """The levels at which the model beat the baseline on every fold."""
    return tuple(s.level for s in scores if s.ratio < 1.0)


def serves(own: Mapping[str, np.ndarray], model: str, chosen: str, k: int, tolerance: float = 0.0) -> bool:
    """Whether a series' own losses at level ``k`` (both folds) under ``model`` are at most ``tolerance`` above
    those under ``chosen``."""
    a, b = own.get(model), own.get(chosen)
    if a is None or not np.isfinite(a[:, k]).all():
        return False
    if b is None or not np.isfinite(b[:, k]).all():
        return True
    return float(a[:, k].sum()) <= float(b[:, k].sum()) * (1.0 + tolerance)

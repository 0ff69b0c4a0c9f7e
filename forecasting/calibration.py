"""Calibrating quantiles on recent residuals (split conformal), and the pinball loss that scores them.

For a base forecast ``b`` estimating quantile ``k`` and a wanted level ``q``, the calibrated forecast at ``h``
steps ahead is ``b + Q_q(y - b)``, the empirical ``q`` quantile of that series' own recent ``h``-step residuals.
If ``b`` were already a perfect ``q`` quantile the correction would be zero; for a point forecast it is the usual
residual quantile. The order statistic taken is the split-conformal one, which carries the finite-sample term.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MIN_RESIDUALS = 24  # fewer observed h-step residuals than this and an offset is not trusted


@dataclass(frozen=True)
class Residuals:
    """``values[k, i, h]``: actual minus base ``k`` at origin ``origins_ns[i]``, ``h + 1`` steps ahead."""

    origins_ns: np.ndarray
    values: np.ndarray

    @property
    def count(self) -> int:
        return len(self.origins_ns)

    def keep(self, mask: np.ndarray) -> Residuals:
        return Residuals(self.origins_ns[mask], self.values[:, mask, :])

    @staticmethod
    def empty(bases: int, horizon: int) -> Residuals:
        return Residuals(np.empty(0, dtype=np.int64), np.empty((bases, 0, horizon)))

    @staticmethod
    def join(first: Residuals, second: Residuals) -> Residuals:
        origins = np.concatenate((first.origins_ns, second.origins_ns))
        values = np.concatenate((first.values, second.values), axis=1)
        order = np.argsort(origins, kind="stable")
        return Residuals(origins[order], values[:, order, :])


def nearest_base(base_levels: Sequence[float], level: float) -> int:
    return int(np.argmin([abs(b - level) for b in base_levels]))


def conformal_offsets(
    residuals: np.ndarray, base_levels: Sequence[float], levels: Sequence[float], horizon: int
) -> tuple[np.ndarray, int]:
    """Offsets of shape (levels, horizon) and the first step (0-based) with too few residuals (``horizon`` if none).

    The offset for level ``q`` at a step with ``n`` residuals is the ``ceil((n + 1) q)``-th smallest of them (the
    split-conformal order statistic). Steps beyond the residuals' own horizon reuse the last one.
    """
    offsets = np.zeros((len(levels), horizon))
    bases, _, width = residuals.shape
    if bases == 0 or width == 0:
        return offsets, 0
    counts = (~np.isnan(residuals[0])).sum(axis=0)
    too_few = np.flatnonzero(counts < MIN_RESIDUALS)
    short = min(horizon, int(too_few[0]) if len(too_few) else width)
    if short == 0:
        return offsets, 0
    ordered = np.sort(residuals[:, :, :short], axis=1)  # NaN sort last
    steps = np.arange(short)
    for i, level in enumerate(levels):
        n = (~np.isnan(ordered[nearest_base(base_levels, level)])).sum(axis=0)
        rank = np.clip(np.ceil((n + 1) * level).astype(int) - 1, 0, n - 1)
        offsets[i, :short] = ordered[nearest_base(base_levels, level)][rank, steps]
    offsets[:, short:] = offsets[:, short - 1 : short]
    return offsets, short if short < min(horizon, width) else horizon


def pinball(actual: np.ndarray, forecast: np.ndarray, level: float) -> np.ndarray:
    """Pinball (quantile) loss, elementwise; NaN where either side is NaN."""
    diff = actual - forecast
    return np.asarray(np.where(diff >= 0, level * diff, (level - 1.0) * diff))

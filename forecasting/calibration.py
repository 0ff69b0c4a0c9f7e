"""Calibrating quantiles on recent residuals (locally weighted split conformal), and the pinball loss.

For a base forecast ``b`` estimating quantile ``k`` and a wanted level ``q``, the calibrated forecast at ``h``
steps ahead is ``b + s * Q_q((y - b) / s)``: the empirical ``q`` quantile of that series' own recent ``h``-step
residuals, each divided by the local scale ``s`` at its origin, times the scale now. The scale is how much the
series moved lately (mean absolute step change over the last hour) plus how much it usually moves (the same
mean over the kept history), so a band widens while demand churns and narrows while it sits still. This is
the locally weighted conformal interval of Lei et al., "Distribution-Free Predictive Inference for Regression"
(JASA 2018). If ``b`` were already a perfect ``q`` quantile the correction would be zero; for a point forecast it
is the usual residual quantile. The order statistic taken is the split-conformal one, with its finite-sample term.

The peak of demand over the first ``h`` steps is calibrated the same way, on each origin's highest residual over
those steps (``peak_residuals``): ``max(b) + s * Q_q(max((y - b) / s))`` is then at least the ``q`` quantile of
``max(y)`` at the same past origins (exactly it for a flat path such as the last value), a simultaneous band
rather than ``h`` separate ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MIN_RESIDUALS = 24  # fewer observed h-step residuals than this and an offset is not trusted


@dataclass(frozen=True)
class Residuals:
    """``values[k, i, h]``: actual minus base ``k`` at origin ``origins_ns[i]``, ``h + 1`` steps ahead;
    ``scales[i]``: the series' local scale at that origin (ones until set)."""

    origins_ns: np.ndarray
    values: np.ndarray
    scales: np.ndarray

    @property
    def count(self) -> int:
        return len(self.origins_ns)

    def normalized(self) -> np.ndarray:
        """Residuals in units of their origin's local scale."""
        return np.asarray(self.values / self.scales[None, :, None])

    def keep(self, mask: np.ndarray) -> Residuals:
        return Residuals(self.origins_ns[mask], self.values[:, mask, :], self.scales[mask])

    def rescaled(self, scales: np.ndarray) -> Residuals:
        return Residuals(self.origins_ns, self.values, scales)

    @staticmethod
    def unscaled(origins_ns: np.ndarray, values: np.ndarray) -> Residuals:
        return Residuals(origins_ns, values, np.ones(len(origins_ns)))

    @staticmethod
    def empty(bases: int, horizon: int) -> Residuals:
        return Residuals.unscaled(np.empty(0, dtype=np.int64), np.empty((bases, 0, horizon)))

    @staticmethod
    def join(first: Residuals, second: Residuals) -> Residuals:
        origins = np.concatenate((first.origins_ns, second.origins_ns))
        values = np.concatenate((first.values, second.values), axis=1)
        scales = np.concatenate((first.scales, second.scales))
        order = np.argsort(origins, kind="stable")
        return Residuals(origins[order], values[:, order, :], scales[order])


MIN_SCALE_FLOOR = 0.01  # accelerators: keeps a series that never moved from dividing by zero


def scale_floor(y: np.ndarray) -> float:
    """What every local scale of a series adds: its mean absolute step change over the whole kept history. The
    local scale is then the recent move plus the usual move, so a band never shrinks to nothing in a still hour
    and a rare jump does not stretch the next hour's band without bound."""
    changes = np.abs(np.diff(_carried_forward(y)))
    changes = changes[~np.isnan(changes)]
    usual = float(changes.mean()) if len(changes) else 0.0
    return max(usual, MIN_SCALE_FLOOR)


def local_scales(y: np.ndarray, ends: np.ndarray, steps: int, floor: float) -> np.ndarray:
    """Mean absolute one-step change over the (up to) ``steps`` changes ending at each index of ``ends``, plus
    ``floor``. Gaps are carried forward, so a gap neither moves the series nor hides a move across it."""
    change = np.nan_to_num(np.abs(np.diff(_carried_forward(y), prepend=np.nan)), nan=0.0)
    total = np.concatenate(([0.0], np.cumsum(change)))
    ends = np.asarray(ends, dtype=int)
    starts = np.maximum(ends - steps + 1, 0)
    return np.asarray((total[ends + 1] - total[starts]) / (ends - starts + 1) + floor)


def _carried_forward(y: np.ndarray) -> np.ndarray:
    """``y`` with each gap filled by the last value before it (leading gaps stay NaN)."""
    y = np.asarray(y, dtype=float)
    seen = np.where(np.isnan(y), 0, np.arange(len(y)))
    filled = y[np.maximum.accumulate(seen)] if len(y) else y
    return np.asarray(filled)


def nearest_base(base_levels: Sequence[float], level: float) -> int:
    return int(np.argmin([abs(b - level) for b in base_levels]))


def conformal_offsets(
    residuals: np.ndarray, base_levels: Sequence[float], levels: Sequence[float], horizon: int
) -> tuple[np.ndarray, int]:
    """Offsets of shape (levels, horizon) and the first step (0-based) with too few residuals (``horizon`` if none).

    The offset for level ``q`` at a step with ``n`` residuals is the ``ceil((n + 1) q)``-th smallest of them (the
    split-conformal order statistic). Where that rank is beyond ``n`` (a level above ``n / (n + 1)``: 0.999 needs
    999 residuals, two days of five-minute steps hold 576), no residual is high enough: the largest would be
    exceeded about ``1 / (n + 1)`` of the time whatever the level, so the offset is extrapolated from the highest
    residuals instead (``_tails``). Steps beyond the residuals' own horizon reuse the last one, and count as
    steps with too few residuals: a band held at its last width would understate the spread further ahead.
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
        sorted_ = ordered[nearest_base(base_levels, level)]
        n = (~np.isnan(sorted_)).sum(axis=0)
        wanted = np.ceil((n + 1) * level).astype(int) - 1
        offsets[i, :short] = sorted_[np.clip(wanted, 0, n - 1), steps]
        beyond = np.flatnonzero(wanted > n - 1)
        if len(beyond):
            offsets[i, beyond] = _tails(sorted_[:, beyond], n[beyond], level)
    offsets[:, short:] = offsets[:, short - 1 : short]
    return offsets, short


TAIL_POINTS = 10  # highest residuals an extrapolated offset is fitted to


def _tails(ascending: np.ndarray, n: np.ndarray, level: float) -> np.ndarray:
    """Per column (a step's residuals, ascending, NaN last; ``n`` of them observed), the ``level`` quantile of
    residuals above their range, from an exponential tail fitted to the highest ``TAIL_POINTS`` of them (peaks
    over a threshold; the exponential is also the tail ``DemandForecast.exceedance`` assumes): ``k`` of the ``n``
    exceed the threshold ``u``, by ``beta`` on average, so a residual exceeds ``u + x`` with probability
    ``k / (n + 1) * exp(-x / beta)``. Never below the largest residual."""
    columns = np.arange(ascending.shape[1])
    largest = ascending[n - 1, columns]
    k = int(min(TAIL_POINTS, n.min() - 1))  # a step offsets are computed for has at least MIN_RESIDUALS
    if k < 2 or level >= 1.0:
        return np.asarray(largest)
    threshold = ascending[n - k - 1, columns]
    top = ascending[(n - k)[None, :] + np.arange(k)[:, None], columns[None, :]]
    beta = (top - threshold).mean(axis=0)
    beyond = np.where(beta > 0.0, beta * np.log(k / ((n + 1) * (1.0 - level))), 0.0)
    return np.asarray(np.maximum(largest, threshold + beyond))


def peak_residuals(residuals: np.ndarray) -> np.ndarray:
    """``out[k, i, h]``: the highest of ``residuals[k, i, : h + 1]``, NaN once any of them is (a missing value may
    have been the peak)."""
    if residuals.shape[-1] == 0:
        return residuals
    return np.asarray(np.maximum.accumulate(residuals, axis=-1))


def pinball(actual: np.ndarray, forecast: np.ndarray, level: float) -> np.ndarray:
    """Pinball (quantile) loss, elementwise; NaN where either side is NaN."""
    diff = actual - forecast
    return np.asarray(np.where(diff >= 0, level * diff, (level - 1.0) * diff))

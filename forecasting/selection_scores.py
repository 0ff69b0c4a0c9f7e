"""Scoring the candidates of ``auto`` (``forecasting.selection``) on the residuals they keep, series by series.

A series' residual origins that every usable candidate forecast, and whose outcomes were observed, are split in
time into two folds: offsets are calibrated on one and the calibrated quantiles scored (pinball loss over the
judged quantiles and the selection horizon) on the other, both ways round; a candidate's score is its worse fold.
The average of two candidates' calibrated quantiles (a combination, named ``first+second``) is scored from their
errors the same way. With a recent window, each is also scored over the newest origins with offsets calibrated on
the older ones only. Scores are in demand units, lower is better.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta

import numpy as np

from forecasting.calibrated import CalibratedForecaster
from forecasting.calibration import MIN_RESIDUALS, Residuals, conformal_offsets, nearest_base, pinball

JOIN = "+"  # a combination is named after its parts: "ets+naive"


def candidate_scores(
    candidates: Mapping[str, CalibratedForecaster],
    uid: str,
    horizon: int,
    quantiles: Sequence[float],
    combinations: Sequence[tuple[str, str]],
    recent_window: timedelta | None,
) -> tuple[dict[str, float], dict[str, float], dict[str, np.ndarray]]:
    """Worse-fold pinball loss of every candidate and combination that has enough shared residual origins,
    each one's loss over the recent window (offsets calibrated on the origins before it), and each one's loss
    per fold and level."""
    scores = {name: float("inf") for name in candidates}
    recent: dict[str, float] = {}
    levels: dict[str, np.ndarray] = {}
    usable = {}
    for name, candidate in candidates.items():
        residuals = candidate.residuals(uid)
        if not candidate.train_note(uid) and residuals is not None and residuals.count >= 2 * MIN_RESIDUALS:
            usable[name] = residuals
    if not usable:
        return scores, recent, levels
    # Origins every candidate forecast and whose outcomes were observed: a gap in the data leaves no origins
    # behind, so the two folds still split what can be scored (a fold of only missing outcomes scored nothing).
    shared = np.asarray(sorted(set.intersection(*(set(_observed_origins(r).tolist()) for r in usable.values()))))
    if len(shared) < 2 * MIN_RESIDUALS:
        return scores, recent, levels
    half = len(shared) // 2
    folds = (shared[:half], shared[half:])
    span = 0.0 if recent_window is None else recent_window.total_seconds() * 1e9
    older, newer = shared[shared <= shared[-1] - span], shared[shared > shared[-1] - span]
    watch = recent_window is not None and len(older) >= MIN_RESIDUALS and len(newer) > 0
    errors: dict[str, list[np.ndarray | None]] = {}
    latest: dict[str, np.ndarray | None] = {}
    for name, residuals in usable.items():
        width = min(horizon, residuals.values.shape[2])
        masks = [np.isin(residuals.origins_ns, f) for f in folds]
        blocks = [residuals.normalized()[:, m, :width] for m in masks]
        scales = [residuals.scales[m] for m in masks]
        candidate = candidates[name]
        errors[name] = [
            calibrated_errors(
                blocks[1 - i],
                blocks[i],
                scales[i],
                candidate.model.base_levels,
                width,
                quantiles,
                candidate.offset_bases,
            )
            for i in (0, 1)
        ]
        scores[name] = worse_fold_loss(errors[name], quantiles)
        levels[name] = level_losses(errors[name], quantiles)
        if watch:
            normalized = residuals.normalized()[:, :, :width]
            before, after = np.isin(residuals.origins_ns, older), np.isin(residuals.origins_ns, newer)
            latest[name] = calibrated_errors(
                normalized[:, before],
                normalized[:, after],
                residuals.scales[after],
                candidate.model.base_levels,
                width,
                quantiles,
                candidate.offset_bases,
            )
            recent[name] = worse_fold_loss([latest[name]], quantiles)
    for first, second in combinations:
        if first in errors and second in errors:
            mixed = [_mean_pair(a, b) for a, b in zip(errors[first], errors[second], strict=True)]
            scores[first + JOIN + second] = worse_fold_loss(mixed, quantiles)
            levels[first + JOIN + second] = level_losses(mixed, quantiles)
            if first in latest and second in latest:
                recent[first + JOIN + second] = worse_fold_loss([_mean_pair(latest[first], latest[second])], quantiles)
    return scores, recent, levels


def calibrated_errors(
    calibrate: np.ndarray,
    score: np.ndarray,
    scales: np.ndarray,
    base_levels: Sequence[float],
    width: int,
    quantiles: Sequence[float],
    offset_bases: bool = True,
) -> np.ndarray | None:
    """Outcome minus calibrated forecast on the scoring fold, shape (levels, origins, steps); None if unusable.

    Both folds hold residuals divided by their origin's scale; a residual is outcome minus base, so outcome
    minus (base + scale x offset) is scale x (normalized residual minus offset). A candidate that forecasts
    its base levels without offsets is scored without them at those levels.
    """
    offsets, short = conformal_offsets(calibrate, base_levels, quantiles, width)
    if short < width:
        return None
    if not offset_bases:  # the candidate forecasts its base quantiles as they are: score them that way
        offsets[[q in base_levels for q in quantiles]] = 0.0
    picked = [
        (score[nearest_base(base_levels, q)] - offsets[i][None, :]) * scales[:, None] for i, q in enumerate(quantiles)
    ]
    return np.stack(picked)


def worse_fold_loss(folds: Sequence[np.ndarray | None], quantiles: Sequence[float]) -> float:
    """The higher of the folds' mean pinball losses over the levels; inf when a fold is unusable."""
    losses = []
    for errors in folds:
        if errors is None or np.isnan(errors).all():
            return float("inf")
        per_level = [pinball(errors[i], np.zeros(1), q) for i, q in enumerate(quantiles)]
        losses.append(float(np.nanmean(np.stack(per_level))))
    return max(losses)


def level_losses(folds: Sequence[np.ndarray | None], quantiles: Sequence[float]) -> np.ndarray:
    """Mean pinball loss per fold and level, shape (folds, levels), in demand units; inf where unusable."""
    out = np.full((len(folds), len(quantiles)), np.inf)
    for f, errors in enumerate(folds):
        for i, q in enumerate(quantiles):
            if errors is not None and not np.isnan(errors[i]).all():
                out[f, i] = float(np.nanmean(pinball(errors[i], np.zeros(1), q)))
    return out


def _observed_origins(residuals: Residuals) -> np.ndarray:
    """The origins at which at least one outcome of the residual horizon was observed."""
    return np.asarray(residuals.origins_ns[~np.isnan(residuals.values).all(axis=(0, 2))])


def _mean_pair(first: np.ndarray | None, second: np.ndarray | None) -> np.ndarray | None:
    """Errors of the average of two calibrated forecasts: the average of their errors."""
    if first is None or second is None or first.shape != second.shape:
        return None
    return np.asarray((first + second) / 2.0)

"""Choosing a model per demand class by rolling-origin backtest on recent history: the ``auto`` forecaster.

Every candidate keeps residuals of its forecasts from many recent origins (its calibration window). Selection
splits those origins in time: offsets are calibrated on one half and the calibrated quantiles are scored
(pinball loss over the configured quantiles and the selection horizon) on the other, both ways round, for each
series; a candidate's score is its worse fold. The best candidate wins only if it beats the calibrated last value
by ``margin``; otherwise the last value runs, so selection falls back rather than loses. Selection is re-run at
every fit (it only reads stored residuals); each candidate retrains on its own, slower schedule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Self

import numpy as np
import pandas as pd

from forecasting.calibrated import Block, CalibratedForecaster
from forecasting.calibration import MIN_RESIDUALS, conformal_offsets, nearest_base, pinball
from forecasting.output import forecast_frame
from forecasting.series import SeriesData, merge, step_ns, to_panel


class AutoForecaster:
    """Per-series choice among calibrated candidates; ``baseline`` names the one that wins ties."""

    name = "auto"

    def __init__(
        self,
        candidates: Sequence[CalibratedForecaster],
        *,
        baseline: str = "naive",
        quantiles: Sequence[float] = (0.5, 0.9, 0.95),
        selection_horizon: timedelta = timedelta(hours=1),
        margin: float = 0.02,
    ) -> None:
        self.candidates = {c.name: c for c in candidates}
        if baseline not in self.candidates:
            raise ValueError(f"auto needs its baseline {baseline!r} among the candidates {sorted(self.candidates)}")
        self.baseline = baseline
        self.quantiles = tuple(quantiles)
        self.selection_horizon = selection_horizon
        self.margin = margin
        self.choice: dict[str, str] = {}
        self.scores: dict[str, dict[str, float]] = {}
        self._step_ns = 0
        self._tails: dict[str, SeriesData] = {}

    @property
    def min_history_steps(self) -> int:
        return max(c.min_history_steps for c in self.candidates.values())

    def fit(self, history: pd.DataFrame, step: timedelta) -> Self:
        size = step_ns(step)
        panel = to_panel(history, step)
        self._step_ns = size
        for candidate in self.candidates.values():
            candidate.fit_panel(panel, size)
        keep = max(c.context_steps(size) for c in self.candidates.values()) + 1
        for uid, series in panel.items():
            self._tails[uid] = merge(self._tails.get(uid), series, keep)
        self._select(list(panel), size)
        return self

    def _select(self, uids: Sequence[str], size: int) -> None:
        horizon = max(1, round(self.selection_horizon.total_seconds() * 1e9 / size))
        for uid in uids:
            scores = {name: self._score(c, uid, horizon) for name, c in self.candidates.items()}
            self.scores[uid] = scores
            bar = scores[self.baseline]
            best = min(scores, key=lambda n: scores[n])
            good = np.isfinite(scores[best]) and (not np.isfinite(bar) or scores[best] < bar * (1.0 - self.margin))
            self.choice[uid] = best if good else self.baseline

    def _score(self, candidate: CalibratedForecaster, uid: str, horizon: int) -> float:
        """Pinball loss of the calibrated candidate, two-fold: calibrate on one half of the recent origins and
        score on the other, both ways round; the worse fold counts, so a lucky half does not win selection."""
        if candidate.train_note(uid):
            return float("inf")
        residuals = candidate.residuals(uid)
        if residuals is None or residuals.count < 2 * MIN_RESIDUALS:
            return float("inf")
        width = min(horizon, residuals.values.shape[2])
        half = residuals.count // 2
        older, newer = residuals.values[:, :half, :width], residuals.values[:, half:, :width]
        folds = [self._fold(candidate, older, newer, width), self._fold(candidate, newer, older, width)]
        return max(folds)

    def _fold(self, candidate: CalibratedForecaster, calibrate: np.ndarray, score: np.ndarray, width: int) -> float:
        offsets, short = conformal_offsets(calibrate, candidate.model.base_levels, self.quantiles, width)
        if short < width:
            return float("inf")
        losses = []
        for i, level in enumerate(self.quantiles):
            # residual = actual - base, so actual - (base + offset) = residual - offset
            k = nearest_base(candidate.model.base_levels, level)
            losses.append(pinball(score[k], offsets[i][None, :], level))
        stacked = np.stack(losses)
        if np.isnan(stacked).all():
            return float("inf")
        return float(np.nanmean(stacked))

    def predict(self, recent: pd.DataFrame, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        size = self._step_ns or step_ns(timedelta(minutes=5))
        panel = to_panel(recent, timedelta(microseconds=size // 1000))
        block = self.forecast_panel(panel, horizon, tuple(quantiles))
        return forecast_frame(block.uids, block.end_ns, size, block.values, block.models, block.notes, quantiles)

    def forecast_panel(self, recent: Mapping[str, SeriesData], horizon: int, levels: tuple[float, ...]) -> Block:
        uids = sorted(recent)
        size = self._step_ns or (next(iter(recent.values())).step_ns if recent else 1)
        keep = max(c.context_steps(size) for c in self.candidates.values()) + 1
        windows = {uid: merge(self._tails.get(uid), recent[uid], keep) for uid in uids}
        groups: dict[str, list[str]] = {}
        for uid in uids:
            groups.setdefault(self.choice.get(uid, self.baseline), []).append(uid)
        block = Block(
            uids,
            [windows[u].end_ns for u in uids],
            np.full((len(uids), len(levels), horizon), np.nan),
            [""] * len(uids),
            [""] * len(uids),
        )
        position = {uid: i for i, uid in enumerate(uids)}
        for name, members in groups.items():
            part = self.candidates[name].forecast_windows({u: windows[u] for u in members}, horizon, levels)
            for j, uid in enumerate(part.uids):
                i = position[uid]
                block.values[i], block.models[i] = part.values[j], part.models[j]
                chosen = "new series, not yet selected" if uid not in self.choice else f"selected {name}"
                block.notes[i] = f"auto: {chosen}" + (f"; {part.notes[j]}" if part.notes[j] else "")
        return block

"""Choosing a model per demand class by rolling-origin backtest on recent history: the ``auto`` forecaster.

Every candidate keeps residuals of its forecasts from many recent origins (its calibration window). Selection
splits those origins in time: offsets are calibrated on one half and the calibrated quantiles are scored
(pinball loss over the configured quantiles and the selection horizon) on the other, both ways round, for each
series; a candidate's score is its worse fold. Besides the candidates themselves, equal-weight combinations of
two of them (the average of their calibrated quantiles) are scored the same way. The best wins only if it beats
the calibrated last value by ``margin`` (5%); otherwise the last value runs, so selection falls back rather than
loses. Each forecast row's note records the choice, its score and the runner-up's (scores are pinball losses on
the scoring folds, lower is better). Selection reads only stored residuals and re-runs every
``reselect_interval`` (and for any series not yet chosen); between reselections a fit only recalibrates. Each
candidate retrains on its own, slower schedule.
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

JOIN = "+"  # a combination is named after its parts: "lightgbm+naive"


class AutoForecaster:
    """Per-series choice among calibrated candidates and their pairwise combinations; ``baseline`` wins ties."""

    name = "auto"

    def __init__(
        self,
        candidates: Sequence[CalibratedForecaster],
        *,
        baseline: str = "naive",
        quantiles: Sequence[float] = (0.5, 0.9, 0.95),
        selection_horizon: timedelta = timedelta(hours=1),
        margin: float = 0.05,
        combinations: Sequence[tuple[str, str]] = (),
        reselect_interval: timedelta = timedelta(hours=1),
    ) -> None:
        self.candidates = {c.name: c for c in candidates}
        if baseline not in self.candidates:
            raise ValueError(f"auto needs its baseline {baseline!r} among the candidates {sorted(self.candidates)}")
        unknown = [p for pair in combinations for p in pair if p not in self.candidates]
        if unknown:
            raise ValueError(f"combinations name models that are not candidates: {unknown}")
        self.baseline = baseline
        self.quantiles = tuple(quantiles)
        self.selection_horizon = selection_horizon
        self.margin = margin
        self.combinations = tuple(combinations)
        self.reselect_interval = reselect_interval
        self._selected_end_ns: int | None = None
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
        if not panel:
            return self
        end = max(s.end_ns for s in panel.values())
        due = (
            self._selected_end_ns is None or end - self._selected_end_ns >= self.reselect_interval.total_seconds() * 1e9
        )
        horizon = max(1, round(self.selection_horizon.total_seconds() * 1e9 / size))
        for uid in panel:
            if due or uid not in self.choice:
                self.scores[uid] = self._scores(uid, horizon)
                self.choice[uid] = self._choose(self.scores[uid])
        if due:
            self._selected_end_ns = end
        return self

    def _choose(self, scores: Mapping[str, float]) -> str:
        bar = scores.get(self.baseline, float("inf"))
        best = min(scores, key=lambda n: scores[n])
        good = np.isfinite(scores[best]) and (not np.isfinite(bar) or scores[best] < bar * (1.0 - self.margin))
        return best if good else self.baseline

    def _scores(self, uid: str, horizon: int) -> dict[str, float]:
        """Worse-fold pinball loss of every candidate and combination that has enough shared residual origins."""
        scores = {name: float("inf") for name in self.candidates}
        usable = {}
        for name, candidate in self.candidates.items():
            residuals = candidate.residuals(uid)
            if not candidate.train_note(uid) and residuals is not None and residuals.count >= 2 * MIN_RESIDUALS:
                usable[name] = residuals
        if not usable:
            return scores
        shared = np.asarray(sorted(set.intersection(*(set(r.origins_ns.tolist()) for r in usable.values()))))
        if len(shared) < 2 * MIN_RESIDUALS:
            return scores
        half = len(shared) // 2
        folds = (shared[:half], shared[half:])
        errors: dict[str, list[np.ndarray | None]] = {}
        for name, residuals in usable.items():
            width = min(horizon, residuals.values.shape[2])
            masks = [np.isin(residuals.origins_ns, f) for f in folds]
            blocks = [residuals.normalized()[:, m, :width] for m in masks]
            scales = [residuals.scales[m] for m in masks]
            candidate = self.candidates[name]
            errors[name] = [
                self._errors(
                    blocks[1 - i], blocks[i], scales[i], candidate.model.base_levels, width, candidate.offset_bases
                )
                for i in (0, 1)
            ]
            scores[name] = self._loss(errors[name])
        for first, second in self.combinations:
            if first in errors and second in errors:
                mixed = [_mean_pair(a, b) for a, b in zip(errors[first], errors[second], strict=True)]
                scores[first + JOIN + second] = self._loss(mixed)
        return scores

    def _errors(
        self,
        calibrate: np.ndarray,
        score: np.ndarray,
        scales: np.ndarray,
        base_levels: Sequence[float],
        width: int,
        offset_bases: bool = True,
    ) -> np.ndarray | None:
        """Outcome minus calibrated forecast on the scoring fold, shape (levels, origins, steps); None if unusable.

        Both folds hold residuals divided by their origin's scale; a residual is outcome minus base, so outcome
        minus (base + scale x offset) is scale x (normalized residual minus offset). A candidate that forecasts
        its base levels without offsets is scored without them at those levels.
        """
        offsets, short = conformal_offsets(calibrate, base_levels, self.quantiles, width)
        if short < width:
            return None
        if not offset_bases:  # the candidate forecasts its base quantiles as they are: score them that way
            offsets[[q in base_levels for q in self.quantiles]] = 0.0
        picked = [
            (score[nearest_base(base_levels, q)] - offsets[i][None, :]) * scales[:, None]
            for i, q in enumerate(self.quantiles)
        ]
        return np.stack(picked)

    def _loss(self, folds: Sequence[np.ndarray | None]) -> float:
        losses = []
        for errors in folds:
            if errors is None or np.isnan(errors).all():
                return float("inf")
            per_level = [pinball(errors[i], np.zeros(1), q) for i, q in enumerate(self.quantiles)]
            losses.append(float(np.nanmean(np.stack(per_level))))
        return max(losses)

    def evidence(self, uid: str) -> str:
        """Why a series runs what it runs: the choice, its backtest score, the runner-up's and the baseline's."""
        choice = self.choice.get(uid, self.baseline)
        scores = self.scores.get(uid, {})
        ranked = sorted((n for n in scores if np.isfinite(scores[n])), key=lambda n: scores[n])
        if choice not in ranked:
            return f"selected {choice} (no candidate scored)"
        parts = [f"selected {choice} (score {scores[choice]:.4g}"]
        runner = next((n for n in ranked if n != choice), None)
        if runner is not None:
            parts.append(f"runner-up {runner} {scores[runner]:.4g}")
        if self.baseline not in (choice, runner) and self.baseline in ranked:
            parts.append(f"{self.baseline} {scores[self.baseline]:.4g}")
        return ", ".join(parts) + ")"

    def predict(self, recent: pd.DataFrame, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        size = self._step_ns or step_ns(timedelta(minutes=5))
        panel = to_panel(recent, timedelta(microseconds=size // 1000))
        block = self.forecast_panel(panel, horizon, tuple(quantiles))
        return forecast_frame(
            block.uids, block.end_ns, size, block.values, block.models, block.notes, quantiles, block.peaks
        )

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
            np.full((len(uids), len(levels), horizon), np.nan),
        )
        needed: dict[str, list[str]] = {}
        for choice, members in groups.items():
            for name in choice.split(JOIN):
                needed.setdefault(name, []).extend(members)
        runs = {
            name: self.candidates[name].forecast_windows({u: windows[u] for u in members}, horizon, levels)
            for name, members in needed.items()
        }
        rows = {name: {uid: j for j, uid in enumerate(run.uids)} for name, run in runs.items()}
        peaks = {name: run.peaks_or_running_max() for name, run in runs.items()}
        for i, uid in enumerate(uids):
            choice = self.choice.get(uid, self.baseline)
            parts = [(runs[name], rows[name][uid]) for name in choice.split(JOIN)]
            block.values[i] = np.mean([run.values[j] for run, j in parts], axis=0)
            assert block.peaks is not None
            block.peaks[i] = np.mean([peaks[name][rows[name][uid]] for name in choice.split(JOIN)], axis=0)
            block.models[i] = JOIN.join(run.models[j] for run, j in parts)
            chosen = "new series, not yet selected" if uid not in self.choice else self.evidence(uid)
            detail = "; ".join(run.notes[j] for run, j in parts if run.notes[j])
            block.notes[i] = f"auto: {chosen}" + (f"; {detail}" if detail else "")
        return block


def _mean_pair(first: np.ndarray | None, second: np.ndarray | None) -> np.ndarray | None:
    """Errors of the average of two calibrated forecasts: the average of their errors."""
    if first is None or second is None or first.shape != second.shape:
        return None
    return np.asarray((first + second) / 2.0)

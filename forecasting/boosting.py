"""LightGBM: one global model across series, direct multi-horizon, one quantile objective per base level.

Trained with ``lgb.train`` (no scikit-learn needed) on rows sampled from every series: each row is (series,
origin, steps ahead) with the features of ``forecasting.features``; the step count is a feature, so a single
booster per quantile answers every horizon directly (no recursion). Raw quantiles of a boosted model
under-cover, so the calibrated forecaster wrapping this corrects them on recent residuals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import lightgbm as lgb
import numpy as np

from forecasting.features import FEATURE_NAMES, MINUTE_NS, context_steps, origin_rows
from forecasting.paths import DAY_NS, PathRequest
from forecasting.series import SeriesData

TRAIN_AHEAD_MINUTES = (1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120)
PARAMS: dict[str, Any] = {
    "objective": "quantile",
    "learning_rate": 0.08,
    "num_leaves": 31,
    "min_data_in_leaf": 200,
    "feature_fraction": 0.9,
    "bagging_fraction": 0.7,
    "bagging_freq": 1,
    "max_bin": 63,
    "lambda_l2": 1.0,
    "num_threads": 2,
    "verbose": -1,
    "seed": 7,
    "deterministic": True,
}


class LightGbmPaths:
    """A global LightGBM quantile model; ``base_levels`` are the quantiles it is trained for."""

    def __init__(
        self,
        base_levels: Sequence[float] = (0.5, 0.9, 0.95),
        rounds: int = 120,
        max_rows: int = 120_000,
        seed: int = 7,
    ) -> None:
        self.base_levels = tuple(sorted(set(base_levels)))
        self.rounds = rounds
        self.max_rows = max_rows
        self.seed = seed
        self._boosters: list[lgb.Booster] = []

    def context_steps(self, step_ns: int) -> int:
        return context_steps(step_ns)

    def train(self, panel: Mapping[str, SeriesData]) -> dict[str, str]:
        self._boosters = []
        if not panel:
            return {}
        step = next(iter(panel.values())).step_ns
        ahead = np.unique([max(1, round(m * MINUTE_NS / step)) for m in TRAIN_AHEAD_MINUTES])
        x, y, notes = self._training_rows(panel, ahead)
        if len(y) < 500:
            return {uid: "too little history to train the global model" for uid in panel}
        data = lgb.Dataset(x, label=y, feature_name=list(FEATURE_NAMES), free_raw_data=True)
        for level in self.base_levels:
            params = {**PARAMS, "alpha": level, "seed": self.seed}
            self._boosters.append(lgb.train(params, data, num_boost_round=self.rounds))
        return notes

    def _training_rows(
        self, panel: Mapping[str, SeriesData], ahead: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, dict[str, str]]:
        rng = np.random.default_rng(self.seed)
        per_series = max(1, self.max_rows // (len(panel) * len(ahead)))
        xs, ys, notes = [], [], {}
        for uid, series in panel.items():
            warmup = DAY_NS // series.step_ns  # the scale needs a day behind the origin
            last_origin = len(series.y) - 1 - int(ahead[-1])
            if last_origin <= warmup:
                notes[uid] = "less than a day of history: not in the global model's training"
                continue
            candidates = np.arange(warmup, last_origin + 1)
            origins = np.sort(rng.choice(candidates, size=min(per_series, len(candidates)), replace=False))
            rows = origin_rows(series, origins, ahead)
            target = series.y[origins[:, None] + ahead[None, :]]
            label = ((target - rows.last[:, None]) / rows.scale[:, None]).reshape(-1)
            keep = np.isfinite(label) & np.repeat(np.isfinite(rows.last), len(ahead))
            xs.append(rows.features[keep])
            ys.append(label[keep])
        if not ys:
            return np.empty((0, len(FEATURE_NAMES))), np.empty(0), notes
        return np.concatenate(xs), np.concatenate(ys), notes

    def paths(self, requests: Sequence[PathRequest], horizon: int) -> list[np.ndarray]:
        if not self._boosters:
            return [np.full((len(self.base_levels), len(o), horizon), np.nan) for _, o in requests]
        ahead = np.arange(1, horizon + 1)
        parts = [origin_rows(series, origins, ahead) for series, origins in requests]
        if not parts:
            return []
        x = np.concatenate([p.features for p in parts])
        predictions = np.stack([b.predict(x, num_threads=1) for b in self._boosters])  # (bases, rows)
        out, row = [], 0
        for part in parts:
            n_o = len(part.last)
            block = predictions[:, row : row + n_o * horizon].reshape(len(self._boosters), n_o, horizon)
            out.append(part.last[None, :, None] + block * part.scale[None, :, None])
            row += n_o * horizon
        return out

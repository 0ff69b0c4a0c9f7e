"""LightGBM: one global model across series, direct multi-horizon, one quantile objective per base level.

Trained with ``lgb.train`` (no scikit-learn needed) on rows sampled from every series: each row is (series,
origin, steps ahead) with the features of ``forecasting.features``; the step count is a feature, so a single
booster per quantile answers every horizon directly (no recursion). Raw quantiles of a boosted model
under-cover, so the calibrated forecaster wrapping this corrects them on recent residuals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from forecasting.features import FEATURE_NAMES, MINUTE_NS, Rows, context_steps, feature_rows
from forecasting.paths import DAY_NS, PathRequest
from forecasting.series import SeriesData

if TYPE_CHECKING:
    import lightgbm as lgb

TRAIN_AHEAD_MINUTES = (1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120)
PARAMS: dict[str, Any] = {
    "objective": "quantile",
    "learning_rate": 0.1,
    "num_leaves": 15,
    "min_data_in_leaf": 200,
    "feature_fraction": 0.9,
    "bagging_fraction": 0.7,
    "bagging_freq": 1,
    "max_bin": 63,
    "lambda_l2": 1.0,
    "num_threads": 1,  # two threads on a busy 2-core machine ran 5x slower than one
    "verbose": -1,
    "seed": 7,
    "deterministic": True,
}


class LightGbmPaths:
    """A global LightGBM quantile model; ``base_levels`` are the quantiles it is trained for."""

    def __init__(
        self,
        base_levels: Sequence[float] = (0.5, 0.9, 0.95),
        rounds: int = 100,
        max_rows: int = 60_000,
        seed: int = 7,
    ) -> None:
        self.base_levels: tuple[float, ...] = tuple(sorted(set(base_levels)))
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
            return dict.fromkeys(panel, "too little history to train the global model")
        import lightgbm as lgb  # slow import, needed only once a model trains

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
        chosen: list[tuple[SeriesData, np.ndarray]] = []
        notes = {}
        for uid, series in panel.items():
            warmup = DAY_NS // series.step_ns  # the scale needs a day behind the origin
            last_origin = len(series.y) - 1 - int(ahead[-1])
            if last_origin <= warmup:
                notes[uid] = "less than a day of history: not in the global model's training"
                continue
            candidates = np.arange(warmup, last_origin + 1)
            chosen.append(
                (series, np.sort(rng.choice(candidates, size=min(per_series, len(candidates)), replace=False)))
            )
        if not chosen:
            return np.empty((0, len(FEATURE_NAMES))), np.empty(0), notes
        rows, valid = _rows(chosen, ahead)
        targets = []
        for series, origins in chosen:
            padded = np.full(valid.shape[1], -1)
            padded[: len(origins)] = origins
            target = np.where(
                padded[:, None] >= 0, series.y[np.clip(padded, 0, None)[:, None] + ahead[None, :]], np.nan
            )
            targets.append(target)
        label = ((np.stack(targets) - rows.last[:, :, None]) / rows.scale[:, :, None]).reshape(-1)
        keep = np.isfinite(label) & np.repeat(np.isfinite(rows.last).reshape(-1), len(ahead))
        return rows.features[keep], label[keep], notes

    def paths(self, requests: Sequence[PathRequest], horizon: int) -> list[np.ndarray]:
        if not self._boosters:
            return [np.full((len(self.base_levels), len(o), horizon), np.nan) for _, o in requests]
        if not requests:
            return []
        ahead = np.arange(1, horizon + 1)
        rows, valid = _rows(requests, ahead)
        predictions = np.stack([b.predict(rows.features, num_threads=1) for b in self._boosters])
        n_s, n_o = valid.shape
        block = predictions.reshape(len(self._boosters), n_s, n_o, horizon)
        values = rows.last[None, :, :, None] + block * rows.scale[None, :, :, None]
        return [values[:, i, : len(origins), :] for i, (_, origins) in enumerate(requests)]


def _rows(requests: Sequence[PathRequest], ahead: np.ndarray) -> tuple[Rows, np.ndarray]:
    """Feature rows for several series at once: series padded with NaN to one length, origins to one count."""
    length = max(len(series.y) for series, _ in requests)
    count = max(len(origins) for _, origins in requests)
    values = np.full((len(requests), length), np.nan)
    origins = np.zeros((len(requests), count), dtype=np.int64)
    valid = np.zeros((len(requests), count), dtype=bool)
    for i, (series, own) in enumerate(requests):
        values[i, : len(series.y)] = series.y
        origins[i, : len(own)] = own
        origins[i, len(own) :] = own[-1] if len(own) else 0
        valid[i, : len(own)] = True
    start = np.array([series.start_ns for series, _ in requests], dtype=np.int64)
    step = requests[0][0].step_ns
    return feature_rows(values, start, step, origins, ahead), valid

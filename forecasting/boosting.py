"""LightGBM: global quantile models, one booster per horizon and quantile level, trained on every series at once.

Each booster is trained with ``lgb.train`` (no scikit-learn needed) and ``objective="quantile"`` directly at its
level, on rows (series, origin) from all series together, with the features of ``forecasting.features``. The
target is the change from the last observed value to the value ``h`` steps ahead divided by the series' mean
level, so ``last + scale * prediction`` is the forecast. Boosters are trained at a ladder of horizons (5 minutes
to 2 hours); steps in between are interpolated linearly and steps beyond the ladder repeat its last rung.
Training uses every origin of the history it is given (sampled down to ``max_rows`` per booster), so a daily
retrain learns from all history before the retrain point. The boosters of one retrain are independent: they are
trained on two threads (each booster single-threaded and deterministic, so the models do not depend on which
thread trains them; LightGBM runs without the interpreter lock).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from forecasting.features import FEATURE_NAMES, MINUTE_NS, SeriesFeatures, context_steps, mean_level
from forecasting.paths import PathRequest
from forecasting.series import SeriesData

if TYPE_CHECKING:
    import lightgbm as lgb

TRAIN_AHEAD_MINUTES = (5, 10, 15, 30, 45, 60, 90, 120)
MIN_TRAIN_STEPS = 12  # an origin needs this much history behind it to be a training row
# Fewer training rows than this for a horizon and the model does not train (every series falls back): 15 leaves
# of at least 300 rows need 4,500 rows to grow at all, and the 0.9 quantile of so few rows is noise. On two
# LLM-serving series of 10 days (about 2,800 rows) the model lost to the calibrated last value by 0.5-14%.
MIN_ROWS = 10_000
MAX_ROWS = 60_000  # training rows per booster, sampled from every origin of the history
TRAINING_THREADS = 2  # boosters trained at once, each on one thread
PARAMS: dict[str, Any] = {
    "objective": "quantile",
    "learning_rate": 0.05,
    # Smaller trees on larger leaves than 31 of at least 100: on the Helios tenants' last week the q0.9 loss went
    # from 0.849 / 0.931 / 0.938 of the calibrated last value to 0.821 / 0.862 / 0.857 at 15 / 30 / 60 minutes
    # (coverage 0.940 -> 0.951), the tenants' total from 0.954 / 0.918 / 0.933 to 0.912 / 0.872 / 0.890.
    "num_leaves": 15,
    "min_data_in_leaf": 300,
    "feature_fraction": 0.9,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "num_threads": 1,  # two OpenMP threads on a busy 2-core machine ran 5x slower than one
    "verbose": -1,
    "deterministic": True,
    # LightGBM otherwise picks its histogram layout by timing both at the start of each training, which a busy
    # machine can tip; its parameter reference asks for a forced layout with ``deterministic``. On the bundled
    # trace's first week the boosters are the same tree for tree under either layout and under the timed choice.
    "force_col_wise": True,
}


def ahead_minutes_within(horizon_minutes: float, minutes: Sequence[int] = TRAIN_AHEAD_MINUTES) -> tuple[int, ...]:
    """The rungs a caller that forecasts at most ``horizon_minutes`` ahead needs: those below it and the first at
    or beyond it (beyond the ladder the last rung repeats), so no booster is trained for a horizon never asked."""
    below = [m for m in minutes if m < horizon_minutes]
    at_or_beyond = next((m for m in minutes if m >= horizon_minutes), minutes[-1])
    return tuple(sorted({*below, at_or_beyond}))


def ladder(step_ns: int, minutes: Sequence[int] = TRAIN_AHEAD_MINUTES) -> np.ndarray:
    """The steps ahead boosters are trained for: always one step, then each of ``minutes`` in steps."""
    return np.unique([1, *(max(1, round(m * MINUTE_NS / step_ns)) for m in minutes)])


class LightGbmPaths:
    """A global LightGBM quantile model; ``base_levels`` are the quantiles it is trained for."""

    def __init__(
        self,
        base_levels: Sequence[float] = (0.5, 0.9, 0.95),
        rounds: int = 300,
        max_rows: int = MAX_ROWS,
        seed: int = 7,
        ahead_minutes: Sequence[int] = TRAIN_AHEAD_MINUTES,
        min_rows: int = MIN_ROWS,
    ) -> None:
        self.base_levels: tuple[float, ...] = tuple(sorted(set(base_levels)))
        self.rounds = rounds
        self.max_rows = max_rows
        self.seed = seed
        self.ahead_minutes = tuple(ahead_minutes)
        self.min_rows = min_rows
        self._boosters: dict[int, list[lgb.Booster]] = {}
        self._scales: dict[str, float] = {}

    def context_steps(self, step_ns: int) -> int:
        return context_steps(step_ns)

    def train(self, panel: Mapping[str, SeriesData]) -> dict[str, str]:
        self._boosters = {}
        self._scales = {}
        notes: dict[str, str] = {}
        prepared: list[tuple[SeriesFeatures, int]] = []  # (series, number of steps)
        for uid, series in panel.items():
            if int(np.sum(~np.isnan(series.y))) <= MIN_TRAIN_STEPS:
                notes[uid] = "too little history to be in the global model's training"
                continue
            self._scales[uid] = mean_level(series.y)
            prepared.append(
                (SeriesFeatures(series.y, series.start_ns, series.step_ns, self._scales[uid]), len(series.y))
            )
        if not prepared:
            return notes
        import lightgbm as lgb  # slow import, needed only once a model trains

        rng = np.random.default_rng(self.seed)
        rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for ahead in ladder(prepared[0][0].step_ns, self.ahead_minutes):
            x, y = self._training_rows(prepared, int(ahead), rng)
            if len(y) < self.min_rows:
                return dict.fromkeys(panel, f"too little history to train the global model ({len(y)} rows)")
            rows[int(ahead)] = (x, y)

        def fit(ahead: int, level: float) -> lgb.Booster:
            x, y = rows[ahead]  # a Dataset of its own: boosters trained at once share nothing mutable
            data = lgb.Dataset(x, label=y, feature_name=list(FEATURE_NAMES), free_raw_data=True)
            return lgb.train({**PARAMS, "alpha": level, "seed": self.seed}, data, num_boost_round=self.rounds)

        with ThreadPoolExecutor(max_workers=TRAINING_THREADS) as pool:
            jobs = {ahead: [pool.submit(fit, ahead, level) for level in self.base_levels] for ahead in rows}
            self._boosters = {ahead: [job.result() for job in boosters] for ahead, boosters in jobs.items()}
        return notes

    def _training_rows(
        self, prepared: Sequence[tuple[SeriesFeatures, int]], ahead: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Every origin whose last value and outcome ``ahead`` steps later are observed, sampled to ``max_rows``."""
        candidates = []
        for i, (features, length) in enumerate(prepared):
            origins = np.arange(MIN_TRAIN_STEPS, length - ahead)
            ok = ~np.isnan(features.filled[origins]) & ~np.isnan(features.y[origins + ahead])
            candidates.append(np.stack([np.full(int(ok.sum()), i), origins[ok]], axis=1))
        pairs = np.concatenate(candidates) if candidates else np.empty((0, 2), dtype=np.int64)
        if len(pairs) > self.max_rows:
            pairs = pairs[np.sort(rng.choice(len(pairs), size=self.max_rows, replace=False))]
        xs, ys = [], []
        for i, (features, _) in enumerate(prepared):
            origins = pairs[pairs[:, 0] == i, 1]
            if len(origins):
                x, last = features.rows(origins, ahead)
                xs.append(x)
                ys.append((features.y[origins + ahead] - last) / features.scale)
        if not xs:
            return np.empty((0, len(FEATURE_NAMES))), np.empty(0)
        return np.concatenate(xs), np.concatenate(ys)

    def _scale(self, series: SeriesData, origins: np.ndarray) -> float:
        """The training's mean level of the series; for a series it never saw, the mean up to the first origin."""
        known = self._scales.get(series.uid)
        if known is not None:
            return known
        return mean_level(series.y[: int(origins.min()) + 1] if len(origins) else series.y[:0])

    def paths(self, requests: Sequence[PathRequest], horizon: int) -> list[np.ndarray]:
        if not self._boosters or not requests or horizon <= 0:
            return [np.full((len(self.base_levels), len(o), max(horizon, 0)), np.nan) for _, o in requests]
        rungs = sorted(self._boosters)
        used = [r for r in rungs if r < horizon] + [next((r for r in rungs if r >= horizon), rungs[-1])]
        prepared = [SeriesFeatures(s.y, s.start_ns, s.step_ns, self._scale(s, o)) for s, o in requests]
        bounds = np.cumsum([0, *(len(o) for _, o in requests)])
        by_rung = np.empty((len(self.base_levels), int(bounds[-1]), len(used)))
        rows, last_parts = [], []
        for features, (_, origins) in zip(prepared, requests, strict=True):
            common, last = features.common(origins)  # computed once for every rung
            rows.append(features.for_ahead(common, origins, last, np.asarray(used)))
            last_parts.append(last)
        lasts = np.concatenate(last_parts)
        xs = np.concatenate(rows, axis=1)  # (rungs, rows, features)
        for j, rung in enumerate(used):
            for k, booster in enumerate(self._boosters[rung]):
                by_rung[k, :, j] = booster.predict(xs[j], num_threads=1)
        steps = np.arange(1, horizon + 1)
        scaled = np.stack(
            [np.stack([np.interp(steps, used, row) for row in by_rung[k]]) for k in range(len(self.base_levels))]
        ).reshape(len(self.base_levels), int(bounds[-1]), horizon)
        scales = np.concatenate([np.full(len(o), f.scale) for f, (_, o) in zip(prepared, requests, strict=True)])
        values = lasts[None, :, None] + scaled * scales[None, :, None]
        values = np.maximum.accumulate(values, axis=0)  # quantiles that never cross
        return [values[:, bounds[i] : bounds[i + 1], :] for i in range(len(requests))]

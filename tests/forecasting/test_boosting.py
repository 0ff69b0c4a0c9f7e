"""The global LightGBM quantile model: no look-ahead, calibrated quantiles, one booster per horizon and level."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from forecasting.boosting import TRAIN_AHEAD_MINUTES, LightGbmPaths, ahead_minutes_within, ladder
from forecasting.calibrated import CalibratedForecaster
from forecasting.features import FEATURE_NAMES, SeriesFeatures
from forecasting.paths import PathModel, PathRequest
from forecasting.series import SeriesData, step_ns
from tests.forecasting.clairvoyant import Clairvoyant
from tests.forecasting.conftest import DAY, START, STEP, bursty, long_frame

SIZE = step_ns(STEP)
START_NS = START.value


def _panel(days: float, names: Sequence[str] = ("a", "b", "c")) -> dict[str, SeriesData]:
    n = int(days * DAY)
    return {
        uid: SeriesData(uid, START_NS, SIZE, bursty(n, seed=i + 1, level=20.0 * (i + 1))) for i, uid in enumerate(names)
    }


def sees_the_future(model: PathModel, series: SeriesData, origins: Sequence[int], horizon: int) -> list[int]:
    """Origins whose forecast changes when everything after the origin is replaced: each must be none."""
    rng = np.random.default_rng(3)
    leaked = []
    for origin in origins:
        changed = series.y.copy()
        changed[origin + 1 :] = rng.uniform(0, 500, len(changed) - origin - 1)
        other = SeriesData(series.uid, series.start_ns, series.step_ns, changed)
        at = np.array([origin])
        before = model.paths([(series, at)], horizon)[0]
        after = model.paths([(other, at)], horizon)[0]
        if not np.allclose(before, after, equal_nan=True):
            leaked.append(origin)
    return leaked


def test_a_model_that_sees_the_target_is_caught() -> None:
    series = _panel(2)["a"]
    assert sees_the_future(Clairvoyant(), series, [300, 400], 6) == [300, 400]


def test_the_global_model_never_looks_past_the_origin() -> None:
    panel = _panel(9)
    model = LightGbmPaths((0.5, 0.9), rounds=20, min_rows=500)
    model.train({uid: s.until(START_NS + 7 * DAY * SIZE) for uid, s in panel.items()})
    origins = [7 * DAY + 10, 8 * DAY + 100]
    assert sees_the_future(model, panel["b"], origins, 12) == []
    # A series the training never saw is scaled by its own history up to the origin, not by its future.
    stranger = SeriesData("new", START_NS, SIZE, panel["c"].y * 3.0)
    assert sees_the_future(model, stranger, origins, 12) == []


def test_features_at_an_origin_read_nothing_after_it() -> None:
    y = bursty(9 * DAY, seed=5)
    origins = np.array([8 * DAY, 8 * DAY + 50])
    changed = y.copy()
    changed[8 * DAY + 1 :] += 100.0
    for ahead in (1, 6, 24):
        x, _ = SeriesFeatures(y, START_NS, SIZE, 40.0).rows(origins[:1], ahead)
        x_changed, _ = SeriesFeatures(changed, START_NS, SIZE, 40.0).rows(origins[:1], ahead)
        np.testing.assert_array_equal(x, x_changed)
    assert x.shape == (1, len(FEATURE_NAMES))


def test_one_booster_per_rung_and_level_and_quantiles_that_hold() -> None:
    panel = _panel(10)
    cut = START_NS + 8 * DAY * SIZE
    model = LightGbmPaths((0.5, 0.9), rounds=60, min_rows=500)
    notes = model.train({uid: s.until(cut) for uid, s in panel.items()})
    assert notes == {}
    assert sorted(model._boosters) == ladder(SIZE).tolist() == [1, 2, 3, 6, 9, 12, 18, 24]
    assert all(len(b) == 2 for b in model._boosters.values())
    origins = np.arange(8 * DAY, 10 * DAY - 12, 3)
    hits = []
    for series in panel.values():
        (path,) = model.paths([(series, origins)], 12)
        assert path.shape == (2, len(origins), 12)
        assert np.all(path[1] >= path[0])  # the 0.9 quantile never below the median
        outcome = series.y[origins[:, None] + np.arange(1, 13)[None, :]]
        hits.append((outcome <= path[1]).mean())
    assert 0.8 <= float(np.mean(hits)) <= 0.97


def test_too_little_history_is_said_per_series() -> None:
    panel = _panel(3)
    panel["short"] = SeriesData("short", START_NS, SIZE, np.full(10, 5.0))
    notes = LightGbmPaths((0.5,), rounds=5, min_rows=500).train(panel)
    assert set(notes) == {"short"}
    assert "too little history" in notes["short"]
    # Too few rows in all for a global model: every series says so (and falls back).
    notes = LightGbmPaths((0.5,), rounds=5).train(panel)
    assert set(notes) == set(panel)
    assert all("too little history to train the global model" in note for note in notes.values())


class FixedSpread:
    """Quantiles at fixed distances above the last value: 1 for the median, 5 for q0.9."""

    base_levels: tuple[float, ...] = (0.5, 0.9)

    def context_steps(self, step_ns: int) -> int:
        return 2

    def train(self, panel: Mapping[str, SeriesData]) -> dict[str, str]:
        return {}

    def paths(self, requests: Sequence[PathRequest], horizon: int) -> list[np.ndarray]:
        out = []
        for series, origins in requests:
            last = series.y[origins][None, :, None]
            out.append(np.repeat(last + np.array([1.0, 5.0])[:, None, None], horizon, axis=2))
        return out


def test_trained_quantiles_stand_without_offsets_when_asked() -> None:
    history = long_frame({"s": bursty(3 * DAY, seed=2)})
    recent = history.tail(40)
    last = float(history["y"].iloc[-1])
    as_trained = CalibratedForecaster("lightgbm", FixedSpread, offset_bases=False).fit(history, STEP)
    out = as_trained.predict(recent, 3, (0.5, 0.9))
    assert np.allclose(out["q0.5"], last + 1.0)
    assert np.allclose(out["q0.9"], last + 5.0)
    offset = CalibratedForecaster("lightgbm", FixedSpread).fit(history, STEP).predict(recent, 3, (0.5, 0.9))
    assert not np.allclose(offset["q0.9"], last + 5.0)  # the default recalibrates the same bases


def test_a_known_horizon_trains_only_the_rungs_it_needs() -> None:
    assert ahead_minutes_within(35) == (5, 10, 15, 30, 45)  # 30-minute lead plus a 5-minute tick
    assert ahead_minutes_within(10) == (5, 10)
    assert ahead_minutes_within(11) == (5, 10, 15)
    assert ahead_minutes_within(600) == TRAIN_AHEAD_MINUTES  # beyond the ladder: the whole ladder, last rung repeats

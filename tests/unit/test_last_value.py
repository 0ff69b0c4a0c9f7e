"""Last-value forecasters: calibrated spread, missing values, and short histories."""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import pandas as pd

from forecasting import LastValueForecaster, PersistenceForecaster

STEP = timedelta(minutes=5)


def frame(values: dict[str, np.ndarray]) -> pd.DataFrame:
    parts = []
    for uid, y in values.items():
        ds = pd.date_range("2024-01-01", periods=len(y), freq="5min", tz="UTC")
        parts.append(pd.DataFrame({"unique_id": uid, "ds": ds, "y": y}))
    return pd.concat(parts, ignore_index=True)


def test_upper_quantile_covers_about_its_level_on_a_random_walk() -> None:
    rng = np.random.default_rng(3)
    walk = 100 + np.cumsum(rng.normal(0, 2, 6000))
    model = LastValueForecaster(lookback=timedelta(days=14)).fit(frame({"a": walk[:4000]}), STEP)
    hits = 0
    origins = range(4000, 5990, 5)
    for origin in origins:
        out = model.predict(frame({"a": walk[origin - 3 : origin]}), 3, [0.5, 0.9])
        hits += walk[origin + 2] <= out["q0.9"].iloc[2]
    coverage = hits / len(origins)
    assert 0.85 <= coverage <= 0.95


def test_quantiles_grow_with_the_horizon_and_are_never_negative() -> None:
    rng = np.random.default_rng(5)
    y = np.abs(5 + np.cumsum(rng.normal(0, 1, 3000)))
    model = LastValueForecaster().fit(frame({"a": y}), STEP)
    out = model.predict(frame({"a": np.array([0.0])}), 6, [0.1, 0.9])
    assert (out["q0.1"] >= 0).all()
    assert out["q0.9"].is_monotonic_increasing


def test_missing_newest_value_uses_the_last_observed_one_and_all_missing_gives_nan() -> None:
    model = PersistenceForecaster().fit(frame({"a": np.ones(10)}), STEP)
    out = model.predict(frame({"a": np.array([4.0, math.nan]), "b": np.array([math.nan, math.nan])}), 2, [0.9])
    a = out[out.unique_id == "a"]
    b = out[out.unique_id == "b"]
    assert a["q0.9"].tolist() == [4.0, 4.0]
    assert b["q0.9"].isna().all() and "no observed value" in b["note"].iloc[0]


def test_short_history_falls_back_to_persistence_and_says_so() -> None:
    model = LastValueForecaster().fit(frame({"a": np.arange(10.0)}), STEP)
    out = model.predict(frame({"a": np.array([9.0])}), 2, [0.9])
    assert out["q0.9"].tolist() == [9.0, 9.0]
    assert "fewer than" in out["note"].iloc[0]

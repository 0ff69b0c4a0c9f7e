"""Seeded synthetic demand frames for the forecasting tests."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import numpy as np
import pandas as pd
import pytest

STEP = timedelta(minutes=5)
START = pd.Timestamp("2024-03-04T00:00:00Z")
DAY = 288


def long_frame(series: dict[str, np.ndarray], start: pd.Timestamp = START, step: timedelta = STEP) -> pd.DataFrame:
    parts = []
    for uid, y in series.items():
        ds = pd.date_range(start, periods=len(y), freq=step)
        parts.append(pd.DataFrame({"unique_id": uid, "ds": ds, "y": y}))
    return pd.concat(parts, ignore_index=True)


def bursty(n: int, seed: int, level: float = 40.0) -> np.ndarray:
    """Step-like demand: mostly flat, jumps when jobs start or finish, a daily swing."""
    rng = np.random.default_rng(seed)
    jumps = rng.choice([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 4.0, -4.0, 8.0, -8.0], size=n) * (rng.random(n) < 0.2)
    walk = np.cumsum(jumps)
    daily = 10.0 * np.sin(2 * np.pi * np.arange(n) / DAY)
    return np.maximum(level + walk - float(walk.mean()) + daily, 0.0)


@pytest.fixture
def make_history() -> Callable[..., pd.DataFrame]:
    def build(days: float = 4, names: tuple[str, ...] = ("a", "b", "c")) -> pd.DataFrame:
        n = int(days * DAY)
        return long_frame({uid: bursty(n, seed=i + 1, level=20.0 * (i + 1)) for i, uid in enumerate(names)})

    return build

"""The Forecaster interface.

Frames are long, in the Nixtla layout: ``unique_id, ds, y`` in (``ds`` tz-aware UTC, regular steps, NaN where
a value is missing). ``predict`` returns one row per series and horizon step with columns ``unique_id, ds,
model, note`` and one column per quantile named by ``quantile_column`` (``q0.9``). ``model`` names what actually
produced the row (a fallback names itself) and ``note`` says why, when that is not the configured model. A
forecaster that calibrates the peak of demand also returns ``peak_column`` (``peak_q0.9``): at step ``h``, the
quantile of the highest demand over steps 1 to ``h``.

``fit`` learns from a long history and returns ``self``; ``predict`` is cheap and takes the newest observations
(at least ``min_history_steps`` per series), so a tick never refits.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Protocol, Self

import pandas as pd


def quantile_column(level: float) -> str:
    """Column name of a quantile level: 0.9 -> ``q0.9``; 0.95 -> ``q0.95``."""
    return f"q{level:g}"


def peak_column(level: float) -> str:
    """Column name of the peak quantile of a level: 0.9 -> ``peak_q0.9``."""
    return f"peak_{quantile_column(level)}"


class Forecaster(Protocol):
    name: str

    @property
    def min_history_steps(self) -> int:
        """How many of the newest steps per series ``predict`` needs."""
        ...

    def fit(self, history: pd.DataFrame, step: timedelta) -> Self: ...

    def predict(self, recent: pd.DataFrame, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame: ...

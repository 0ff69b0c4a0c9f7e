"""The calibrated peak quantile never falls as the horizon grows: the peak over steps 1 to ``h + 1`` is at least the
peak over steps 1 to ``h``, at every level, the extrapolated tail levels (above what the residuals hold) included."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from forecasting.registry import build
from tests.forecasting.conftest import STEP

TRACE = Path(__file__).resolve().parents[2] / "data" / "helios-earth" / "demand_5min.csv.gz"
LEVELS = (0.5, 0.9, 0.95, 0.97, 0.99, 0.995, 0.999)
HORIZON = 7  # 35 minutes at 5-minute steps
# A tenant of the bundled Helios trace whose 0.999 peak fell with the horizon, by up to 39 chips at these origins.
SERIES = "earth/vc6YE"
FIT_FROM, FIT_UNTIL = pd.Timestamp("2020-05-02T22:30:00Z"), pd.Timestamp("2020-05-05T10:00:00Z")


def _helios() -> pd.DataFrame:
    frame = pd.read_csv(TRACE, usecols=["unique_id", "ds", "y"])
    frame = frame[frame["unique_id"] == SERIES].copy()
    frame["ds"] = pd.to_datetime(frame["ds"], utc=True)
    return frame[frame["ds"] >= FIT_FROM].reset_index(drop=True)


def test_the_peak_quantiles_never_fall_with_the_horizon_on_a_helios_tenant() -> None:
    frame = _helios()
    model = build("naive", horizon=timedelta(minutes=31))
    model.fit(frame[frame["ds"] < FIT_UNTIL], STEP)
    peaks = []
    for origin in pd.date_range(FIT_UNTIL, periods=12, freq="30min"):
        recent = frame[(frame["ds"] < origin) & (frame["ds"] >= origin - model.min_history_steps * STEP)]
        out = model.predict(recent, HORIZON, LEVELS)
        assert list(out["model"].unique()) == ["naive"], out["note"].unique()
        peaks.append(np.stack([out[f"peak_q{level:g}"].to_numpy() for level in LEVELS]))
    found = np.stack(peaks)  # (origins, levels, horizon)
    assert np.isfinite(found).all()
    falls = np.diff(found, axis=-1)
    worst = {f"q{level:g}": float(falls[:, k].min()) for k, level in enumerate(LEVELS)}
    assert (falls >= 0.0).all(), f"largest fall of the peak from one step to the next, by level: {worst}"
    # the peak at each step is never below the per-step quantile there (nor below any step's before it)
    per_step = np.stack([out[f"q{level:g}"].to_numpy() for level in LEVELS])
    assert (found[-1] >= np.maximum.accumulate(per_step, axis=-1) - 1e-9).all()

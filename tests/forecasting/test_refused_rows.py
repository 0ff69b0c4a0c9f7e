"""A model whose forecast the guards refuse at a base level, or below zero at the median or above, answers none of
the row: the calibrated last value answers it whole, under its own name. Only a level other than a base whose tail
reaches too high (a 0.999 extrapolated past the sane ceiling) is answered by the fallback alone."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd
import pytest

from forecasting.guards import row_problems
from forecasting.registry import build_calibrated

BASE = (0.5, 0.9, 0.95)


def _falling_to_30() -> pd.DataFrame:
    """Three days of a daily cycle around 200, falling to 30 over the last three hours: ets's damped trend carries
    its median below zero within the hour."""
    rng = np.random.default_rng(2)
    n = 3 * 288
    y = 200 + 60 * np.sin(2 * np.pi * np.arange(n) / 288) + rng.normal(0, 10, n)
    y[-36:] = np.linspace(y[-37], 30.0, 36) + rng.normal(0, 2, 36)
    ds = pd.date_range("2024-01-01", periods=n, freq="5min", tz="UTC")
    return pd.DataFrame({"unique_id": "a", "ds": ds, "y": y})


def test_a_median_below_zero_sends_the_whole_row_to_the_last_value() -> None:
    frame = _falling_to_30()
    ets = build_calibrated("ets", BASE, horizon=timedelta(minutes=60)).fit(frame, timedelta(minutes=5))
    naive = build_calibrated("naive", BASE, horizon=timedelta(minutes=60)).fit(frame, timedelta(minutes=5))
    recent = frame.tail(900)
    got, bar = ets.predict(recent, 12, BASE), naive.predict(recent, 12, BASE)
    assert (got["model"] == "naive").all()
    assert got["note"].str.contains("ets: forecast .* at the median or above is below zero").all()
    for column in ("q0.5", "q0.9", "q0.95", "peak_q0.9", "peak_q0.95"):
        assert np.array_equal(got[column].to_numpy(), bar[column].to_numpy()), column
    assert got["q0.9"].iloc[-1] > frame["y"].iloc[-1]  # not collapsed onto the fallback's median


@pytest.mark.parametrize(
    ("values", "levels", "row", "alone"),
    [
        # a median below zero refuses the row, whatever level it is found at
        ([[-20.0], [30.0], [35.0]], (0.5, 0.9, 0.95), True, {}),
        # a level between the bases below zero: the row too
        ([[10.0], [-20.0], [30.0], [35.0]], (0.5, 0.7, 0.9, 0.95), True, {}),
        # not finite at an extra level: the row
        ([[10.0], [np.nan], [30.0], [35.0]], (0.5, 0.7, 0.9, 0.95), True, {}),
        # a base too high: the row
        ([[10.0], [30.0], [900.0]], (0.5, 0.9, 0.95), True, {}),
        # an extra level too high: that level alone
        ([[10.0], [30.0], [35.0], [900.0]], (0.5, 0.9, 0.95, 0.999), False, {3}),
        # a low extra level a little below zero is clipped, not refused
        ([[-0.5], [10.0], [30.0], [35.0]], (0.1, 0.5, 0.9, 0.95), False, set()),
    ],
)
def test_which_failures_refuse_the_row(
    values: list[list[float]], levels: tuple[float, ...], row: bool, alone: set[int]
) -> None:
    refused, failed = row_problems(np.array(values), (0.0, 100.0), 20.0, levels, BASE)
    assert bool(refused) is row
    assert set(failed) == set(alone)

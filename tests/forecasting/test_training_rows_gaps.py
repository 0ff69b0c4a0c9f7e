"""The global model's training rows around a gap: no row's target is a missing step, and no feature reads a
missing step as zero (a step in a gap reads as the newest value observed before it)."""

from __future__ import annotations

import numpy as np
import pytest

from forecasting.boosting import MIN_TRAIN_STEPS, LightGbmPaths
from forecasting.features import FEATURE_NAMES, SeriesFeatures, mean_level
from forecasting.series import step_ns
from tests.forecasting.conftest import START, STEP, bursty

SIZE = step_ns(STEP)
GAP = slice(100, 104)  # four steps not scraped
LAST_BEFORE_GAP = 99


def _rows(y: np.ndarray, ahead: int) -> tuple[np.ndarray, np.ndarray, SeriesFeatures]:
    features = SeriesFeatures(y, START.value, SIZE, mean_level(y))
    x, target = LightGbmPaths(max_rows=10**9)._training_rows([(features, len(y))], ahead, np.random.default_rng(0))
    return x, target, features


@pytest.mark.parametrize("ahead", [1, 3, 12])
def test_no_row_has_a_missing_target(ahead: int) -> None:
    y = bursty(400, seed=5, level=30.0)
    y[GAP] = np.nan
    _, target, _ = _rows(y, ahead)
    origins = np.arange(MIN_TRAIN_STEPS, len(y) - ahead)
    observed = ~np.isnan(y[origins + ahead])
    assert not np.isnan(target).any()
    assert len(target) == int(observed.sum())  # each origin whose outcome is missing is left out, no other


def test_a_step_in_a_gap_reads_as_the_last_value_before_it_not_zero() -> None:
    y = bursty(400, seed=5, level=30.0)
    y[GAP] = np.nan
    assert y[LAST_BEFORE_GAP] > 1.0  # so that zero and the last value read differently
    x, _, features = _rows(y, 1)
    origins = np.arange(MIN_TRAIN_STEPS, len(y) - 1)
    kept = origins[~np.isnan(y[origins + 1])]
    first_after = GAP.stop
    row = x[int(np.flatnonzero(kept == first_after)[0])]
    last = y[first_after]
    for k in range(1, GAP.stop - GAP.start + 1):  # lag k of the first origin after the gap lies in the gap
        lag = row[FEATURE_NAMES.index(f"lag_{k}")] * features.scale + last
        assert lag == pytest.approx(y[LAST_BEFORE_GAP])
    # the origin inside the gap whose outcome is observed trains from the last value before the gap
    in_gap = x[int(np.flatnonzero(kept == GAP.stop - 1)[0])]
    assert in_gap[FEATURE_NAMES.index("level")] * features.scale == pytest.approx(y[LAST_BEFORE_GAP])

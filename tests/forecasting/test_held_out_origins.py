"""A held-out model's calibration residuals are out of sample even on a young history: no calibration origin's
outcomes were in the training."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

import numpy as np

from forecasting.calibrated import CalibratedForecaster
from forecasting.paths import LastValuePaths
from forecasting.series import SeriesData
from tests.forecasting.conftest import DAY, STEP, bursty, long_frame


class TrainingSeen(LastValuePaths):
    """The last value, noting the newest sample each training was given."""

    newest_ns: int | None = None

    def train(self, panel: Mapping[str, SeriesData]) -> dict[str, str]:
        TrainingSeen.newest_ns = max(s.start_ns + (len(s.y) - 1) * s.step_ns for s in panel.values())
        return {}


def test_on_three_days_of_history_every_residual_origin_is_after_the_training() -> None:
    history = long_frame({"a": bursty(3 * DAY, seed=1), "b": bursty(3 * DAY, seed=2, level=80.0)})
    model = CalibratedForecaster("held-out", TrainingSeen, calibration_horizon=timedelta(minutes=15))
    model.fit(history, STEP)
    trained_through = TrainingSeen.newest_ns
    assert trained_through is not None
    step_ns = int(STEP.total_seconds() * 1e9)
    for uid in ("a", "b"):
        residuals = model.residuals(uid)
        assert residuals is not None and residuals.count > 0
        # an origin's first outcome is one step after it: none may be a sample the training saw
        assert int(residuals.origins_ns.min()) + step_ns > trained_through


def test_a_model_trained_on_all_history_keeps_its_in_sample_origins() -> None:
    history = long_frame({"a": bursty(3 * DAY, seed=1)})
    model = CalibratedForecaster("in-sample", TrainingSeen, calibration_horizon=timedelta(minutes=15), hold_out=False)
    model.fit(history, STEP)
    residuals = model.residuals("a")
    assert residuals is not None and TrainingSeen.newest_ns is not None
    assert int(np.max(residuals.origins_ns)) < TrainingSeen.newest_ns

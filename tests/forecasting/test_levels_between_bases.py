"""A level between two of a model's base levels is a function of that level alone. LightGBM's bases are 0.5, 0.9
and 0.95: a level asked between them is offset from both bases around it (the highest of the two, kept between
them), so asking q0.7 besides q0.8 (two classes at newsvendor levels 0.7 and 0.8) does not lift q0.8 to q0.7, as
the pass from level to level did where q0.7, offset from the median, stood above q0.8, offset from q0.9."""

from __future__ import annotations

import numpy as np
import pytest

from forecasting.block import between_anchors
from forecasting.boosting import LightGbmPaths
from forecasting.calibrated import CalibratedForecaster, last_value_forecaster
from tests.forecasting.test_levels_asked import _helios

BASE = (0.5, 0.9, 0.95)


@pytest.mark.parametrize("seed", range(20))
def test_a_level_between_anchors_depends_on_itself_alone(seed: int) -> None:
    rng = np.random.default_rng(seed)
    anchors = (0.5, 0.9, 0.95)
    extra = tuple(sorted(float(q) for q in rng.uniform(0.01, 0.999, size=4)))
    levels = (*extra, *anchors)
    # offsets from each anchor rise with the level, as conformal offsets do; the anchors' forecasts are random
    offsets = np.empty((len(anchors), len(levels), 5))
    order = np.argsort(levels)
    offsets[:, order] = np.sort(rng.normal(size=offsets.shape), axis=1)
    candidates = rng.normal(size=(len(anchors), 1, 5)) * 3 + offsets
    together = between_anchors(candidates, levels, anchors)
    for k in range(len(extra)):
        alone = (levels[k], *anchors)
        picked = [k, *range(len(extra), len(levels))]
        assert np.array_equal(between_anchors(candidates[:, picked], alone, anchors)[0], together[k])
    assert (np.diff(together[order], axis=0) >= 0).all()  # and nothing crosses


def test_lightgbms_q08_is_the_same_with_q07_asked() -> None:
    panel, size = _helios("2020-05-09T01:00:00+08:00", days=7)
    model = CalibratedForecaster(  # as build_calibrated("lightgbm", ...) makes it, with a smaller fit
        "lightgbm",
        lambda: LightGbmPaths(BASE, rounds=100, max_rows=20_000, ahead_minutes=(15, 45)),
        fallback=last_value_forecaster(),
        offset_bases=False,
        hold_out=False,
    )
    model.fit_panel(panel, size)
    later, _ = _helios("2020-05-09T01:40:00+08:00", days=1)  # 40 minutes after the fit, as a tick between refits
    windows = model.windows(later)
    without = model.forecast_windows(windows, 8, (0.5, 0.8, 0.9, 0.95))
    with_07 = model.forecast_windows(windows, 8, (0.5, 0.7, 0.8, 0.9, 0.95))
    assert without.peaks is not None and with_07.peaks is not None
    assert set(without.models) == {"lightgbm"}
    assert np.array_equal(without.values[:, 1], with_07.values[:, 2])
    assert np.array_equal(without.peaks[:, 1], with_07.peaks[:, 2])

"""The charts' time axis: plotted against UTC datetime64 values, at the same positions as the timezone-aware index."""

from __future__ import annotations

import matplotlib.dates as mdates
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from agent.report.charts import shade_gaps, time_axis


def test_the_time_axis_is_the_index_in_utc_at_the_same_chart_positions() -> None:
    index = pd.date_range("2020-05-01 22:00", periods=6, freq="5min", tz="Europe/Berlin")
    x = time_axis(index)
    assert x.dtype == np.dtype("M8[ns]")
    assert list(pd.DatetimeIndex(x).tz_localize("UTC")) == list(index.tz_convert("UTC"))
    np.testing.assert_array_equal(mdates.date2num(x), mdates.date2num(index.to_pydatetime()))
    naive = pd.date_range("2020-05-01", periods=3, freq="1h")
    np.testing.assert_array_equal(time_axis(naive), naive.to_numpy())


def test_a_gap_is_shaded_from_its_first_missing_step_to_the_end_of_its_last() -> None:
    index = pd.date_range("2020-05-01", periods=8, freq="5min", tz="UTC")
    gaps = np.array([False, False, True, True, False, False, False, True])
    figure, ax = plt.subplots()
    shade_gaps(ax, time_axis(index), gaps)
    spans = [patch.get_extents() for patch in ax.patches]
    assert len(spans) == 2
    starts = sorted(
        mdates.num2date(ax.transData.inverted().transform((span.x0, 0))[0]).replace(tzinfo=None) for span in spans
    )
    ends = sorted(
        mdates.num2date(ax.transData.inverted().transform((span.x1, 0))[0]).replace(tzinfo=None) for span in spans
    )
    plt.close(figure)
    step = pd.Timedelta("5min")
    expected_starts = [index[2], index[7]]
    expected_ends = [index[3] + step, index[7] + step]
    for got, want in zip(starts + ends, expected_starts + expected_ends, strict=True):
        assert abs(pd.Timestamp(got) - want.tz_localize(None)) < pd.Timedelta("1s")

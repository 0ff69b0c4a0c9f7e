"""The charts' time axis: plotted against UTC datetime64 values, at the same positions as the timezone-aware index,
and labelled as UTC; each panel's unit (GPUs or chips) on its y axis; the cost chart's title."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime

import matplotlib.dates as mdates
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from agent.report import charts
from agent.report.charts import shade_gaps, time_axis

# matplotlib.dates has no type annotations: its converters, typed for this module's strict checks
date2num: Callable[[object], np.ndarray] = mdates.date2num
num2date: Callable[[float], datetime] = mdates.num2date


def test_the_time_axis_is_the_index_in_utc_at_the_same_chart_positions() -> None:
    index = pd.date_range("2020-05-01 22:00", periods=6, freq="5min", tz="Europe/Berlin")
    x = time_axis(index)
    assert x.dtype == np.dtype("M8[ns]")
    assert list(pd.DatetimeIndex(x).tz_localize("UTC")) == list(index.tz_convert("UTC"))
    np.testing.assert_array_equal(date2num(x), date2num(index.to_pydatetime()))
    naive = pd.date_range("2020-05-01", periods=3, freq="1h")
    np.testing.assert_array_equal(time_axis(naive), naive.to_numpy())


def test_a_gap_is_shaded_from_its_first_missing_step_to_the_end_of_its_last() -> None:
    index = pd.date_range("2020-05-01", periods=8, freq="5min", tz="UTC")
    gaps = np.array([False, False, True, True, False, False, False, True])
    figure, ax = plt.subplots()
    shade_gaps(ax, time_axis(index), gaps)
    spans = [patch.get_extents() for patch in ax.patches]
    assert len(spans) == 2
    starts = sorted(num2date(ax.transData.inverted().transform((span.x0, 0))[0]).replace(tzinfo=None) for span in spans)
    ends = sorted(num2date(ax.transData.inverted().transform((span.x1, 0))[0]).replace(tzinfo=None) for span in spans)
    plt.close(figure)
    step = pd.Timedelta("5min")
    expected_starts = [index[2], index[7]]
    expected_ends = [index[3] + step, index[7] + step]
    for got, want in zip(starts + ends, expected_starts + expected_ends, strict=True):
        assert abs(pd.Timestamp(got) - want.tz_localize(None)) < pd.Timedelta("1s")


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Figure]]:
    """The figures the chart functions render, kept open instead of encoded."""
    figures: list[Figure] = []

    def keep(figure: Figure) -> str:
        figures.append(figure)
        return "data:image/png;base64,"

    monkeypatch.setattr(charts, "figure_to_data_uri", keep)
    yield figures
    for figure in figures:
        plt.close(figure)


def _visible(figure: Figure) -> list[Axes]:
    return [ax for ax in figure.axes if ax.get_visible()]


def test_time_axes_say_utc_under_the_bottom_panel_of_each_column(drawn: list[Figure]) -> None:
    index = pd.date_range("2020-05-01", periods=12, freq="5min", tz="Asia/Shanghai")
    demand = np.arange(12.0)
    panels = [(f"pool {i}", demand, {"forecast": demand + 1}) for i in range(3)]
    charts.capacity_panels(index, panels, ["GPUs", "chips", "GPUs"], columns=2)
    (figure,) = drawn
    axes = _visible(figure)
    assert [ax.get_ylabel() for ax in axes] == ["GPUs", "chips", "GPUs"]
    # three panels in two columns: the second column's bottom panel is in the first row
    assert [ax.get_xlabel() for ax in axes] == ["", charts.TIME_LABEL, charts.TIME_LABEL]
    assert charts.TIME_LABEL == "time (UTC)"
    assert any(label.get_visible() and label.get_text() for label in axes[1].get_xticklabels())


def test_forecast_panels_label_demand_in_each_class_unit_and_time_in_utc(drawn: list[Figure]) -> None:
    index = pd.date_range("2020-05-01", periods=12, freq="5min", tz="UTC")
    demand = np.arange(12.0)
    charts.forecast_panels(index, [("a", demand, demand, demand + 1), ("b", demand, demand, demand + 2)], 4, "chips")
    (figure,) = drawn
    axes = _visible(figure)
    assert [ax.get_ylabel() for ax in axes] == ["demand (chips)", "demand (chips)"]
    assert [ax.get_xlabel() for ax in axes] == [charts.TIME_LABEL, charts.TIME_LABEL]


def test_the_cost_chart_carries_its_title(drawn: list[Figure]) -> None:
    charts.cost_bars({"forecast": 2.0, "reactive": 1.0}, {"forecast": 0.001, "reactive": 0.01}, title="As run")
    (figure,) = drawn
    assert figure.get_suptitle() == "As run"

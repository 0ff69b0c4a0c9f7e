"""Charts for reports, rendered with matplotlib (Agg) to PNG and embedded in HTML as data URIs."""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

POLICY_COLOURS = {
    "forecast": "#1f77b4",
    "reactive": "#d62728",
    "static": "#7f7f7f",
    "oracle": "#2ca02c",
    "actual": "#9467bd",
}


def figure_to_data_uri(figure: Figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    plt.close(figure)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


TIME_LABEL = "time (UTC)"


def finish_panels(figure: Figure, axes: np.ndarray, used: int, top: float = 0.97) -> str:
    """Hide unused panels, put one legend on top, label the time axes, and render the figure."""
    for ax in list(axes.flat)[used:]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="upper center", ncol=max(1, len(labels)), fontsize=8, frameon=False)
    figure.autofmt_xdate()
    label_time_axes(axes, used)
    figure.tight_layout(rect=(0, 0, 1, top))
    return figure_to_data_uri(figure)


def label_time_axes(axes: np.ndarray, used: int) -> None:
    """Say under the bottom panel of each column that the time axis is in UTC (``time_axis`` plots UTC). Called
    after ``autofmt_xdate``, which clears the labels of every panel but the bottom row's. A bottom panel above an
    unused one gets its dates back, which the shared axis had hidden."""
    rows, columns = axes.shape
    for i, ax in enumerate(list(axes.flat)[:used]):
        if i + columns < used:
            continue
        if i // columns < rows - 1:
            ax.xaxis.set_tick_params(labelbottom=True)
            for label in ax.get_xticklabels():
                label.set_rotation(30)
                label.set_horizontalalignment("right")
        ax.set_xlabel(TIME_LABEL, fontsize=8)


def time_axis(index: pd.DatetimeIndex) -> np.ndarray:
    """The index as UTC ``datetime64`` values, what the charts plot against. matplotlib converts such an array in
    one vectorized call, but a timezone-aware index one timestamp at a time, in every call that plots it: that
    took 4 of the demo report's 11 seconds. The axis reads the same: matplotlib's dates are in UTC by default."""
    return np.asarray(index.tz_convert("UTC").tz_localize(None) if index.tz is not None else index, dtype="M8[ns]")


def shade_gaps(ax: Axes, index: np.ndarray, gaps: np.ndarray | None) -> None:
    """Mark steps without data (not counted in any metric) so nobody reads them as zero demand; ``index`` is a
    ``time_axis``."""
    if gaps is None or not gaps.any():
        return
    edges = np.flatnonzero(np.diff(np.r_[0, gaps.astype(np.int8), 0]))
    step = index[1] - index[0] if len(index) > 1 else np.timedelta64(0, "ns")
    for i, (start, end) in enumerate(zip(edges[::2], edges[1::2], strict=True)):
        label = "no data" if i == 0 else None
        ax.axvspan(index[start], index[end - 1] + step, color="#f4cccc", alpha=0.6, linewidth=0, label=label)


def capacity_panels(
    index: pd.DatetimeIndex,
    panels: Sequence[tuple[str, np.ndarray, Mapping[str, np.ndarray]]],
    unit_label: str | Sequence[str],
    columns: int = 2,
    gaps: np.ndarray | None = None,
) -> str:
    """Small multiples: per panel, demand (filled grey) and each policy's ready capacity as a step line.
    ``unit_label``: the y-axis label of every panel, or one per panel (GPUs for a GPU pool, chips for a TPU one)."""
    rows = max(1, -(-len(panels) // columns))
    figure, axes = plt.subplots(rows, columns, figsize=(7 * columns, 2.4 * rows), squeeze=False, sharex=True)
    x = time_axis(index)
    units = [unit_label] * len(panels) if isinstance(unit_label, str) else list(unit_label)
    for ax, (title, demand, capacity), unit in zip(axes.flat, panels, units, strict=False):
        shade_gaps(ax, x, gaps)
        ax.fill_between(x, np.nan_to_num(demand), step="post", color="#cccccc", label="demand", linewidth=0)
        for policy, series in capacity.items():
            ax.step(x, series, where="post", linewidth=0.9, label=policy, color=POLICY_COLOURS.get(policy))
        ax.set_title(title, fontsize=9)
        ax.set_ylabel(unit, fontsize=8)
        ax.tick_params(labelsize=7)
    return finish_panels(figure, axes, len(panels))


def forecast_panels(
    index: pd.DatetimeIndex,
    panels: Sequence[tuple[str, np.ndarray, np.ndarray, np.ndarray]],
    columns: int = 4,
    unit_label: str | Sequence[str] = "accelerators",
) -> str:
    """Per class: observed demand with a forecast band (``median`` to ``upper``), each value at the step it forecast.
    ``unit_label``: the y-axis unit of every panel, or one per panel (GPUs or chips, by the class's family)."""
    rows = max(1, -(-len(panels) // columns))
    figure, axes = plt.subplots(rows, columns, figsize=(4 * columns, 2.0 * rows), squeeze=False, sharex=True)
    x = time_axis(index)
    units = [unit_label] * len(panels) if isinstance(unit_label, str) else list(unit_label)
    for ax, (title, demand, median, upper), unit in zip(axes.flat, panels, units, strict=False):
        ax.fill_between(
            x,
            np.nan_to_num(median),
            np.nan_to_num(upper),
            color="#9ecae1",
            alpha=0.7,
            label="forecast band",
            linewidth=0,
            step="post",
        )
        ax.plot(x, demand, color="black", linewidth=0.6, label="demand")
        ax.set_title(title, fontsize=8)
        ax.set_ylabel(f"demand ({unit})", fontsize=7)
        ax.tick_params(labelsize=6)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="upper center", ncol=2, fontsize=8, frameon=False)
    figure.autofmt_xdate()
    label_time_axes(axes, len(panels))
    figure.tight_layout(rect=(0, 0, 1, 0.96))
    return figure_to_data_uri(figure)


def cost_bars(costs: Mapping[str, float], unserved: Mapping[str, float], title: str | None = None) -> str:
    """Cost and unserved demand per policy, under ``title``. The cost axis starts just below the cheapest policy,
    not at zero, so that differences of a few percent are visible; each bar is labelled with its value."""
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 0.9 + 0.5 * len(costs) + (0.4 if title else 0.0)))
    names = list(costs)
    colours = [POLICY_COLOURS.get(n, "#333333") for n in names]
    values = [costs[n] for n in names]
    left.barh(names, values, color=colours)
    low, high = min(values, default=0.0), max(values, default=0.0)
    span = max(high - low, 0.02 * high, 1.0)
    left.set_xlim(max(0.0, low - 0.6 * span), high + 0.35 * span)
    for y, value in enumerate(values):
        left.text(value, y, f" {value:,.0f}", va="center", fontsize=10)
    left.set_xlabel("cost (USD); axis does not start at 0", fontsize=10)
    shares = [100 * unserved[n] for n in names]
    right.barh(names, shares, color=colours)
    right.set_xlim(0.0, max(max(shares, default=0.0) * 1.3, 0.1))
    for y, share in enumerate(shares):
        right.text(share, y, f" {share:.2f}%", va="center", fontsize=10)
    right.set_xlabel("unserved demand (% of accelerator-hours)", fontsize=10)
    for ax in (left, right):
        ax.invert_yaxis()
        ax.tick_params(labelsize=10)
    if title:
        figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    return figure_to_data_uri(figure)

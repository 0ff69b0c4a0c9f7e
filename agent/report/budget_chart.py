"""The report's budget chart: per cap, each policy's spend in the period (or hour) against the cap."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from agent.report.charts import POLICY_COLOURS, figure_to_data_uri


def budget_panels(
    index: pd.DatetimeIndex, panels: Sequence[tuple[str, Mapping[str, np.ndarray], float]], columns: int = 2
) -> str:
    """Small multiples: per panel (title, spend per policy, cap), step lines of spend and a dashed cap line."""
    columns = min(columns, max(1, len(panels)))
    rows = max(1, -(-len(panels) // columns))
    figure, axes = plt.subplots(rows, columns, figsize=(7 * columns, 2.6 * rows), squeeze=False, sharex=True)
    for ax, (title, spend, cap) in zip(axes.flat, panels, strict=False):
        for policy, series in spend.items():
            ax.step(index, series, where="post", linewidth=0.9, label=policy, color=POLICY_COLOURS.get(policy))
        ax.axhline(cap, color="black", linestyle="--", linewidth=0.9, label="cap")
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("USD", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="upper center", ncol=len(labels), fontsize=8, frameon=False)
    figure.autofmt_xdate()
    figure.tight_layout(rect=(0, 0, 1, 0.95))
    return figure_to_data_uri(figure)

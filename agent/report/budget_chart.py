"""The report's budget chart: per cap, each policy's spend in the period (or hour) against the cap."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from agent.report.charts import POLICY_COLOURS, finish_panels, time_axis


def budget_panels(
    index: pd.DatetimeIndex, panels: Sequence[tuple[str, Mapping[str, np.ndarray], float]], columns: int = 2
) -> str:
    """Small multiples: per panel (title, spend per policy, cap), step lines of spend and a dashed cap line."""
    columns = min(columns, max(1, len(panels)))
    rows = max(1, -(-len(panels) // columns))
    figure, axes = plt.subplots(rows, columns, figsize=(7 * columns, 2.6 * rows), squeeze=False, sharex=True)
    x = time_axis(index)
    for ax, (title, spend, cap) in zip(axes.flat, panels, strict=False):
        for policy, series in spend.items():
            ax.step(x, series, where="post", linewidth=0.9, label=policy, color=POLICY_COLOURS.get(policy))
        ax.axhline(cap, color="black", linestyle="--", linewidth=0.9, label="cap")
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("USD", fontsize=8)
        ax.tick_params(labelsize=7)
    return finish_panels(figure, axes, len(panels), top=0.95)

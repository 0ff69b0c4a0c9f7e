"""Building the forecast frame every forecaster returns: ``unique_id, ds, model, note, q<level>`` (and
``peak_q<level>`` from a forecaster that calibrates the peak)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from forecasting.base import peak_column, quantile_column


def forecast_frame(
    uids: Sequence[str],
    end_ns: Sequence[int],
    step_ns: int,
    values: np.ndarray,
    models: Sequence[str],
    notes: Sequence[str],
    levels: Sequence[float],
    peaks: np.ndarray | None = None,
) -> pd.DataFrame:
    """One row per series and step. ``values`` has shape (series, levels, horizon); ``end_ns`` is each series'
    newest observed step, so step ``h`` (1-based) is stamped ``end + h * step``. ``peaks``, of the same shape, are
    the peak quantiles (over steps 1 to ``h``), when the forecaster has them."""
    columns = ["unique_id", "ds", "model", "note", *[quantile_column(q) for q in levels]]
    if peaks is not None:
        columns += [peak_column(q) for q in levels]
    n = len(uids)
    horizon = values.shape[2] if values.ndim == 3 else 0
    if n == 0 or horizon == 0:
        numeric = ("q", "peak_q")
        frame = pd.DataFrame({c: pd.Series(dtype=float if c.startswith(numeric) else object) for c in columns})
        frame["ds"] = pd.to_datetime(frame["ds"], utc=True)
        return frame
    steps = np.arange(1, horizon + 1, dtype=np.int64) * step_ns
    stamps = (np.asarray(end_ns, dtype=np.int64)[:, None] + steps[None, :]).ravel()
    out: dict[str, object] = {
        "unique_id": np.repeat(np.asarray(uids, dtype=object), horizon),
        "ds": pd.DatetimeIndex(stamps.view("datetime64[ns]")).tz_localize("UTC"),
        "model": np.repeat(np.asarray(models, dtype=object), horizon),
        "note": np.repeat(np.asarray(notes, dtype=object), horizon),
    }
    for i, level in enumerate(levels):
        out[quantile_column(level)] = values[:, i, :].ravel()
        if peaks is not None:
            out[peak_column(level)] = peaks[:, i, :].ravel()
    return pd.DataFrame(out, columns=columns)

"""Building the forecast frame every forecaster returns, column-wise and without per-series pandas objects."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np
import pandas as pd

from forecasting.base import quantile_column


@dataclass
class ForecastFrameBuilder:
    """Collects per-series quantile grids (levels x horizon) and returns one long forecast frame."""

    levels: Sequence[float]
    horizon: int
    step: timedelta
    _ids: list[str] = field(default_factory=list)
    _last_ns: list[int] = field(default_factory=list)
    _grids: list[np.ndarray] = field(default_factory=list)
    _models: list[str] = field(default_factory=list)
    _notes: list[str] = field(default_factory=list)

    def add(self, uid: str, last_ns: int, grid: np.ndarray, model: str, note: str = "") -> None:
        """``grid`` has one row per level (or one row broadcast to all levels) and ``horizon`` columns."""
        self._ids.append(uid)
        self._last_ns.append(int(last_ns))
        self._grids.append(np.broadcast_to(np.asarray(grid, dtype=float), (len(self.levels), self.horizon)))
        self._models.append(model)
        self._notes.append(note)

    def frame(self) -> pd.DataFrame:
        columns = ["unique_id", "ds", "model", "note", *[quantile_column(q) for q in self.levels]]
        count, h = len(self._ids), self.horizon
        if count == 0:
            return pd.DataFrame({c: [] for c in columns})
        step_ns = int(self.step.total_seconds() * 1e9)
        offsets = step_ns * np.arange(1, h + 1, dtype=np.int64)
        stamps = (np.asarray(self._last_ns, dtype=np.int64)[:, None] + offsets[None, :]).ravel()
        data: dict[str, object] = {
            "unique_id": np.repeat(np.asarray(self._ids, dtype=object), h),
            "ds": pd.DatetimeIndex(stamps, tz="UTC"),
            "model": np.repeat(np.asarray(self._models, dtype=object), h),
            "note": np.repeat(np.asarray(self._notes, dtype=object), h),
        }
        stacked = np.stack(self._grids)  # series x levels x horizon
        for i, level in enumerate(self.levels):
            data[quantile_column(level)] = stacked[:, i, :].ravel()
        return pd.DataFrame(data, columns=columns)

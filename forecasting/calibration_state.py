"""What a calibrated forecaster keeps between fits, and how its calibration residuals are brought up to date.

Per series: the newest history kept (``tails``), its range and stray samples (``guards.stray_samples``), the floor
of its local scale, and the calibration residuals of the current training, with the offsets worked out from them
until the next fit. A training that is not given a series (its history was not read at that fit) leaves it the
model that trained it before, with its notes and residuals (``retrained``, ``kept_models``), until one is.
``calibrate`` forecasts only the origins of the calibration window that have no residuals yet (an hourly refit
forecasts the new ones), from the kept history with its stray samples taken as missing, and never from an origin
whose outcomes the held-out training saw; ``rescale`` gives every residual its local scale.
``forecasting.calibrated`` decides when to train and what the residuals are turned into.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from forecasting.calibration import Residuals, local_scales, scale_floor
from forecasting.guards import history_range, stray_samples
from forecasting.paths import PathModel, PathRequest
from forecasting.series import SeriesData, merge

MAX_ORIGINS = 240  # calibration origins per series: enough for a 0.95 quantile, cheap to forecast


@dataclass
class CalibrationState:
    step_ns: int = 0
    trained_end_ns: int | None = None
    cut_ns: int | None = None  # the newest time the held-out training saw (None: trained on all history)
    train_notes: dict[str, str] = field(default_factory=dict)
    residuals: dict[str, Residuals] = field(default_factory=dict)
    tails: dict[str, SeriesData] = field(default_factory=dict)
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    floors: dict[str, float] = field(default_factory=dict)
    strays: dict[str, np.ndarray] = field(default_factory=dict)  # timestamps of the kept history's stray samples
    offsets: dict[tuple[str, int, tuple[float, ...]], tuple[np.ndarray, int]] = field(default_factory=dict)
    peak_offsets: dict[tuple[str, int, tuple[float, ...]], np.ndarray] = field(default_factory=dict)
    # series the newest training was not given: the earlier model that trained each (the newest serves the rest)
    kept_models: dict[str, PathModel] = field(default_factory=dict)

    def retrained(self, previous: PathModel, trained: Collection[str], notes: dict[str, str]) -> None:
        """A new model was trained on the series ``trained`` (with ``notes`` on those it could not learn): their
        residuals are computed again. Every other series seen before keeps the model that trained it (``previous``,
        or an earlier one kept for it), its notes and its residuals: a history not read at this fit leaves its
        calibration as it was, until a training is given it."""
        kept = {uid for uid in self.tails if uid not in trained}
        self.kept_models = {uid: self.kept_models.get(uid, previous) for uid in kept}
        self.train_notes = {**{uid: n for uid, n in self.train_notes.items() if uid in kept}, **notes}
        self.residuals = {uid: r for uid, r in self.residuals.items() if uid in kept}

    def paths(self, newest: PathModel, requests: Sequence[tuple[str, PathRequest]], horizon: int) -> list[np.ndarray]:
        """Each request's paths, from the model of its series (``kept_models``, else ``newest``), in order."""
        groups: dict[int, tuple[PathModel, list[int]]] = {}
        for i, (uid, _) in enumerate(requests):
            model = self.kept_models.get(uid, newest)
            groups.setdefault(id(model), (model, []))[1].append(i)
        found: dict[int, np.ndarray] = {}
        for model, rows in groups.values():
            found.update(zip(rows, model.paths([requests[i][1] for i in rows], horizon), strict=True))
        return [found[i] for i in range(len(requests))]

    def remember(self, uid: str, series: SeriesData, keep: int) -> None:
        """Lay ``series`` over the kept history of ``uid`` (its newest ``keep`` steps), and note its range and
        stray samples."""
        self.tails[uid] = merge(self.tails.get(uid), series, keep)
        found = history_range(self.tails[uid].y[~np.isnan(self.tails[uid].y)])
        if found is not None:
            self.ranges[uid] = found
        self._find_strays(uid)

    def _find_strays(self, uid: str) -> None:
        """Note the kept history's stray samples (``stray_samples``): calibration takes them as missing, neither
        outcomes nor origins nor moves of the local scale. Residuals computed while other samples were stray (a
        glitch just arrived, or a burst's first samples have company now) are computed again."""
        tail = self.tails[uid]
        stamps = tail.start_ns + np.flatnonzero(stray_samples(tail.y)) * tail.step_ns
        before = self.strays.get(uid, stamps)
        if not np.array_equal(before[before >= tail.start_ns], stamps):
            self.residuals.pop(uid, None)
        self.strays[uid] = stamps

    def calibrate(
        self, model: PathModel, panel: Mapping[str, SeriesData], window: int, horizon: int, scale_steps: int
    ) -> None:
        """Residuals of ``model`` at the calibration window's origins not yet forecast, ``horizon`` steps ahead;
        ``scale_steps`` is the local scale's window in steps (0: plain split conformal, residuals not scaled)."""
        requests, new_origins = [], []
        for uid, whole in panel.items():
            series = whole.without(self.strays.get(uid))
            size = series.step_ns
            last = len(series.y) - 1 - horizon
            first = max(last - window + 1, 0)
            if self.cut_ns is not None:  # held out: no origin whose outcomes the training saw
                first = max(first, -(-(self.cut_ns - series.start_ns) // size))
            if last < first:
                continue
            # A young series forecasts from every origin: it is calibrated after MIN_RESIDUALS steps, not twice that.
            stride = max(1, window // MAX_ORIGINS) if last - first + 1 >= MAX_ORIGINS else 1
            absolute = series.start_ns // size + np.arange(first, last + 1)
            origins = np.arange(first, last + 1)[absolute % stride == 0]
            stamps = series.start_ns + origins * size
            known = self.residuals.get(uid)
            if known is not None:
                known = known.keep(known.origins_ns >= stamps[0]) if len(stamps) else known
                self.residuals[uid] = known
                fresh = ~np.isin(stamps, known.origins_ns)
                origins, stamps = origins[fresh], stamps[fresh]
            if len(origins):
                requests.append((series, origins))
                new_origins.append((uid, stamps))
        if not requests:
            return
        paths = self.paths(model, [(uid, r) for (uid, _), r in zip(new_origins, requests, strict=True)], horizon)
        for (series, origins), (uid, stamps), path in zip(requests, new_origins, paths, strict=True):
            target = origins[:, None] + np.arange(1, horizon + 1)[None, :]
            actual = series.y[target]
            computed = Residuals.unscaled(stamps, actual[None, :, :] - path)
            known = self.residuals.get(uid)
            self.residuals[uid] = computed if known is None else Residuals.join(known, computed)
        if scale_steps:
            for uid, _ in new_origins:
                self._rescale(uid, scale_steps)

    def _rescale(self, uid: str, scale_steps: int) -> None:
        """Every residual's local scale, from the kept history, under the series' current floor."""
        tail = self.tails[uid].without(self.strays.get(uid))
        self.floors[uid] = scale_floor(tail.y)
        residuals = self.residuals[uid]
        ends = np.clip((residuals.origins_ns - tail.start_ns) // tail.step_ns, 0, len(tail.y) - 1)
        scales = local_scales(tail.y, ends, scale_steps, self.floors[uid])
        self.residuals[uid] = residuals.rescaled(scales)

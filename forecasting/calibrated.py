"""A path model made into a Forecaster: training on its own schedule, conformal calibration, guards, fallback.

``fit`` keeps the newest history per series, retrains the path model when its training is older than
``retrain_interval`` (training holds out the calibration window, or half of a shorter history, and no calibration
origin is older than the newest sample trained on; a series missing from that fit's history keeps the model
that trained it before, its notes and its residuals), and brings the residuals of the calibration window up to
date; residuals already computed for the current training are kept, so an hourly refit only forecasts the origins
that are new. ``predict`` forecasts from the newest origin of each series and adds the
conformal offsets; it also publishes the calibrated quantile of the peak over each prefix of the horizon (the
highest base over those steps plus the conformal offset of the highest residual over them, ``peak_residuals``).
A model trained at the asked quantiles may keep them as trained (``offset_bases=False``: no offset at its base
levels) and train on all history (``hold_out=False``: its residuals are then in sample, fit for the fallback checks
but not for choosing between models). Any series whose model did not train, whose residuals are too few (or do not
reach as far ahead as asked: ``calibration_horizon``), or whose forecast fails the guards (at a base level, or
below zero or not finite at any: ``guards.row_problems``) is answered by the calibrated last value instead, and the
row says so; a level other than a base whose tail reaches too high, or a peak that fails the guards, is answered by
the fallback at that level only, and so is every level from q0.97 up when the tail probe q0.999 reaches too high
(``TAIL_PROBE``). The model's base levels and the tail probe are forecast with
every request; every other level is the highest of its values offset from the bases around it, kept between them
(``block.between_anchors``), so a level reads the same whatever levels are asked with it. Calibration takes the kept
history's stray samples (one bad scrape, see ``stray_samples``) as missing: neither outcomes, nor origins, nor moves
of the local scale. What is kept between fits, and the calibration of new origins, is a ``CalibrationState``
(``forecasting.calibration_state``). The forecasts of a set of series, and their rows answered by the fallback, are
a ``Block`` (``forecasting.block``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Self

import numpy as np
import pandas as pd

from forecasting.block import (
    LEVEL_TOLERANCE,
    Block,
    between_anchors,
    persistence_block,
    rescue_levels,
    rescue_peaks,
    rescue_rows,
    with_anchors,
)
from forecasting.calibration import MIN_RESIDUALS, Residuals, conformal_offsets, local_scales, peak_residuals
from forecasting.calibration_state import CalibrationState
from forecasting.guards import level_problems, row_problems
from forecasting.output import forecast_frame
from forecasting.paths import LastValuePaths, PathModel
from forecasting.series import SeriesData, merge, step_ns, to_panel

__all__ = ["CALIBRATION_HORIZON", "CalibratedForecaster", "last_value_forecaster"]

# The level whose tail is judged with every request, and the levels it answers for: where even the calibrated
# q0.999 is beyond a sane multiple of the history's range, the series' extreme residuals are too wild to place a
# tail level, and every level from TAIL_LEVELS up is the fallback's; lower levels keep the model's. Judged whatever
# levels are asked, so a level reads the same with or without the others (the equal-service search asks them all,
# a daemon only its own). Measured on helios-earth-slices.yaml's full window: with only the failing level replaced
# the forecast at 0.1% unserved cost 455,351 USD (oracle 334,115), with the tail levels replaced 446,338; refusing
# the whole row on the probe gave 443,639 but took q0.9 from the fallback too (auto's accuracy on the Helios tenants,
# 0.822 / 0.873 / 0.858 of the last value's at 15 / 30 / 60 minutes, went to 0.855 / 0.901 / 0.874).
TAIL_PROBE = 0.999
TAIL_LEVELS = 0.97
# How far ahead residuals are kept unless the caller will ask further: the offsets of a step past them are not known
CALIBRATION_HORIZON = timedelta(hours=1)


class CalibratedForecaster:
    """Conformally calibrated quantile forecasts from a path model, with a calibrated last-value fallback."""

    def __init__(
        self,
        name: str,
        make_model: Callable[[], PathModel],
        *,
        calibration_window: timedelta = timedelta(days=2),
        calibration_horizon: timedelta = CALIBRATION_HORIZON,
        retrain_interval: timedelta = timedelta(days=1),
        recent_window: timedelta = timedelta(hours=3),
        scale_window: timedelta | None = timedelta(hours=1),
        fallback: CalibratedForecaster | None = None,
        stale_after: timedelta = timedelta(hours=6),
        offset_bases: bool = True,
        hold_out: bool = True,
        tail_probe: float | None = TAIL_PROBE,
    ) -> None:
        self.name = name
        self.make_model = make_model
        self.model: PathModel = make_model()
        self.calibration_window = calibration_window
        self.calibration_horizon = calibration_horizon
        self.retrain_interval = retrain_interval
        self.recent_window = recent_window
        self.scale_window = scale_window
        self.fallback = fallback
        self.stale_after = stale_after
        self.offset_bases = offset_bases
        self.hold_out = hold_out
        self.tail_probe = tail_probe
        self._state = CalibrationState()

    @property
    def _probes(self) -> tuple[float, ...]:
        """The levels judged with every request besides the base levels (``TAIL_PROBE``; none when turned off)."""
        return () if self.tail_probe is None else (self.tail_probe,)

    def _tails_failed(self, levels: tuple[float, ...], failed: dict[int, str]) -> dict[int, str]:
        """``failed`` with every tail level (``TAIL_LEVELS`` and up) when the tail probe is among them."""
        probe = next(
            (k for k, q in enumerate(levels) if k in failed and any(abs(q - p) < 1e-9 for p in self._probes)), None
        )
        if probe is None:
            return failed
        tails = {
            k: f"q{levels[probe]:g} (tail probe): {failed[probe]}" for k, q in enumerate(levels) if q >= TAIL_LEVELS
        }
        return {**tails, **failed}

    @property
    def min_history_steps(self) -> int:
        size = self._state.step_ns or step_ns(timedelta(minutes=5))
        return max(1, round(self.recent_window.total_seconds() * 1e9 / size))

    def context_steps(self, size: int) -> int:
        return max(self.model.context_steps(size), self.scale_steps(size) + 1, 1)

    def scale_steps(self, size: int) -> int:
        """Step changes averaged into the local scale that calibration divides residuals by (0: no local scale,
        plain split conformal)."""
        if self.scale_window is None:
            return 0
        return max(1, round(self.scale_window.total_seconds() * 1e9 / size))

    def horizon_steps(self, size: int) -> int:
        return max(1, -(-round(self.calibration_horizon.total_seconds() * 1e9) // size))

    def residuals(self, uid: str) -> Residuals | None:
        """The calibration residuals of a series under the current training, if any."""
        return self._state.residuals.get(uid)

    def train_note(self, uid: str) -> str:
        """Why the model could not learn this series at the last training (empty when it could)."""
        return self._state.train_notes.get(uid, "")

    # -- fitting -------------------------------------------------------------------------------------------

    def fit(self, history: pd.DataFrame, step: timedelta) -> Self:
        self.fit_panel(to_panel(history, step), step_ns(step))
        return self

    def fit_panel(self, panel: Mapping[str, SeriesData], size: int) -> None:
        if self.fallback is not None:
            self.fallback.fit_panel(panel, size)
        state = self._state
        if size != state.step_ns:
            self._state = state = CalibrationState(step_ns=size)
        horizon = self.horizon_steps(size)
        window = round(self.calibration_window.total_seconds() * 1e9 / size)
        keep = self.context_steps(size) + window + horizon
        for uid, series in panel.items():
            state.remember(uid, series, keep)
        if not panel:
            return
        end = max(s.end_ns for s in panel.values())
        if state.trained_end_ns is None or end - state.trained_end_ns >= self.retrain_interval.total_seconds() * 1e9:
            self._retrain(panel, end, window, size)
        state.calibrate(self.model, panel, window, horizon, self.scale_steps(size))
        state.offsets = {}
        state.peak_offsets = {}

    def _retrain(self, panel: Mapping[str, SeriesData], end: int, window: int, size: int) -> None:
        state = self._state
        span = max(len(s.y) for s in panel.values())
        held_out = min(window, span // 2)  # short histories: keep half for training
        cut = end - (held_out + self.horizon_steps(size)) * size if self.hold_out else end
        # Trained aside: should training raise, the model, its notes and its residuals stay as they were.
        model = self.make_model()
        train = {uid: s.until(cut + size) for uid, s in panel.items()}
        notes = model.train({uid: s for uid, s in train.items() if len(s.y)})
        state.retrained(self.model, panel.keys(), notes)
        self.model = model
        state.trained_end_ns = end
        state.cut_ns = cut if self.hold_out else None

    # -- predicting ----------------------------------------------------------------------------------------

    def predict(self, recent: pd.DataFrame, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        size = self._state.step_ns or step_ns(timedelta(minutes=5))
        windows = self.windows(to_panel(recent, timedelta(microseconds=size // 1000)))
        block = self.forecast_windows(windows, horizon, tuple(quantiles))
        return forecast_frame(
            block.uids, block.end_ns, size, block.values, block.models, block.notes, quantiles, block.peaks
        )

    def windows(self, recent: Mapping[str, SeriesData]) -> dict[str, SeriesData]:
        """Each recent series laid over the history kept at fit time, cut to what the model looks at."""
        if not recent:
            return {}
        size = self._state.step_ns or next(iter(recent.values())).step_ns
        keep = self.context_steps(size) + 1
        return {uid: merge(self._state.tails.get(uid), s, keep) for uid, s in recent.items()}

    def offsets(self, uid: str, horizon: int, levels: tuple[float, ...]) -> tuple[np.ndarray, int] | None:
        """Offsets (bases, levels, horizon) of each level from each of the model's base levels, and the first step
        (0-based) with too few residuals."""
        key = (uid, horizon, levels)
        cached = self._state.offsets.get(key)
        if cached is None:
            residuals = self._state.residuals.get(uid)
            if residuals is None or residuals.count == 0:
                return None
            cached = self._from_each_base(residuals.normalized(), horizon, levels)
            if not self.offset_bases:
                for b, base in enumerate(self.model.base_levels):
                    cached[0][b, [abs(q - base) < LEVEL_TOLERANCE for q in levels]] = 0.0
            self._state.offsets[key] = cached
        return cached

    def peak_offsets(self, uid: str, horizon: int, levels: tuple[float, ...]) -> np.ndarray | None:
        """Offsets (bases, levels, horizon) of the peak over steps 1 to ``h``: conformal quantiles of each origin's
        highest normalized residual over those steps. A base trained at the asked level keeps its offset here: it is
        a per-step quantile, not a quantile of the peak."""
        key = (uid, horizon, levels)
        cached = self._state.peak_offsets.get(key)
        if cached is None:
            residuals = self._state.residuals.get(uid)
            if residuals is None or residuals.count == 0:
                return None
            found = self._from_each_base(peak_residuals(residuals.normalized()), horizon, levels)[0]
            # The peak over more steps is never below the peak over fewer: an offset fitted step by step (a tail
            # extrapolated from each step's own highest residuals) may come out lower further ahead.
            cached = np.maximum.accumulate(found, axis=-1)
            self._state.peak_offsets[key] = cached
        return cached

    def _from_each_base(self, residuals: np.ndarray, horizon: int, levels: tuple[float, ...]) -> tuple[np.ndarray, int]:
        """Conformal offsets (bases, levels, horizon) of every level from every base's residuals."""
        found = [
            conformal_offsets(residuals[b : b + 1], (base,), levels, horizon)
            for b, base in enumerate(self.model.base_levels)
        ]
        return np.stack([offsets for offsets, _ in found]), min(short for _, short in found)

    def forecast_windows(self, windows: Mapping[str, SeriesData], horizon: int, levels: tuple[float, ...]) -> Block:
        """Forecasts at ``levels``; the model's base levels are forecast with them, unasked or not, so that a level
        reads the same whatever other levels are asked (placed between them: ``between_anchors``)."""
        full = with_anchors(with_anchors(levels, self.model.base_levels), self._probes)
        return self._forecast_windows(windows, horizon, full).at_levels(len(levels))

    def _forecast_windows(self, windows: Mapping[str, SeriesData], horizon: int, levels: tuple[float, ...]) -> Block:
        state = self._state
        anchors = self.model.base_levels
        uids = sorted(windows)
        block = Block(
            uids,
            [windows[u].end_ns for u in uids],
            np.full((len(uids), len(levels), horizon), np.nan),
            [self.name] * len(uids),
            [""] * len(uids),
            np.full((len(uids), len(levels), horizon), np.nan),
        )
        if horizon <= 0 or not uids:
            return block
        requests = [(windows[u], np.array([len(windows[u].y) - 1])) for u in uids]
        paths = state.paths(self.model, list(zip(uids, requests, strict=True)), horizon)
        rescue: dict[int, str] = {}
        level_rescue: dict[int, dict[int, str]] = {}
        peak_rescue: dict[int, dict[int, str]] = {}
        for i, uid in enumerate(uids):
            stale = _staleness(windows[uid])
            if stale * windows[uid].step_ns >= self.stale_after.total_seconds() * 1e9:
                block.notes[i] = f"{self.name}: no observation in the last {self.stale_after}: no forecast"
                continue
            reason = state.train_notes.get(uid) or self._reason_to_fall_back(uid, horizon, levels)
            if reason:
                rescue[i] = reason
                continue
            found = self.offsets(uid, horizon, levels)
            assert found is not None
            bases = paths[i][:, 0, :]
            scale = self._scale_now(uid, windows[uid])
            values = between_anchors(bases[:, None, :] + found[0] * scale, levels, anchors)
            last = _last_observed(windows[uid])
            # A refused base or a quantile below zero refuses the row; a level's tail too high, that level; the tail
            # probe too high, every tail level.
            refused, failed = row_problems(values, state.ranges.get(uid), last, levels, anchors)
            failed = self._tails_failed(levels, failed)
            if refused:
                rescue[i] = refused
                continue
            block.values[i] = np.maximum(values, 0.0)
            assert block.peaks is not None
            block.peaks[i] = self._peaks(uid, bases, scale, block.values[i], horizon, levels)
            if failed:
                level_rescue[i] = failed
            failed_peaks = level_problems(block.peaks[i], state.ranges.get(uid), last, levels)
            failed_peaks = {k: p for k, p in failed_peaks.items() if k not in failed}
            if failed_peaks:
                peak_rescue[i] = failed_peaks
        if rescue:
            rescue_rows(block, self._backup(block, windows, rescue, horizon, levels), rescue, self.name)
        if level_rescue:
            backup = self._backup(block, windows, level_rescue, horizon, levels)
            rescue_levels(block, backup, level_rescue, self.name, levels, anchors)
        if peak_rescue:
            backup = self._backup(block, windows, peak_rescue, horizon, levels)
            rescue_peaks(block, backup, peak_rescue, self.name, levels, anchors)
        return block

    def _peaks(
        self, uid: str, bases: np.ndarray, scale: float, values: np.ndarray, horizon: int, levels: tuple[float, ...]
    ) -> np.ndarray:
        """Peak quantiles (levels, horizon): the highest of each base so far plus its peak offset, placed between the
        bases (``between_anchors``), never below the highest per-step quantile so far."""
        running: np.ndarray = np.maximum.accumulate(values, axis=1)
        offsets = self.peak_offsets(uid, horizon, levels)
        if offsets is None:
            return running
        highest = np.maximum.accumulate(bases, axis=1)[:, None, :]
        peaks = between_anchors(highest + offsets * scale, levels, self.model.base_levels)
        return np.asarray(np.maximum(peaks, running))

    def _scale_now(self, uid: str, window: SeriesData) -> float:
        """The series' local scale at its newest point, within the scales its calibration saw (the offsets are
        only known to hold there)."""
        floor, residuals = self._state.floors.get(uid), self._state.residuals.get(uid)
        if floor is None or residuals is None or residuals.count == 0:
            return 1.0  # residuals not scaled (plain calibration, or none yet): offsets are in demand units
        steps = self.scale_steps(window.step_ns)
        # only the newest changes count: start at the newest observed value before them (the same scale, cheaply)
        observed = np.flatnonzero(~np.isnan(window.y[: max(len(window.y) - steps, 0)]))
        y = window.y[int(observed[-1]) :] if len(observed) else window.y
        now = float(local_scales(y, np.array([len(y) - 1]), steps, floor)[0])
        return min(max(now, float(residuals.scales.min())), float(residuals.scales.max()))

    def _reason_to_fall_back(self, uid: str, horizon: int, levels: tuple[float, ...]) -> str:
        found = self.offsets(uid, horizon, levels)
        size = self._state.step_ns
        if found is None:
            needed = _duration((MIN_RESIDUALS + self.horizon_steps(size)) * size)
            return f"no calibration residuals for this series (new or too short: it takes {needed} of history)"
        if found[1] < horizon:
            residuals = self._state.residuals[uid]
            if found[1] == residuals.values.shape[2]:
                return f"calibrated {found[1]} steps ahead, asked for {horizon}"
            count = int((~np.isnan(residuals.values[0, :, found[1]])).sum())
            more = _duration((MIN_RESIDUALS - count) * size)
            return (
                f"{count} of the {MIN_RESIDUALS} residuals needed {found[1] + 1} steps ahead: calibrated after about"
                f" {more} more history, at a refit"
            )
        return ""

    def _backup(
        self,
        block: Block,
        windows: Mapping[str, SeriesData],
        rows: Iterable[int],
        horizon: int,
        levels: tuple[float, ...],
    ) -> Block:
        """The fallback's forecasts for some rows of ``block`` (persistence when there is no fallback)."""
        subset = {block.uids[i]: windows[block.uids[i]] for i in rows}
        if self.fallback is not None:
            return self.fallback.forecast_windows(subset, horizon, levels)
        return persistence_block(subset, horizon, levels)


def _duration(nanoseconds: int) -> timedelta:
    return timedelta(microseconds=nanoseconds // 1000)


def _last_observed(series: SeriesData) -> float | None:
    observed = series.y[~np.isnan(series.y)]
    return float(observed[-1]) if len(observed) else None


def _staleness(series: SeriesData) -> int:
    """Steps since the newest observed value (the window's length when there is none)."""
    observed = np.flatnonzero(~np.isnan(series.y))
    return len(series.y) - 1 - int(observed[-1]) if len(observed) else len(series.y) + 10**9


def last_value_forecaster(calibration_horizon: timedelta = CALIBRATION_HORIZON) -> CalibratedForecaster:
    """The calibrated last value: the bar, and every other model's fallback. Should its locally weighted band
    fail the guards (a rare jump in an otherwise still series can stretch it), the same model with one band
    for all hours (plain split conformal) answers instead. It learns nothing, so every residual is out of sample:
    it holds nothing out (``hold_out=False``) and keeps the whole calibration window however young the series."""
    plain = CalibratedForecaster(
        "naive", LastValuePaths, scale_window=None, calibration_horizon=calibration_horizon, hold_out=False
    )
    return CalibratedForecaster(
        "naive", LastValuePaths, fallback=plain, calibration_horizon=calibration_horizon, hold_out=False
    )

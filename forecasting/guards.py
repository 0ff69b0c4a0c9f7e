"""Guards on a forecast before anyone sees it: finite, not negative, not absurd against the series' history; and
the history's stray samples, which a forecast is neither judged nor calibrated against."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from models.demand import MAX_DEMAND

ABSURD_RANGES = 3.0  # how many history ranges above the history's high a forecast may reach
# Per unit of the history's range: a forecast a hair below zero (a damped trend dying out) is clipped, not refused.
NEGATIVE_TOLERANCE = 0.01
# The most extreme samples at each end that the history's range leaves out, at most one in STRAY_SHARE: one bad
# scrape (a counter read as a gauge) must not make a forecast of many times the demand look sane, and a real burst
# lasts longer than that.
STRAY_SAMPLES = 2
STRAY_SHARE = 50


def history_range(observed: np.ndarray) -> tuple[float, float] | None:
    """The (low, high) a series' forecasts are judged against: its observed values without the few most extreme
    at each end (None when nothing was observed)."""
    if not len(observed):
        return None
    ordered = np.sort(observed)
    stray = min(STRAY_SAMPLES, len(ordered) // STRAY_SHARE)
    return float(ordered[stray]), float(ordered[-1 - stray])


def stray_samples(y: np.ndarray) -> np.ndarray:
    """Which samples of ``y`` (NaN: not observed) are stray: left out of the history's range and beyond what the
    guard would let a forecast reach from it, so at most ``STRAY_SAMPLES`` at each end. Such a sample is one bad
    scrape, not demand: a burst long enough to be real is inside the range, and so never stray."""
    found = history_range(y[~np.isnan(y)])
    if found is None:
        return np.zeros(len(y), dtype=bool)
    low, high = found
    spread = _spread(low, high)
    return np.asarray((y > high + ABSURD_RANGES * spread) | (y < -spread))


def _spread(low: float, high: float) -> float:
    """The width a forecast is judged in: the range, or a tenth of its high, or one accelerator."""
    return max(high - low, 0.1 * abs(high), 1.0)


def check_forecast(
    values: np.ndarray,
    history_range: tuple[float, float] | None,
    last: float | None = None,
    levels: Sequence[float] | None = None,
    ceiling: bool = True,
) -> str:
    """Why ``values`` (levels, horizon) cannot be used, or ``""`` when it can.

    ``history_range`` is the series' (low, high), ``last`` its newest observed value: the range is widened to
    take it in, so a burst going on now is judged against itself rather than against the quieter past.
    ``levels`` (one per row of ``values``; None: all held to the median's rule) tell which rows must not be
    negative while the series is above zero: a median or higher quantile below zero then says demand is more
    likely negative than not, so the model is wrong and clipping at zero would only hide it. A lower quantile below
    zero just means that demand may well reach zero, and a model may overshoot below a series that has reached
    zero: both are clipped (unless far below zero). ``ceiling=False`` leaves out the checks of how high it reaches
    (above ``MAX_DEMAND`` or the sane multiple of the history's range).
    """
    if not np.all(np.isfinite(values)):
        return "forecast has NaN or infinite values"
    if ceiling and values.size and values.max() > MAX_DEMAND:
        return f"forecast {values.max():.3g} is above {MAX_DEMAND:g} accelerators, not a plausible demand"
    if history_range is None or not values.size:
        return ""
    low, high = history_range
    if last is not None and np.isfinite(last):
        low, high = min(low, last), max(high, last)
    spread = _spread(low, high)
    if values.min() < -spread:
        return f"forecast {values.min():.3g} is far below zero"
    central = values if levels is None else values[np.asarray(levels) >= 0.5]
    above_zero = last is not None and last > NEGATIVE_TOLERANCE * spread
    if above_zero and central.size and central.min() < -NEGATIVE_TOLERANCE * spread:
        return f"forecast {central.min():.3g} at the median or above is below zero"
    highest = high + ABSURD_RANGES * spread
    if ceiling and values.max() > highest:
        return f"forecast {values.max():.3g} is above {highest:.3g}, beyond a sane multiple of the history's range"
    return ""


def level_problems(
    values: np.ndarray,
    history_range: tuple[float, float] | None,
    last: float | None,
    levels: Sequence[float],
) -> dict[int, str]:
    """``check_forecast`` level by level: why each row of ``values`` (levels, horizon) that cannot be used cannot."""
    problems = _rows_checked(_extremes(values), history_range, last, levels, [True] * len(levels))
    return {k: problem for k, problem in enumerate(problems) if problem}


def row_problems(
    values: np.ndarray,
    history_range: tuple[float, float] | None,
    last: float | None,
    levels: Sequence[float],
    bases: Sequence[float],
) -> tuple[str, dict[int, str]]:
    """Whether a model's forecast (levels, horizon) can be used, as (why the whole row cannot, or ``""``; the levels
    that alone cannot, with why).

    The whole row is refused when any of the model's ``bases`` fails the guards, or any level fails for NaN or
    infinite values or for being below zero (a median or higher quantile below zero means the model is wrong, so
    its other levels are not to be trusted either). Only a level that is not a base and reaches too high (an
    extreme level's extrapolated tail, such as a 0.999 beyond the sane ceiling) is refused alone.
    """
    is_base = [any(abs(level - b) < 1e-9 for b in bases) for level in levels]
    extremes = _extremes(values)
    for problem in _rows_checked(extremes, history_range, last, levels, is_base):
        if problem:
            return problem, {}
    problems = _rows_checked(extremes, history_range, last, levels, [True] * len(levels))
    return "", {k: problem for k, problem in enumerate(problems) if problem}


Extremes = tuple[list[bool], list[float], list[float]] | None  # per row: all finite, highest, lowest (None: empty)


def _extremes(values: np.ndarray) -> Extremes:
    """What the guards read of each row of ``values`` (levels, horizon), taken for all rows at once: row by row,
    numpy's reductions on such short rows were most of the forecasting's time."""
    if not values.shape[1]:
        return None
    finite: list[bool] = np.isfinite(values).all(axis=1).tolist()
    highs: list[float] = values.max(axis=1).tolist()
    lows: list[float] = values.min(axis=1).tolist()
    return finite, highs, lows


def _rows_checked(
    extremes: Extremes,
    history_range: tuple[float, float] | None,
    last: float | None,
    levels: Sequence[float],
    ceilings: Sequence[bool],
) -> list[str]:
    """``check_forecast`` of each row on its own, at its own level and with its own ``ceiling``, from the rows'
    ``extremes``: the same answers (a row with no values passes)."""
    if extremes is None:
        return [""] * len(levels)
    finite, highs, lows = extremes
    return [
        _row_checked(finite[k], highs[k], lows[k], history_range, last, levels[k], ceilings[k])
        for k in range(len(levels))
    ]


def _row_checked(
    finite: bool,
    top: float,
    bottom: float,
    history_range: tuple[float, float] | None,
    last: float | None,
    level: float,
    ceiling: bool,
) -> str:
    """``check_forecast`` of one row of forecasts at ``level``, given whether all are finite and their extremes."""
    if not finite:
        return "forecast has NaN or infinite values"
    if ceiling and top > MAX_DEMAND:
        return f"forecast {top:.3g} is above {MAX_DEMAND:g} accelerators, not a plausible demand"
    if history_range is None:
        return ""
    low, high = history_range
    if last is not None and np.isfinite(last):
        low, high = min(low, last), max(high, last)
    spread = _spread(low, high)
    if bottom < -spread:
        return f"forecast {bottom:.3g} is far below zero"
    above_zero = last is not None and last > NEGATIVE_TOLERANCE * spread
    if above_zero and level >= 0.5 and bottom < -NEGATIVE_TOLERANCE * spread:
        return f"forecast {bottom:.3g} at the median or above is below zero"
    highest = high + ABSURD_RANGES * spread
    if ceiling and top > highest:
        return f"forecast {top:.3g} is above {highest:.3g}, beyond a sane multiple of the history's range"
    return ""

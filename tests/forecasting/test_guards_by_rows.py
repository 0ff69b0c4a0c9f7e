"""The guards judge a forecast's levels from each row's extremes taken at once, and ``between_anchors`` places the
levels from a layout worked out once per set of levels: both must answer exactly as the row-by-row definitions do
(``check_forecast`` on each row alone; each level placed between the anchors around it), to the bit, since the
simulation's results are compared byte for byte across releases."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from forecasting.block import between_anchors
from forecasting.guards import check_forecast, level_problems, row_problems

RANGES = (None, (0.0, 10.0), (5.0, 100.0), (0.0, 0.0), (-1.0, 3.0))
LASTS = (None, 0.0, 3.0, 200.0, float("nan"), 1e-3)
SCALES = (1e-3, 1.0, 50.0, 1e4, 1e7)


def _levels(rng: np.random.Generator) -> tuple[float, ...]:
    count = int(rng.integers(1, 16))
    found = sorted(set(np.round(rng.uniform(0.01, 0.999, count), 3).tolist()))
    return tuple(float(q) for q in rng.permutation(found))


def _values(rng: np.random.Generator, rows: int, horizon: int) -> np.ndarray:
    values = rng.normal(0.0, 1.0, (rows, horizon)) * SCALES[int(rng.integers(len(SCALES)))]
    if rng.random() < 0.3:
        values[rng.random(values.shape) < 0.1] = rng.choice([np.nan, np.inf, -np.inf, -0.0])
    return values


def _row_by_row(
    values: np.ndarray,
    history: tuple[float, float] | None,
    last: float | None,
    levels: Sequence[float],
    bases: Sequence[float],
) -> tuple[str, dict[int, str]]:
    """The guards as defined: every level's row checked on its own, the ceiling only at a base for the refusal."""
    for k, level in enumerate(levels):
        is_base = any(abs(level - b) < 1e-9 for b in bases)
        problem = check_forecast(values[k : k + 1], history, last, levels[k : k + 1], ceiling=is_base)
        if problem:
            return problem, {}
    return "", _each_level(values, history, last, levels)


def _each_level(
    values: np.ndarray, history: tuple[float, float] | None, last: float | None, levels: Sequence[float]
) -> dict[int, str]:
    each = {k: check_forecast(values[k : k + 1], history, last, levels[k : k + 1]) for k in range(len(levels))}
    return {k: problem for k, problem in each.items() if problem}


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), horizon=st.integers(0, 13), which=st.integers(0, 10**6))
def test_the_guards_answer_as_each_row_checked_alone(seed: int, horizon: int, which: int) -> None:
    rng = np.random.default_rng(seed)
    levels = _levels(rng)
    bases = tuple(float(b) for b in rng.choice(levels, int(rng.integers(1, min(3, len(levels)) + 1)), replace=False))
    values = _values(rng, len(levels), horizon)
    history, last = RANGES[which % len(RANGES)], LASTS[which % len(LASTS)]
    expected = _row_by_row(values, history, last, levels, bases)
    assert row_problems(values, history, last, levels, bases) == expected
    assert level_problems(values, history, last, levels) == _each_level(values, history, last, levels)


def test_the_guards_name_each_failing_level_with_its_figure() -> None:
    levels = (0.5, 0.9, 0.999)
    values = np.array([[10.0, 12.0], [14.0, 15.0], [400.0, 900.0]])
    assert row_problems(values, (0.0, 100.0), 20.0, levels, (0.5, 0.9)) == (
        "",
        {2: "forecast 900 is above 400, beyond a sane multiple of the history's range"},
    )
    below = np.array([[-5.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
    assert row_problems(below, (0.0, 100.0), 20.0, levels, (0.5, 0.9)) == (
        "forecast -5 at the median or above is below zero",
        {},
    )


def _between_by_level(candidates: np.ndarray, levels: Sequence[float], anchors: Sequence[float]) -> np.ndarray:
    """``between_anchors`` as defined, level by level."""
    order = sorted(range(len(anchors)), key=lambda a: anchors[a])
    at = [next(k for k, q in enumerate(levels) if abs(q - anchors[a]) < 1e-9) for a in order]
    fixed = np.maximum.accumulate(np.stack([candidates[a, k] for a, k in zip(order, at, strict=True)]), axis=0)
    out = np.empty(candidates.shape[1:])
    for k, level in enumerate(levels):
        if k in at:
            out[k] = fixed[at.index(k)]
            continue
        below = [j for j, a in enumerate(order) if anchors[a] < level]
        above = [j for j, a in enumerate(order) if anchors[a] > level]
        around = ([below[-1]] if below else []) + ([above[0]] if above else [])
        value = np.max([candidates[order[j], k] for j in around], axis=0)
        if below:
            value = np.maximum(value, fixed[below[-1]])
        if above:
            value = np.minimum(value, fixed[above[0]])
        out[k] = value
    return out


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), horizon=st.integers(0, 13))
def test_levels_between_anchors_are_placed_as_level_by_level(seed: int, horizon: int) -> None:
    rng = np.random.default_rng(seed)
    levels = _levels(rng)
    anchors = tuple(float(a) for a in rng.choice(levels, int(rng.integers(1, min(3, len(levels)) + 1)), replace=False))
    candidates = np.stack([_values(rng, len(levels), horizon) for _ in anchors])
    got = between_anchors(candidates, levels, anchors)
    assert got.tobytes() == _between_by_level(candidates, levels, anchors).tobytes()
    again = between_anchors(candidates[::-1].copy(), levels, anchors[::-1])  # the same layout, anchors given reversed
    assert again.tobytes() == _between_by_level(candidates[::-1].copy(), levels, anchors[::-1]).tobytes()

"""What a series' forecast costs in guards and level placement, once per model, series and tick: the guards
(``row_problems``, ``level_problems``) and ``between_anchors`` against their row-by-row definitions, measured in
the same process on the demo's shape (the equal-service search's 11 levels with the judged ones and the tail probe:
15 levels, 3 base levels, 7 steps ahead). Prints the ratio of the definitions' time to the functions'.

    .venv/bin/python -m bench.bench_forecast_guards
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from forecasting.block import between_anchors
from forecasting.guards import check_forecast, level_problems, row_problems

LEVELS = (0.5, 0.7, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995, 0.998, 0.999, 0.6, 0.85, 0.75, 0.65)
BASES = (0.5, 0.9, 0.95)
HORIZON = 7
CALLS = 2000


def _by_rows(values: np.ndarray, history: tuple[float, float], last: float, levels: Sequence[float]) -> None:
    for k, level in enumerate(levels):
        ceiling = any(abs(level - b) < 1e-9 for b in BASES)
        if check_forecast(values[k : k + 1], history, last, levels[k : k + 1], ceiling=ceiling):
            return
    for k in range(len(levels)):
        check_forecast(values[k : k + 1], history, last, levels[k : k + 1])
    for k in range(len(levels)):  # the peaks' check
        check_forecast(values[k : k + 1], history, last, levels[k : k + 1])


def _by_level(candidates: np.ndarray, levels: Sequence[float], anchors: Sequence[float]) -> np.ndarray:
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


def _timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    for _ in range(CALLS):
        run()
    return time.perf_counter() - start


def main() -> None:
    rng = np.random.default_rng(1)
    candidates = 40 + np.cumsum(rng.normal(0, 3, (len(BASES), len(LEVELS), HORIZON)), axis=2)
    values = between_anchors(candidates, LEVELS, BASES)
    history, last = (0.0, 120.0), 42.0

    def guards() -> None:
        row_problems(values, history, last, LEVELS, BASES)
        level_problems(values, history, last, LEVELS)

    for name, definition, function in (
        ("guards", lambda: _by_rows(values, history, last, LEVELS), guards),
        (
            "between_anchors",
            lambda: _by_level(candidates, LEVELS, BASES),
            lambda: between_anchors(candidates, LEVELS, BASES),
        ),
    ):
        _timed(function)  # warm caches on both sides
        slow, fast = _timed(definition), _timed(function)
        print(f"{name}: row by row / now = {slow / fast:.1f}x ({CALLS} calls)")


if __name__ == "__main__":
    main()

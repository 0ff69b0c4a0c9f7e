"""The perfect-foresight oracle: the cheapest way to serve all demand with the given units and lead times.

Billing starts when a unit is requested and stops when it is released, and a unit takes the pool's lead time to
become ready. For one pool, units are interchangeable, so the cheapest schedule is found level by level: the
k-th unit is needed whenever demand needs at least k units; across a gap in that need it is kept when the gap is
no longer than the lead time (releasing and re-requesting would cost the lead time anyway), and it is requested
one lead time before each period of need. With several pools, demand is first split cheapest-first (the same
rule the planner uses), so the figure is the floor for that split.
"""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np


def oracle_schedule(required: np.ndarray, lead: timedelta, step: timedelta, initial: int) -> np.ndarray:
    """Units to hold (paid) at each step so that ``required[t]`` units are ready at every step ``t``.

    ``initial`` units are ready at step 0 (requested before the window). Returns an int array like ``required``.
    """
    steps = len(required)
    lead_steps = math.ceil(lead / step) if lead > timedelta(0) else 0
    held = np.zeros(steps, dtype=int)
    top = int(required.max(initial=0))
    for level in range(1, max(top, initial) + 1):
        needed = required >= level
        held += _hold_level(needed, lead_steps, owned_at_start=level <= initial)
    return held


def _hold_level(needed: np.ndarray, lead_steps: int, owned_at_start: bool) -> np.ndarray:
    held = np.zeros(len(needed), dtype=int)
    periods = _periods(needed)
    if not periods:
        return held
    previous_end: int | None = None
    for start, end in periods:  # [start, end)
        if previous_end is None:
            begin = 0 if owned_at_start else max(0, start - lead_steps)
        elif start - previous_end <= lead_steps:
            begin = previous_end
        else:
            begin = start - lead_steps
        held[begin:end] = 1
        previous_end = end
    return held


def _periods(mask: np.ndarray) -> list[tuple[int, int]]:
    if not mask.any():
        return []
    padded = np.r_[False, mask, False].astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return [(int(edges[i]), int(edges[i + 1])) for i in range(0, len(edges), 2)]

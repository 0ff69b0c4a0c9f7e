"""The perfect-foresight oracle: the cheapest way to serve all demand with the given units and lead times.

Billing starts when a unit is requested and stops when it is released, and a unit takes the pool's lead time
``L`` to become ready. A unit needed at step ``s`` must have been requested by ``s - L`` and held since, so at
any step ``t`` at least ``max(required[t .. t + L])`` units are being paid for: that sliding maximum is a lower
bound. It is also feasible when releases cancel units still in flight first (as managed instance groups and the
simulated cluster do), so it is the optimum for one pool. With several pools, demand is first split
cheapest-first (the same rule the planner uses), so the figure is the floor for that split.
"""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def oracle_schedule(required: np.ndarray, lead: timedelta, step: timedelta) -> np.ndarray:
    """Units to hold (paid) at each step so that ``required[t]`` units are ready at every step ``t``.

    The schedule starts with ``max(required[0 .. L])`` units, which is what every policy starts with.
    """
    lead_steps = math.ceil(lead / step) if lead > timedelta(0) else 0
    if len(required) == 0:
        return np.zeros(0, dtype=int)
    padded = np.concatenate([required.astype(int), np.zeros(lead_steps, dtype=int)])
    return np.asarray(sliding_window_view(padded, lead_steps + 1).max(axis=1), dtype=int)

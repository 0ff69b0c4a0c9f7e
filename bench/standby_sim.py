"""A fast replay of the standby rule family on pools of whole units, vectorised over many configurations.

The rule: at each step a pool asks for ``need(t) + s[k(t)]`` units (clamped to its size), where ``need`` is the
units the demand needs now and ``k(t)`` the bucket of how long ``need`` has been unchanged. Units asked for are
paid from the request and ready one lead time later; units no longer asked for are released once idle for the
hold (``hold`` steps), in-flight units cancelled first (latest first), then ready ones, longest idle first. This
mirrors ``agent.simulation.runner.drive`` with ``actuators.simulated.SimulatedCluster`` and the planner's
``_scale_up`` / ``_scale_down`` (no step limits, no cooldown, on-demand units), for one pool serving one class.
Many standby tables are replayed at once, one row each, so that every combination of a few units per bucket can be
tried on two weeks of five-minute steps in minutes.
"""

from __future__ import annotations

import numpy as np

from bench.unseen_jumps import unchanged_for

N_BUCKETS = 7  # 0-5 by how long the need has been unchanged; 6: not long after a fall


def buckets(need: np.ndarray, observed: np.ndarray, base: int, dropped: bool) -> np.ndarray:
    """Per step the bucket of how long the need has been unchanged (``unchanged_for``: 0 at a change or after a
    gap): 0 for under ``base`` steps, then 1 for [base, 2 base), 2 for [2 base, 4 base), ..., 5 for 16 base or
    longer; with ``dropped``, 6 for under ``base`` steps after a fall (bucket 0 then means under ``base`` steps
    after a rise, or after a gap)."""
    runs = unchanged_for(need, observed.astype(bool))
    out = np.zeros(len(need), dtype=np.int64)
    for i, low in enumerate((1, 2, 4, 8, 16), start=1):
        out[runs >= low * base] = i
    if dropped:
        last_dir = np.zeros(len(need), dtype=np.int64)  # -1 when the last change was a fall
        d = 0
        for t in range(1, len(need)):
            if observed[t] and observed[t - 1] and need[t] != need[t - 1]:
                d = -1 if need[t] < need[t - 1] else 1
            elif not (observed[t] and observed[t - 1]):
                d = 0
            last_dir[t] = d
        out[(out == 0) & (last_dir < 0)] = 6
    return out


def simulate(  # noqa: PLR0915
    need: np.ndarray,
    demand: np.ndarray,
    observed: np.ndarray,
    bucket: np.ndarray,
    table: np.ndarray,
    day_of: np.ndarray,
    lead: int,
    hold: int,
    max_units: int,
    chips: int,
    start_units: np.ndarray,
    n_days: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Replay rows (configurations) at once. ``need`` (units), ``demand`` (chips, NaN on gaps), ``bucket``:
    (rows, T) or (T,); ``observed``: (T,), the steps billed and served (at a gap every idle unit starts its hold
    again, as the simulated cluster forgets idle time there); ``table``: (rows, days, buckets) standby units per
    row, day and bucket, or (rows, 1, buckets) for every day; ``day_of``: (T,) each step's day; ``lead`` and
    ``hold`` in steps; ``start_units``: (rows,) ready at the first step. Returns (rows, ``n_days``) arrays: the
    unit-steps paid and the chip-steps unserved per day, on observed steps only."""
    if lead < 1:
        raise ValueError(f"lead must be at least one step, not {lead}")
    rows = table.shape[0]
    steps = len(observed)
    need = np.broadcast_to(need, (rows, steps)) if need.ndim == 1 else need
    demand = np.broadcast_to(np.nan_to_num(demand), (rows, steps)) if demand.ndim == 1 else np.nan_to_num(demand)
    bucket = np.broadcast_to(bucket, (rows, steps)) if bucket.ndim == 1 else bucket
    ready = start_units.astype(np.int64).copy()
    ring = np.zeros((rows, lead), dtype=np.int64)  # ring[:, j]: units arriving at a step = j (mod lead)
    ages = np.zeros((rows, hold + 1), dtype=np.int64)  # idle units by steps idle at the tick (index hold: >= hold)
    paid_days = np.zeros((rows, n_days))
    short_days = np.zeros((rows, n_days))
    r = np.arange(rows)
    flight = np.zeros(rows, dtype=np.int64)
    for t in range(steps):
        slot = t % lead
        ready += ring[:, slot]  # advance: arrivals due now
        flight -= ring[:, slot]
        ring[:, slot] = 0
        # ages at this tick: every idle unit is one step older than at the last serve
        if hold > 0:
            ages[:, hold] += ages[:, hold - 1]
            ages[:, 1:hold] = ages[:, : hold - 1]
            ages[:, 0] = 0
        seen = t - 1  # the tick at t has the demand of the steps before t (the step's own value comes after)
        if seen >= 0 and observed[seen]:
            n = need[:, seen]
            desired = np.minimum(n + table[r, day_of[t] if table.shape[1] > 1 else 0, bucket[:, seen]], max_units)
            current = ready + flight
            up = desired > current
            if up.any():
                add = desired[up] - current[up]
                ring[up, slot] += add
                flight[up] += add
            settled = ages[:, hold]
            release = np.where(desired < current, np.minimum(current - desired, settled), 0)
            if release.any():
                # cancel in flight, latest arriving first: arrivals at t + lead - 1, t + lead - 2, ..., t + 1
                left = release.copy()
                for j in range(lead - 1, 0, -1):
                    s = (t + j) % lead
                    take = np.minimum(left, ring[:, s])
                    ring[:, s] -= take
                    flight -= take
                    left -= take
                ready -= left
                # then ready units, longest idle first (all of them settled ones)
                ages[:, hold] -= left
        paid = ready + flight
        if not observed[t]:
            ages[:] = 0
            continue
        d = day_of[t]
        paid_days[:, d] += paid
        capacity = ready * chips
        short_days[:, d] += np.maximum(demand[:, t] - capacity, 0.0)
        used = np.minimum(ready, need[:, t])
        idle = ready - used
        total = ages.sum(axis=1)
        drop = total - idle  # idle units given work: the youngest first
        more = -drop
        if (drop > 0).any():
            cum = np.cumsum(ages, axis=1)
            upto = np.minimum(cum, np.maximum(drop, 0)[:, None])
            removed = np.diff(upto, axis=1, prepend=0)
            ages -= removed
        ages[:, 0] += np.maximum(more, 0)
    return paid_days, short_days

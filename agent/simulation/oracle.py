"""The perfect-foresight oracle: the cheapest way to serve all demand, once it is split between the pools in the
planner's fill order, with the given units and lead times.

Billing starts when a unit is requested and stops when it is released, and a unit takes the pool's lead time
``L`` to become ready. A unit needed at step ``s`` must have been requested by ``s - L`` and held since, so at
any step ``t`` at least ``max(required[t .. t + L])`` units are being paid for: that sliding maximum is a lower
bound. It is also feasible when releases cancel units still in flight first (as managed instance groups and the
simulated cluster do), so it is the optimum for one pool. With several pools, demand is first split step by step
in the fill order (on-prem, reserved, spot, on-demand; then price per chip: ``models.allocation``), so the figure
is the floor for that split. It is the floor over every split when classes that share a pool may use the same
pools (an on-prem pool of one class's own aside) and the scalable ones share one lead time and one unit size, fill
cheapest per chip first and hold no dearer unit at min_units: then over any window of ``L + 1`` steps, moving
chips to a dearer pool never lowers what is held. Otherwise another split can cost less: a dearer pool ready
sooner holds a short burst for fewer steps (one-step bursts of 8 GPUs every 2 hours: spot at 0.6 USD per chip-hour
with a 30-minute lead time costs 16.8 USD, on-demand at 1.0 with a 10-minute lead time 12.0 USD), a pool of
smaller units rounds small demand up less, the min_units a dearer pool holds anyway could serve what a cheaper one
is paid for, and a class filled first can take a pool that another class could use and it could have done without.
``floor_caveats`` says which of these a set of pools has.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from datetime import timedelta

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from config.durations import format_duration
from models import PoolKind, PoolSpec


def oracle_schedule(required: np.ndarray, lead: timedelta, step: timedelta) -> np.ndarray:
    """Units to hold (paid) at each step so that ``required[t]`` units are ready at every step ``t``.

    The schedule starts with ``max(required[0 .. L])`` units, which is what every policy starts with.
    """
    lead_steps = math.ceil(lead / step) if lead > timedelta(0) else 0
    if len(required) == 0:
        return np.zeros(0, dtype=int)
    padded = np.concatenate([required.astype(int), np.zeros(lead_steps, dtype=int)])
    return np.asarray(sliding_window_view(padded, lead_steps + 1).max(axis=1), dtype=int)


def floor_caveats(pools: Sequence[PoolSpec]) -> list[str]:
    """Why the oracle may cost more than the cheapest way to serve all demand on ``pools`` (see the module's text);
    empty when it is that floor. On-prem pools are held whole whatever the split, so only the scalable pools that
    may serve a class are compared with each other."""
    classes = sorted({n for p in pools for n in p.serves})
    caveats = _overlaps(pools, classes)
    seen: set[tuple[str, ...]] = set()
    for name in classes:
        scalable = sorted(
            (p for p in pools if name in p.serves and p.kind is not PoolKind.ON_PREM), key=lambda p: p.fill_key
        )
        ids = tuple(p.pool_id for p in scalable)
        if len(scalable) < 2 or ids in seen:
            continue
        seen.add(ids)
        if len({p.lead_time for p in scalable}) > 1:
            leads = ", ".join(f"{p.pool_id} {format_duration(p.lead_time)}" for p in scalable)
            caveats.append(f"pools that may serve the same classes differ in lead time ({leads})")
        if len({p.chips_per_unit for p in scalable}) > 1:
            sizes = ", ".join(f"{p.pool_id} {p.chips_per_unit}" for p in scalable)
            caveats.append(f"pools that may serve the same classes differ in chips per unit ({sizes})")
        prices = [p.price_per_chip_hour_usd for p in scalable]
        if any(later < earlier for earlier, later in itertools.pairwise(prices)):
            order = ", ".join(f"{p.pool_id} {p.price_per_chip_hour_usd:g}" for p in scalable)
            caveats.append(f"the fill order takes a pool dearer per chip-hour first ({order} USD)")
        if any(p.min_units > 0 for p in scalable[1:]):
            kept = ", ".join(f"{p.pool_id} {p.min_units}" for p in scalable[1:] if p.min_units > 0)
            caveats.append(f"pools filled after another of the same classes hold min_units paid anyway ({kept})")
    return caveats


def _overlaps(pools: Sequence[PoolSpec], classes: Sequence[str]) -> list[str]:
    """Classes that share some of their pools but not all: filled one class at a time, a class can take room that
    another could use and it could have done without. A class's own on-prem pools (serving no other class) are
    left out when it has no other on-prem pool: it fills them first and nobody else could use them."""
    key: dict[str, frozenset[str]] = {}
    for name in classes:
        mine = [p for p in pools if name in p.serves]
        own = {p.pool_id for p in mine if p.kind is PoolKind.ON_PREM and len(set(p.serves)) == 1}
        shared_onprem = any(p.kind is PoolKind.ON_PREM and p.pool_id not in own for p in mine)
        key[name] = frozenset(p.pool_id for p in mine if shared_onprem or p.pool_id not in own)
    pairs = [(a, b) for a, b in itertools.combinations(sorted(set(key.values()), key=sorted), 2) if a & b]
    if not pairs:
        return []
    a, b = pairs[0]
    first = " and ".join(sorted(min(n for n in classes if key[n] == k) for k in (a, b)))
    more = f", and {len(pairs) - 1} more such pair(s) of pool sets" if len(pairs) > 1 else ""
    return [f"classes share some of their pools but not all ({first} share {', '.join(sorted(a & b))}{more})"]

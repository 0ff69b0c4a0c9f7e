"""The history behind a paced burst budget: each demand group's burst need (demand above the on-prem capacity it
may use) averaged per hour of the day, UTC: a seasonal profile, cheap enough to refresh every hour.

The mean is weighted by recency: a step's weight halves with every ``HALF_LIFE`` of age before the newest step.
A burst need that has been falling for days is then forecast near its recent level rather than the whole
history's, so that pacing does not ration today's demand for a need that has already passed (on the Helios
hybrid window the unweighted week-long mean overestimated the remaining need of the last five days 1.1-3.5x and
left money unspent at the period end).

The on-prem capacity a step's burst is measured above is the one the tick measures it above: each on-prem pool's
units that could take work at that step, read with its capacity query over the history (``capacity``), at most its
``max_units``, and its ``max_units`` where that read has no value or none that is a count of units, as a tick plans
on. Measured above ``max_units`` alone, a week with 10 of 40 nodes down counted a third of the burst the cloud
served, and pacing spent for that third: the money ran out halfway through the period.

A step where any member of a group has no value counts nothing for that group (never as zero demand); a group
with an hour of the day never observed has no profile, and the planner then does not pace on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta

import numpy as np
import pandas as pd

from agent.planning.groups import DemandGroup
from agent.planning.pacing import HOURS_A_DAY, BurstProfile, onprem_chips
from models import PoolKind, PoolSpec

HALF_LIFE = timedelta(days=1)


def burst_profile(
    history: pd.DataFrame,
    groups: Sequence[DemandGroup],
    pools: Mapping[str, PoolSpec],
    capacity: Mapping[str, pd.Series] | None = None,
) -> BurstProfile:
    """Recency-weighted mean burst need per hour of the day per group, from a ``unique_id, ds, y`` frame of class
    demand, above the on-prem units ``capacity`` read at each step (per pool, as read; ``max_units`` where it has
    none)."""
    if history.empty:
        return BurstProfile({})
    wide = history.pivot_table(index="ds", columns="unique_id", values="y", aggfunc="mean", dropna=False)
    stamps = pd.DatetimeIndex(wide.index).tz_convert("UTC")
    hours = stamps.hour
    age = (stamps[-1] - stamps) / HALF_LIFE
    weights = pd.Series(np.power(0.5, np.asarray(age, dtype=float)), index=wide.index)
    profiles: dict[str, tuple[float, ...]] = {}
    for group in groups:
        if any(m not in wide.columns for m in group.members):
            continue
        total = wide[list(group.members)].sum(axis=1, skipna=False)
        burst = (total - _onprem_chips(group, pools, capacity or {}, wide.index)).clip(lower=0.0)
        seen = weights.where(burst.notna(), 0.0)
        weighted = (burst.fillna(0.0) * seen).groupby(hours).sum()
        mass = seen.groupby(hours).sum()
        by_hour = (weighted / mass.where(mass > 0.0)).reindex(range(HOURS_A_DAY))
        values = by_hour.to_numpy(dtype=float)
        if np.isnan(values).any():
            continue
        profiles[group.name] = tuple(float(v) for v in values)
    return BurstProfile(profiles)


def _onprem_chips(
    group: DemandGroup, pools: Mapping[str, PoolSpec], capacity: Mapping[str, pd.Series], index: pd.Index
) -> pd.Series | float:
    """The on-prem chips ``group`` may use at each step of ``index``: each on-prem pool's units read then, judged as
    a tick judges them (``agent.onprem_capacity.read_onprem``: a fraction rounded down, at most ``max_units``; no
    value, or one that is not a count of units, is ``max_units``)."""
    chips: pd.Series | float = onprem_chips(group, pools)
    for pool_id in sorted(group.pools):
        pool = pools.get(pool_id)
        read = capacity.get(pool_id)
        if pool is None or pool.kind is not PoolKind.ON_PREM or read is None:
            continue
        values = read.reindex(index).to_numpy(dtype=float)
        counted = np.isfinite(values) & (values >= 0.0)
        units = np.where(counted, np.minimum(np.floor(np.where(counted, values, 0.0) + 1e-9), pool.max_units), 0.0)
        short = np.where(counted, pool.max_units - units, 0.0) * pool.chips_per_unit
        chips = chips - pd.Series(short, index=index)
    return chips

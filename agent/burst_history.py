"""The history behind a paced burst budget: each demand group's burst need (demand above the on-prem capacity it
may use) averaged per hour of the day, UTC: a seasonal profile, cheap enough to refresh every hour.

The mean is weighted by recency: a step's weight halves with every ``HALF_LIFE`` of age before the newest step.
A burst need that has been falling for days is then forecast near its recent level rather than the whole
history's, so that pacing does not ration today's demand for a need that has already passed (on the Helios
hybrid window the unweighted week-long mean overestimated the remaining need of the last five days 1.1-3.5x and
left money unspent at the period end).

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
from models import PoolSpec

HALF_LIFE = timedelta(days=1)


def burst_profile(history: pd.DataFrame, groups: Sequence[DemandGroup], pools: Mapping[str, PoolSpec]) -> BurstProfile:
    """Recency-weighted mean burst need per hour of the day per group, from a ``unique_id, ds, y`` frame of class
    demand."""
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
        burst = (total - onprem_chips(group, pools)).clip(lower=0.0)
        seen = weights.where(burst.notna(), 0.0)
        weighted = (burst.fillna(0.0) * seen).groupby(hours).sum()
        mass = seen.groupby(hours).sum()
        by_hour = (weighted / mass.where(mass > 0.0)).reindex(range(HOURS_A_DAY))
        values = by_hour.to_numpy(dtype=float)
        if np.isnan(values).any():
            continue
        profiles[group.name] = tuple(float(v) for v in values)
    return BurstProfile(profiles)

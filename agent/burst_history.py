"""The history behind a paced burst budget: each demand group's burst need (demand above the on-prem capacity it
may use) averaged per hour of the day, UTC: a seasonal profile, cheap enough to refresh every hour.

A step where any member of a group has no value counts nothing for that group (never as zero demand); a group
with an hour of the day never observed has no profile, and the planner then does not pace on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from agent.planning.groups import DemandGroup
from agent.planning.pacing import HOURS_A_DAY, BurstProfile, onprem_chips
from models import PoolSpec


def burst_profile(history: pd.DataFrame, groups: Sequence[DemandGroup], pools: Mapping[str, PoolSpec]) -> BurstProfile:
    """Mean burst need per hour of the day per group, from a ``unique_id, ds, y`` frame of class demand."""
    if history.empty:
        return BurstProfile({})
    wide = history.pivot_table(index="ds", columns="unique_id", values="y", aggfunc="mean", dropna=False)
    hours = pd.DatetimeIndex(wide.index).tz_convert("UTC").hour
    profiles: dict[str, tuple[float, ...]] = {}
    for group in groups:
        if any(m not in wide.columns for m in group.members):
            continue
        total = wide[list(group.members)].sum(axis=1, skipna=False)
        burst = (total - onprem_chips(group, pools)).clip(lower=0.0)
        by_hour = burst.groupby(hours).mean().reindex(range(HOURS_A_DAY))
        values = by_hour.to_numpy(dtype=float)
        if np.isnan(values).any():
            continue
        profiles[group.name] = tuple(float(v) for v in values)
    return BurstProfile(profiles)

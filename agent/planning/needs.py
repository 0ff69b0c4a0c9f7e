"""What each demand group needs: max(forecast quantile of its peak over the lead time and one tick, demand observed
now), and which classes are unknown (their pools are held). Pure.
"""

from __future__ import annotations

import math

from agent.planning.groups import DemandGroup
from agent.planning.plan_input import PlanInput, plan_groups
from models import DemandForecast, DemandShare, PoolKind


def group_shares(given: PlanInput) -> tuple[dict[str, DemandShare], set[str]]:
    """What each demand group needs, and why; and the classes whose demand is unknown (hold their pools).

    Need = max(forecast quantile over the horizon, demand observed now). A group of several classes uses the
    forecast of its summed demand when there is one, else the sum of its members' forecasts. A group with
    neither a forecast nor an observation has no entry.
    """
    shares: dict[str, DemandShare] = {}
    unknown: set[str] = set()
    for group in plan_groups(given):
        observed = [_known(given.observed.get(name)) for name in group.members]
        missing = [n for n, o in zip(group.members, observed, strict=True) if o is None or n not in given.forecasts]
        if missing:
            unknown.update(group.members)  # a pool shared with an unknown class is held as a whole
        seen = any(o is not None for o in observed)
        floor = sum(o for o in observed if o is not None)
        steps = horizon_steps(given, group)
        level = given.service_levels.get(group.name) or max(given.service_levels.get(n, 0.9) for n in group.members)
        peak = _peak(given.forecasts.get(group.name), level, steps) if group.is_aggregate else None
        if peak is None:
            peaks = [_peak(given.forecasts.get(n), level, steps) for n in group.members]
            known_peaks = [p for p in peaks if p is not None]
            peak = sum(known_peaks) if known_peaks else None
        candidates = [v for v in (peak, floor if seen else None) if v is not None]
        if candidates:
            need = max(candidates)
            shares[group.name] = DemandShare(group.name, level, peak, floor if seen else None, need, need)
    return shares, unknown


def _known(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


def _peak(forecast: DemandForecast | None, level: float, steps: int | None) -> float | None:
    """The forecast's calibrated quantile of the highest demand over ``steps`` (see ``DemandForecast.peak``)."""
    if forecast is None:
        return None
    peak = forecast.peak(level, steps)
    return None if math.isnan(peak) else peak


def horizon_steps(given: PlanInput, group: DemandGroup) -> int | None:
    """Forecast steps that matter: the longest lead time among the group's scalable pools, plus one tick."""
    leads = [p.lead_time for p in given.pools if p.pool_id in group.pools and p.kind is not PoolKind.ON_PREM]
    if not leads:
        return None
    step = given.forecast_step or given.tick
    return max(1, math.ceil((max(leads) + given.tick) / step))

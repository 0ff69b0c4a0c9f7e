"""What each demand group needs: max(forecast quantile of its peak over the lead time and one tick, demand observed
now), and which classes are unknown (their pools are held). Pure.

A group without a forecast of its summed demand is planned on the sum of its members' peaks, of the members that
have one: the share says which (``DemandShare.summed``), so that the sum is not told as the group's peak, and which
members lack a figure: no current value nor forecast (``missing``), a forecast but no current value (``no_current``:
its peak is summed, nothing of it is in the observed figure), a current value but no forecast (``no_forecast``: its
value now is in the observed figure, nothing of it in a summed peak). The pools of a group with a member
without data are held as a whole, and a hold names only the members without data (``Unknown``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from agent.planning.groups import DemandGroup
from agent.planning.plan_input import PlanInput, plan_groups
from models import DemandForecast, DemandShare, PoolKind, PoolSpec

Unknown = Mapping[str, tuple[str, ...]]
"""Each class whose pools are held for missing data -> the classes of its group without trustworthy demand."""


def group_shares(given: PlanInput) -> tuple[dict[str, DemandShare], Unknown]:
    """What each demand group needs, and why; and the classes whose pools are held for missing data, each with the
    members of its group that have no trustworthy demand (``missing_for`` names them for a pool).

    Need = max(forecast quantile over the horizon, demand observed now). A group of several classes uses the
    forecast of its summed demand when there is one, else the sum of its members' forecasts. A group with
    neither a forecast nor an observation has no entry.
    """
    shares: dict[str, DemandShare] = {}
    unknown: dict[str, tuple[str, ...]] = {}
    for group in plan_groups(given):
        observed = [_known(given.observed.get(name)) for name in group.members]
        steps = horizon_steps(given, group)
        level = given.service_levels.get(group.name) or max(given.service_levels.get(n, 0.9) for n in group.members)
        peaks = {n: _peak(given.forecasts.get(n), level, steps) for n in group.members}
        # a forecast with a figure that is not finite is no forecast: its class's pools are held, as without one
        missing = tuple(n for n, o in zip(group.members, observed, strict=True) if o is None or peaks[n] is None)
        if missing:
            unknown.update(dict.fromkeys(group.members, missing))  # a pool shared with an unknown class is held whole
        seen = any(o is not None for o in observed)
        floor = sum(o for o in observed if o is not None)
        peak = _peak(given.forecasts.get(group.name), level, steps) if group.is_aggregate else None
        summed: tuple[str, ...] = ()
        if peak is None:
            known_peaks = {n: p for n, p in peaks.items() if p is not None}
            peak = sum(known_peaks.values()) if known_peaks else None
            summed = tuple(known_peaks) if group.is_aggregate else ()
        candidates = [v for v in (peak, floor if seen else None) if v is not None]
        if candidates:
            need = max(candidates)
            gaps = _gaps(group, observed, peaks) if group.is_aggregate else _Gaps()  # a class alone: its own share
            shares[group.name] = DemandShare(
                group.name,
                level,
                peak,
                floor if seen else None,
                need,
                need,
                summed=summed,
                missing=gaps.missing,
                no_current=gaps.no_current,
                no_forecast=gaps.no_forecast,
                own_peak=group.is_aggregate and peak is not None and not summed,
            )
    return shares, unknown


@dataclass(frozen=True)
class _Gaps:
    """A group's classes lacking a figure, each in one list: neither a current value nor a forecast (``missing``),
    a forecast but no current value (``no_current``), a current value (kept with it) but no forecast."""

    missing: tuple[str, ...] = ()
    no_current: tuple[str, ...] = ()
    no_forecast: tuple[tuple[str, float], ...] = ()


def _gaps(group: DemandGroup, observed: list[float | None], peaks: Mapping[str, float | None]) -> _Gaps:
    now = dict(zip(group.members, observed, strict=True))
    return _Gaps(
        missing=tuple(n for n in group.members if now[n] is None and peaks[n] is None),
        no_current=tuple(n for n in group.members if now[n] is None and peaks[n] is not None),
        no_forecast=tuple((n, v) for n in group.members if (v := now[n]) is not None and peaks[n] is None),
    )


def missing_for(pool: PoolSpec, unknown: Unknown) -> list[str]:
    """The classes without trustworthy demand that hold ``pool`` (those of the groups of the classes it serves);
    empty when it is not held for missing data."""
    return sorted({name for served in pool.serves for name in unknown.get(served, ())})


def _known(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else value


def _peak(forecast: DemandForecast | None, level: float, steps: int | None) -> float | None:
    """The forecast's calibrated quantile of the highest demand over ``steps`` (see ``DemandForecast.peak``); None
    without a forecast or when a figure it reads is not finite (NaN, infinite): such a forecast counts as missing."""
    if forecast is None:
        return None
    peak = forecast.peak(level, steps)
    return None if not math.isfinite(peak) else peak


def horizon_steps(given: PlanInput, group: DemandGroup) -> int | None:
    """Forecast steps that matter: the longest lead time among the group's scalable pools, plus one tick."""
    leads = [p.lead_time for p in given.pools if p.pool_id in group.pools and p.kind is not PoolKind.ON_PREM]
    if not leads:
        return None
    step = given.forecast_step or given.tick
    return max(1, math.ceil((max(leads) + given.tick) / step))

"""The forecast release rule for whole TPU slices (``planner.slice_release_by_forecast``): whether a slice idle for
the idle hold, in a pool that alone serves one demand group, is unlikely enough to be needed again within its lead
time to release it (``SliceRelease``). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.planning.needs import horizon_steps
from agent.planning.plan_input import PlanInput, plan_groups
from models import DemandForecast, PoolKind, PoolSpec


@dataclass(frozen=True)
class SliceRelease:
    """Whether to release idle slices of a pool that alone serves one demand group.

    Holding a slice for its lead time costs ``p`` (its price over the lead time). Releasing it costs nothing if it
    is not needed again within the lead time, and ``p + w`` if it is (it is bought back, billed from the request,
    and the demand it would have served waits a lead time, at waiting cost ``w``). So release pays while the
    probability ``P`` that it is needed again is below ``p / (p + w)``: that is ``1 - q`` for the newsvendor service
    level ``q = w / (p + w)`` the group is planned at. ``P`` is the forecast probability that the peak of demand
    over the lead time exceeds the chips left without the slice (``DemandForecast.exceedance``).
    """

    forecast: DemandForecast
    service_level: float
    steps: int | None

    @property
    def break_even(self) -> float:
        return 1.0 - self.service_level

    def releasable(self, current: int, wanted: int, chips_per_unit: int) -> tuple[int, str]:
        """How many of ``wanted`` slices to release, one after the other, and why none when none."""
        released = 0
        chance = 0.0
        while released < wanted:
            left = (current - released - 1) * chips_per_unit
            chance = self.forecast.exceedance(float(left), self.steps)
            if chance >= self.break_even:
                break
            released += 1
        why = (
            f"a slice fewer is needed again within its lead time with probability {chance:.3g}, at or above the "
            f"break-even {self.break_even:.3g}; holding"
        )
        return released, why


def slice_release(given: PlanInput, pool: PoolSpec) -> SliceRelease | None:
    """The forecast release rule for a whole-slice pool serving one demand group alone, when it applies: among
    the slices idle for the idle hold, it releases those unlikely to be needed again (else the hold alone decides)."""
    if not given.settings.slice_release_by_forecast or pool.kind is not PoolKind.TPU_SLICE_GROUP:
        return None
    groups = [g for g in plan_groups(given) if pool.pool_id in g.pools]
    if len(groups) != 1 or groups[0].pools != {pool.pool_id}:
        return None
    group = groups[0]
    forecast = given.forecasts.get(group.name) if group.is_aggregate else given.forecasts.get(group.members[0])
    if forecast is None or forecast.horizon_steps == 0:
        return None
    level = given.service_levels.get(group.name) or max(given.service_levels.get(n, 0.9) for n in group.members)
    return SliceRelease(forecast, level, horizon_steps(given, group))

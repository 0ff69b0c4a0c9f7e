"""Which forecast quantile to provision for, per demand class.

Order of precedence: the class's own ``service_level``; the planner's ``service_level``; the newsvendor
critical ratio ``cu / (cu + co)`` where ``cu`` is the cost of an accelerator-hour of waiting demand (class, else
planner) and ``co`` the price of an idle chip-hour in the cheapest scalable pool that serves the class; else 0.9.
"""

from __future__ import annotations

from collections.abc import Sequence

from config.schema import PlannerSettings
from models import DemandClass, PoolKind, PoolSpec

DEFAULT_SERVICE_LEVEL = 0.9
_BOUNDS = (0.5, 0.999)


def resolve_service_levels(
    classes: Sequence[DemandClass], pools: Sequence[PoolSpec], planner: PlannerSettings
) -> dict[str, float]:
    return {c.name: _level(c, pools, planner) for c in classes}


def newsvendor_ratio(waiting_cost: float, idle_cost: float) -> float:
    """The quantile that balances the cost of waiting demand against the cost of an idle chip."""
    if waiting_cost <= 0.0:
        return _BOUNDS[0]
    if idle_cost <= 0.0:
        return _BOUNDS[1]
    return min(_BOUNDS[1], max(_BOUNDS[0], waiting_cost / (waiting_cost + idle_cost)))


def _level(demand_class: DemandClass, pools: Sequence[PoolSpec], planner: PlannerSettings) -> float:
    if demand_class.service_level is not None:
        return demand_class.service_level
    if planner.service_level is not None:
        return planner.service_level
    waiting = demand_class.waiting_cost_per_accelerator_hour
    if waiting is None:
        waiting = planner.waiting_cost_per_accelerator_hour_usd
    scalable = [p for p in pools if demand_class.name in p.serves and p.kind is not PoolKind.ON_PREM]
    if waiting is None or not scalable:
        return DEFAULT_SERVICE_LEVEL
    return newsvendor_ratio(waiting, min(p.price_per_chip_hour_usd for p in scalable))

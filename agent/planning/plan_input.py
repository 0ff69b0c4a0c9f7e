"""What one planning decision is made from (``PlanInput``), and the demand groups it plans (``plan_groups``).

Every module of the planner reads its inputs from here; ``agent.planning.planner`` makes the plan.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from agent.planning.budget import BudgetSpend
from agent.planning.groups import DemandGroup, single_class_groups
from agent.planning.memory import PlannerMemory
from agent.planning.pacing import BurstProfile
from config.schema import PlannerSettings
from models import DemandForecast, PoolSpec, PoolState


@dataclass(frozen=True)
class PlanInput:
    """Everything one planning decision depends on. ``observed`` holds the newest trustworthy demand per class;
    a class without an observation or a forecast is unknown. ``forecasts`` may also hold the forecast of a
    demand group's summed demand, under the group's name; ``groups`` defaults to one group per class."""

    now: datetime
    tick: timedelta
    pools: Sequence[PoolSpec]
    states: Mapping[str, PoolState]
    forecasts: Mapping[str, DemandForecast]
    observed: Mapping[str, float]
    service_levels: Mapping[str, float]
    settings: PlannerSettings
    memory: PlannerMemory = field(default_factory=PlannerMemory)
    groups: Sequence[DemandGroup] | None = None
    forecast_step: timedelta | None = None
    budgets: Sequence[BudgetSpend] = ()  # spend so far of each budget (from the ledger); caps bind the plan
    waiting_costs: Mapping[str, float] = field(default_factory=dict)  # per class: who a shared pool serves first
    burst_profile: BurstProfile | None = None  # history of burst need, for budgets paced on a forecast
    # per on-prem pool: its units that can take work now (Ready, schedulable nodes); one not in it: its max_units
    onprem_units: Mapping[str, int] = field(default_factory=dict)
    # the pools whose releases are drains of their nodes, never of a unit still provisioning (None: not known, every
    # pool taken as drained); a budget's hard stop takes units in flight before busy ones only in the others
    drained: Collection[str] | None = None
    # per pool: the target units of the agent's last successful read of it in this process (with its own resizes
    # carried out since); an unread pool takes demand up to them before the ledger's record is asked (``_last_units``)
    last_read_units: Mapping[str, int] = field(default_factory=dict)


def plan_groups(given: PlanInput) -> tuple[DemandGroup, ...]:
    if given.groups is not None:
        return tuple(given.groups)
    return single_class_groups(_class_names(given.pools), given.pools)


def _class_names(pools: Sequence[PoolSpec]) -> list[str]:
    return sorted({name for pool in pools for name in pool.serves})

"""How often the forecast changed a decision: the planner's need per demand group on the configured forecaster's
outlooks against the same computation on the calibrated last value's, tick by tick over a simulated window.

A decision is the target of a group in whole units of its pools (chips when its pools differ in size): a tick
counts ``up`` when the forecast asked for more units than the last value would have, ``down`` when fewer. Ticks
where either side has no need (demand unknown) are not compared; a group with no tick compared has no changed
fraction (None), never 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from agent.outlook import Outlook
from agent.planning import PlanInput, resolve_service_levels
from agent.planning.groups import DemandGroup, demand_groups
from agent.planning.needs import group_shares
from agent.simulation.window import SimulationWindow
from config.schema import PlannerSettings, Settings
from models.allocation import units_for


@dataclass(frozen=True)
class DecisionChanges:
    """Per group: ticks compared, and those where the forecast's target was above (``up``) or below (``down``)
    the last value's."""

    ticks: int = 0
    up: int = 0
    down: int = 0

    def summary(self) -> dict[str, float | int | None]:
        """``changed_fraction`` is None when no tick was compared: nothing is known, which 0 would read as 'the
        forecast never changed the decision'."""
        changed = self.up + self.down
        return {
            "ticks": self.ticks,
            "up": self.up,
            "down": self.down,
            "changed_fraction": changed / self.ticks if self.ticks else None,
        }


def decision_changes(
    settings: Settings,
    planner: PlannerSettings,
    window: SimulationWindow,
    forecast: Sequence[Outlook],
    last_value: Sequence[Outlook],
) -> dict[str, DecisionChanges]:
    """``forecast[t]`` and ``last_value[t]``: the two forecasters' outlooks at tick ``t`` of ``window``."""
    pools = settings.pool_specs()
    classes = settings.demand_class_models()
    groups = demand_groups([c.name for c in classes], pools)
    levels = resolve_service_levels(classes, pools, planner)
    sizes = {g.name: _unit_size(g, settings) for g in groups}
    counts = {g.name: [0, 0, 0] for g in groups}
    for stamp, mine, theirs in zip(window.index, forecast, last_value, strict=True):
        now = stamp.to_pydatetime()
        ours, _ = group_shares(_input(settings, planner, now, window, groups, levels, mine))
        base, _ = group_shares(_input(settings, planner, now, window, groups, levels, theirs))
        for name, share in ours.items():
            if name not in base:
                continue
            ours_units = units_for(share.need, sizes[name])
            base_units = units_for(base[name].need, sizes[name])
            counts[name][0] += 1
            counts[name][1] += ours_units > base_units
            counts[name][2] += ours_units < base_units
    return {name: DecisionChanges(*c) for name, c in counts.items()}


def _unit_size(group: DemandGroup, settings: Settings) -> int:
    sizes = {p.chips_per_unit for p in settings.pool_specs() if p.pool_id in group.pools}
    return sizes.pop() if len(sizes) == 1 else 1


def _input(
    settings: Settings,
    planner: PlannerSettings,
    now: datetime,
    window: SimulationWindow,
    groups: Sequence[DemandGroup],
    levels: dict[str, float],
    outlook: Outlook,
) -> PlanInput:
    return PlanInput(
        now=now,
        tick=window.step,
        pools=settings.pool_specs(),
        states={},
        forecasts=outlook.forecasts,
        observed=outlook.observed,
        service_levels=levels,
        settings=planner,
        groups=groups,
        forecast_step=window.step,
    )

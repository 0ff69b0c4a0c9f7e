"""Settings: the validated, frozen configuration of a leadtime deployment or simulation."""

from config.durations import parse_duration
from config.loader import load_settings, settings_from_mapping
from config.schema import (
    BudgetSettings,
    DemandClassSettings,
    ForecastSettings,
    PlannerSettings,
    PoolSettings,
    Settings,
    SimulationSettings,
)

__all__ = [
    "BudgetSettings",
    "DemandClassSettings",
    "ForecastSettings",
    "PlannerSettings",
    "PoolSettings",
    "Settings",
    "SimulationSettings",
    "load_settings",
    "parse_duration",
    "settings_from_mapping",
]

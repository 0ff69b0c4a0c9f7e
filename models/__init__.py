"""Domain vocabulary of leadtime: pools, demand classes, forecasts, plans, budgets, alerts and errors.

This package imports nothing else of ours; every other layer speaks its words.
"""

from models.budget import BudgetSnapshot, LedgerEntry
from models.demand import AcceleratorFamily, DemandClass
from models.errors import (
    ActuatorError,
    CapacityUnavailable,
    ConfigError,
    ConfigProblem,
    ForecastError,
    LeadtimeError,
    LedgerUnavailable,
    MetricsUnavailable,
    PermanentActuatorError,
    TraceError,
    TransientActuatorError,
)
from models.events import AlertEvent, AlertKind, Severity
from models.forecast import DemandForecast
from models.plan import (
    ActionResult,
    ActionStatus,
    CapacityPlan,
    Drain,
    Resize,
    Skip,
    SkipReason,
)
from models.pools import CapacityTier, PoolKind, PoolSpec, PoolState, ZoneState

__all__ = [
    "AcceleratorFamily",
    "ActionResult",
    "ActionStatus",
    "ActuatorError",
    "AlertEvent",
    "AlertKind",
    "BudgetSnapshot",
    "CapacityPlan",
    "CapacityTier",
    "CapacityUnavailable",
    "ConfigError",
    "ConfigProblem",
    "DemandClass",
    "DemandForecast",
    "Drain",
    "ForecastError",
    "LeadtimeError",
    "LedgerEntry",
    "LedgerUnavailable",
    "MetricsUnavailable",
    "PermanentActuatorError",
    "PoolKind",
    "PoolSpec",
    "PoolState",
    "Resize",
    "Severity",
    "Skip",
    "SkipReason",
    "TraceError",
    "TransientActuatorError",
    "ZoneState",
]

"""Domain vocabulary of leadtime: pools, demand classes, forecasts, plans, budgets, alerts and errors.

This package imports nothing else of ours; every other layer speaks its words.
"""

from models.budget import BudgetSnapshot, LedgerEntry
from models.demand import AcceleratorFamily, DemandClass
from models.errors import (
    ActuatorError,
    BacktestInputError,
    CapacityUnavailable,
    ConfigError,
    ConfigProblem,
    ForecastError,
    KubernetesUnconfigured,
    LeadtimeError,
    LedgerUnavailable,
    MetricSourceUnavailable,
    MetricsUnavailable,
    PermanentActuatorError,
    StateConflict,
    StateDocumentUnreadable,
    StateUnavailable,
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
    "BacktestInputError",
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
    "KubernetesUnconfigured",
    "LeadtimeError",
    "LedgerEntry",
    "LedgerUnavailable",
    "MetricSourceUnavailable",
    "MetricsUnavailable",
    "PermanentActuatorError",
    "PoolKind",
    "PoolSpec",
    "PoolState",
    "Resize",
    "Severity",
    "Skip",
    "SkipReason",
    "StateConflict",
    "StateDocumentUnreadable",
    "StateUnavailable",
    "TraceError",
    "TransientActuatorError",
    "ZoneState",
]

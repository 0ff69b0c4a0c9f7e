"""Domain vocabulary of leadtime: pools, demand classes, forecasts, plans, budgets, alerts and errors.

This package imports nothing else of ours; every other layer speaks its words.
"""

from models.budget import BudgetSnapshot, LedgerEntry
from models.decision import BudgetCut, DemandShare, Hold, PoolDecision, SkipReason
from models.demand import AcceleratorFamily, DemandClass
from models.errors import (
    ActuatorError,
    BacktestInputError,
    BillingExportError,
    CapacityUnavailable,
    ConfigError,
    ConfigProblem,
    ForecastError,
    KubernetesUnconfigured,
    LeadtimeError,
    LedgerUnavailable,
    MetricSourceUnavailable,
    MetricsUnavailable,
    NoLedgerSchema,
    PermanentActuatorError,
    StateConflict,
    StateDocumentTooNew,
    StateDocumentUnreadable,
    StateUnavailable,
    TraceError,
    TransientActuatorError,
)
from models.events import AlertEvent, AlertKind, Severity
from models.forecast import DemandForecast
from models.plan import (
    DRAIN_KEY_MARK,
    ActionResult,
    ActionStatus,
    CapacityPlan,
    Drain,
    Resize,
    Skip,
    UnfinishedPod,
    drain_key,
)
from models.pools import CapacityTier, PoolKind, PoolSpec, PoolState, ZoneState

__all__ = [
    "DRAIN_KEY_MARK",
    "AcceleratorFamily",
    "ActionResult",
    "ActionStatus",
    "ActuatorError",
    "AlertEvent",
    "AlertKind",
    "BacktestInputError",
    "BillingExportError",
    "BudgetCut",
    "BudgetSnapshot",
    "CapacityPlan",
    "CapacityTier",
    "CapacityUnavailable",
    "ConfigError",
    "ConfigProblem",
    "DemandClass",
    "DemandForecast",
    "DemandShare",
    "Drain",
    "ForecastError",
    "Hold",
    "KubernetesUnconfigured",
    "LeadtimeError",
    "LedgerEntry",
    "LedgerUnavailable",
    "MetricSourceUnavailable",
    "MetricsUnavailable",
    "NoLedgerSchema",
    "PermanentActuatorError",
    "PoolDecision",
    "PoolKind",
    "PoolSpec",
    "PoolState",
    "Resize",
    "Severity",
    "Skip",
    "SkipReason",
    "StateConflict",
    "StateDocumentTooNew",
    "StateDocumentUnreadable",
    "StateUnavailable",
    "TraceError",
    "TransientActuatorError",
    "UnfinishedPod",
    "ZoneState",
    "drain_key",
]

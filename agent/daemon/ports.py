"""What the daemon drives, as small interfaces: the agent loop (one tick, one refit) and what a tick reports.

The daemon owns scheduling, leadership, health and metrics; everything a tick decides lives behind
``AgentLoop``. Tests pass fakes through the same interfaces.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from models import ActionResult, AlertEvent, BudgetSnapshot, CapacityPlan, DemandForecast, PoolState


class TickReport(Protocol):
    """What one tick saw, decided and did. Every field may be empty when the tick held (no data, no pools)."""

    @property
    def forecasts(self) -> Sequence[DemandForecast]: ...

    @property
    def pools(self) -> Sequence[PoolState]: ...

    @property
    def plan(self) -> CapacityPlan | None: ...

    @property
    def results(self) -> Sequence[ActionResult]: ...

    @property
    def budgets(self) -> Sequence[BudgetSnapshot]: ...

    @property
    def errors(self) -> Sequence[Exception]:
        """Errors the tick survived (missing metrics, a failed resize): counted by class, never raised."""
        ...


class AgentLoop(Protocol):
    def run_once(self, now: datetime) -> TickReport:
        """Observe, forecast, plan, re-validate, act, record and alert, once, as of ``now``."""
        ...

    def refit(self, now: datetime) -> None:
        """Refit the forecasting models on the history up to ``now``; ticks keep predicting meanwhile."""
        ...


class AlertSink(Protocol):
    """Where the daemon's own alerts go (leadership lost, ticks failing): a Notifier."""

    def notify(self, event: AlertEvent) -> bool: ...

"""What the daemon drives, as small interfaces: the agent loop (one tick, one refit) and what a tick reports.

The daemon owns scheduling, leadership, health and metrics; everything a tick decides lives behind
``AgentLoop``. Tests pass fakes through the same interfaces.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from agent.decision_events import DecisionEvent
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

    @property
    def blind(self) -> str | None:
        """Why the tick had nothing to plan on, when no demand class had data or no pool could be read (every
        pool was held); None otherwise. Such a tick ran, but it is not a success: the leader is not doing its job."""
        ...


class AgentLoop(Protocol):
    def run_once(self, now: datetime) -> TickReport:
        """Observe, forecast, plan, re-validate, act, record and alert, once, as of ``now``."""
        ...

    def refit(self, now: datetime) -> None:
        """Refit the forecasting models on the history up to ``now``; ticks keep predicting meanwhile."""
        ...


class StagedRefit(Protocol):
    """A refit under way: the history is read; the model is copied, the copy fitted apart, then swapped in."""

    @property
    def fitted_at(self) -> datetime:
        """The end of the history the model installed was fitted on."""
        ...

    @property
    def pending(self) -> bool:
        """Whether a stand-in forecasts in place of the configured model once installed (its fit failed)."""
        ...

    @property
    def failure(self) -> Exception | None:
        """Why the configured model was not fitted, when a stand-in was refitted in its place."""
        ...

    @property
    def unread(self) -> Mapping[str, Exception]:
        """The classes whose history was not read (the deadline not passed), and why: their models are kept."""
        ...

    def take(self) -> None:
        """Copy the model to fit; call between ticks."""
        ...

    def fit(self) -> None:
        """Fit the copy; touches nothing a tick reads, so ticks may run meanwhile."""
        ...

    def install(self) -> None:
        """Make the fitted copy the model ticks forecast with; call between ticks."""
        ...


@runtime_checkable
class RefitsApart(Protocol):
    """A loop whose refit can run beside its ticks: only copying the model and the swap hold ticks off."""

    def stage_refit(self, now: datetime) -> StagedRefit:
        """Read the history up to ``now`` within the refit's own deadline; ticks may run meanwhile."""
        ...


@runtime_checkable
class Resumable(Protocol):
    """A loop with state that outlives a leader: it reloads it when this replica becomes the leader."""

    def resume(self, another_led: bool = False) -> None:
        """Leadership starts: read the saved state before the next tick plans. ``another_led``: another replica may
        have led since this one last did (a new term of the election, ``CountsTerms``), so what only a leader knows
        of its own doings (its drains) may have been carried on and settled by that one: forget it."""
        ...


@runtime_checkable
class Watching(Protocol):
    """A loop whose standby ticks observe read-only (the pools' spend), so a new leader's records have no hole."""

    def watch(self, now: datetime) -> None:
        """Observe without planning or writing to any pool; raises when the observation failed."""
        ...


class DecisionSink(Protocol):
    """Where the leader's decisions go as Kubernetes Events; best effort, never raises."""

    def record(self, now: datetime, events: Sequence[DecisionEvent]) -> int: ...


class AlertSink(Protocol):
    """Where the daemon's own alerts go (leadership lost, ticks failing): a Notifier."""

    def notify(self, event: AlertEvent) -> bool: ...

"""The daemon's own Prometheus metrics, in a registry of its own (never the process-global one).

Gauges describe the latest tick (forecasts, units, budgets); counters accumulate decisions, skips, errors and
ticks so rates can be taken. Every metric is prefixed ``leadtime_`` and names its unit. A label holds one kind
of value only: demand classes in ``demand_class``, and the summed demand of a pool group (classes planned
together on the same pools) in metrics of its own with a ``pool_group`` label, so sums over classes never count
a group's demand twice.

Only the leader ticks: a replica that stops leading removes its latest tick's gauges (``forget_latest_tick``), so
that neither a dashboard nor an alert takes its last plan for a current one.
"""

from __future__ import annotations

import contextlib
import platform
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from agent.daemon.ports import TickReport
from agent.ledger.coverage import LedgerCoverage
from agent.planning.groups import GROUP_PREFIX
from agent.planning.memory import PlannerMemory
from agent.version import package_version
from models import DRAIN_KEY_MARK, ActionResult, BudgetSnapshot, CapacityPlan, DemandForecast, PoolSpec, PoolState
from models.clock import Clock

DECISION_STAGES = ("need", "rounded", "bounded", "stepped", "budgeted", "target")
_DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 1800.0)


class DaemonMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.forecast = Gauge(
            "leadtime_forecast_accelerators",
            "Peak forecast of accelerator demand over the lead-time horizon, per demand class and quantile.",
            ["demand_class", "quantile"],
            registry=r,
        )
        self.group_forecast = Gauge(
            "leadtime_pool_group_forecast_accelerators",
            "Peak forecast of the summed demand of a pool group over the lead-time horizon, per quantile.",
            ["pool_group", "quantile"],
            registry=r,
        )
        self.group_observed_demand = Gauge(
            "leadtime_pool_group_demand_observed_accelerators",
            "Newest trustworthy summed demand of a pool group.",
            ["pool_group"],
            registry=r,
        )
        self.build_info = Gauge(
            "leadtime_build_info", "Always 1; the labels say which version runs.", ["version", "python"], registry=r
        )
        self.build_info.labels(package_version(), platform.python_version()).set(1)
        self.observed_demand = Gauge(
            "leadtime_demand_observed_accelerators",
            "Newest trustworthy demand observation.",
            ["demand_class"],
            registry=r,
        )
        self.recommended_units = Gauge(
            "leadtime_pool_recommended_units", "Units the latest plan wants per pool.", ["pool"], registry=r
        )
        self.decision_units = Gauge(
            "leadtime_pool_decision_units",
            "Each stage of the latest decision per pool, in units: need (fractional), rounded (whole units for the "
            "demand), bounded (plus headroom and spot reserve, within the pool's bounds), stepped (after the "
            "per-tick step and idle pacing, or holds), budgeted (after budget cuts), target (asked for this tick; "
            "absent when the pool is not observed).",
            ["pool", "stage"],
            registry=r,
        )
        self.target_units = Gauge(
            "leadtime_pool_target_units", "Units asked for per pool (ready plus in flight).", ["pool"], registry=r
        )
        self.ready_units = Gauge("leadtime_pool_ready_units", "Units accepting work per pool.", ["pool"], registry=r)
        self.decisions = Counter(
            "leadtime_decisions", "Actions decided and their outcome.", ["pool", "action", "status"], registry=r
        )
        self.skips = Counter("leadtime_skips", "Decisions not to act, by reason.", ["pool", "reason"], registry=r)
        self.budget_spent = Gauge(
            "leadtime_budget_spent_usd", "Spend in the current budget period.", ["budget"], registry=r
        )
        self.budget_remaining = Gauge(
            "leadtime_budget_remaining_usd", "Cap minus spend in the current period.", ["budget"], registry=r
        )
        self.budget_projected = Gauge(
            "leadtime_budget_projected_usd", "Spend projected to the end of the period.", ["budget"], registry=r
        )
        self.budget_reserved_elsewhere = Gauge(
            "leadtime_budget_reserved_elsewhere_usd",
            "Of the projected spend of a cap (monthly or hourly) shared with other agents, what they keep reserved.",
            ["budget"],
            registry=r,
        )
        self.tick_duration = Histogram(
            "leadtime_tick_duration_seconds", "Duration of one tick.", ["role"], buckets=_DURATION_BUCKETS, registry=r
        )
        self.refit_duration = Histogram(
            "leadtime_refit_duration_seconds", "Duration of one model refit.", buckets=_DURATION_BUCKETS, registry=r
        )
        self.errors = Counter("leadtime_errors", "Errors survived, by class.", ["error"], registry=r)
        self.ticks = Counter("leadtime_ticks", "Ticks run, by role and outcome.", ["role", "outcome"], registry=r)
        self.ticks_skipped = Counter(
            "leadtime_ticks_skipped",
            "Scheduled ticks not started because the previous tick was still running.",
            registry=r,
        )
        self.is_leader = Gauge("leadtime_is_leader", "1 while this replica leads and may act.", registry=r)
        self.last_success = Gauge(
            "leadtime_last_successful_tick_timestamp_seconds", "Unix time of the last successful tick.", registry=r
        )
        self.info = Gauge("leadtime_info", "Mode and identity of this replica.", ["mode", "identity"], registry=r)
        # The two model gauges are registered at the first fit (``record_model``): before it they export no sample,
        # not a fit at 0 (1970) that the model-age alert would read as decades old.
        self.model_fitted = Gauge(
            "leadtime_model_fitted_timestamp_seconds",
            "Unix time of the end of the history the model the ticks forecast with was fitted on, set at each fit "
            "(a tick's first fit and each refit swapped in); a failed refit leaves it; absent before the first fit.",
            registry=None,
        )
        self.configured_model_pending = Gauge(
            "leadtime_configured_model_pending",
            "1 while a stand-in forecasts because the configured model has not been fitted (its fit failed), else 0; "
            "set at each fit; absent before the first fit.",
            registry=None,
        )
        self._model_registered = threading.Lock()
        self._model_exported = False
        self._demand_gauges = (self.forecast, self.observed_demand, self.group_forecast, self.group_observed_demand)
        self._labelled: dict[Gauge, set[tuple[str, ...]]] = {}  # label sets each gauge was last given
        self._tick_gauges = (
            *self._demand_gauges,
            self.recommended_units,
            self.decision_units,
            self.target_units,
            self.ready_units,
            self.budget_spent,
            self.budget_remaining,
            self.budget_projected,
            self.budget_reserved_elsewhere,
        )

    # -- per tick -----------------------------------------------------------------------------------------
    def record_tick(self, report: TickReport) -> None:
        self.record_forecasts(report.forecasts)
        self.record_pools(report.pools)
        if report.plan is not None:
            self.record_plan(report.plan)
        self.record_results(report.results, report.plan)
        self.record_budgets(report.budgets)
        for error in report.errors:
            self.record_error(error)

    def record_forecasts(self, forecasts: Sequence[DemandForecast]) -> None:
        """Demand and forecasts of this tick. A class or group absent from ``forecasts`` has no trustworthy demand
        now (its pools are held): its series are removed, so a dashboard shows the gap, not its last value."""
        series: dict[Gauge, dict[tuple[str, ...], float]] = {gauge: {} for gauge in self._demand_gauges}
        for forecast in forecasts:
            grouped = forecast.demand_class.startswith(GROUP_PREFIX)
            name = forecast.demand_class.removeprefix(GROUP_PREFIX)
            peak = self.group_forecast if grouped else self.forecast
            observed = self.group_observed_demand if grouped else self.observed_demand
            for level in forecast.quantiles:
                series[peak][(name, f"{level:g}")] = forecast.peak(level)
            series[observed][(name,)] = forecast.last_observed
        for gauge, values in series.items():
            self._set_only(gauge, values)

    def record_pools(self, pools: Sequence[PoolState]) -> None:
        """Units of the pools read this tick. A pool absent from ``pools`` could not be read (the pool-unreadable
        alert says so): its series are removed, as nothing is known of its units now, instead of its last values
        exported on as if current."""
        self._set_only(self.target_units, {(pool.pool_id,): pool.target_units for pool in pools})
        self._set_only(self.ready_units, {(pool.pool_id,): pool.ready_units for pool in pools})

    def record_plan(self, plan: CapacityPlan) -> None:
        for pool_id, units in plan.targets.items():
            self.recommended_units.labels(pool_id).set(units)
        for skip in plan.skips:
            self.skips.labels(skip.pool_id, str(skip.reason)).inc()
        for pool_id, decision in plan.decisions.items():
            stages = decision.stages()
            for stage in DECISION_STAGES:
                if stage in stages:
                    self.decision_units.labels(pool_id, stage).set(stages[stage])
                else:  # an unknown stage is absent, never a stale or zero value
                    with contextlib.suppress(KeyError):
                        self.decision_units.remove(pool_id, stage)

    def record_results(self, results: Sequence[ActionResult], plan: CapacityPlan | None) -> None:
        kinds: dict[str, str] = {}
        if plan is not None:
            kinds.update({r.key: "scale-up" if r.is_scale_up else "scale-down" for r in plan.resizes})
            kinds.update({d.key: "drain" for d in plan.drains})
        for result in results:
            kind = kinds.get(result.key, "drain" if DRAIN_KEY_MARK in result.key else "resize")
            self.decisions.labels(result.pool_id, kind, str(result.status)).inc()

    def record_budgets(self, budgets: Sequence[BudgetSnapshot]) -> None:
        for budget in budgets:
            self.budget_spent.labels(budget.budget).set(budget.spent_usd)
            self.budget_projected.labels(budget.budget).set(budget.projected_usd)
            if budget.remaining_usd is not None:
                self.budget_remaining.labels(budget.budget).set(budget.remaining_usd)
            if budget.reserved_elsewhere_usd is not None:  # a budget shared with other agents: their share of it
                self.budget_reserved_elsewhere.labels(budget.budget).set(budget.reserved_elsewhere_usd)

    def forget_latest_tick(self) -> None:
        """Remove every series the latest leader tick set: demand and forecasts, each pool's plan and units, each
        budget's spend. A replica that no longer leads plans nothing; its last values, exported on, would show
        beside the new leader's (or alone, to a query that takes the largest) as if current."""
        for gauge in self._tick_gauges:
            gauge.clear()
        self._labelled.clear()

    def _set_only(self, gauge: Gauge, values: dict[tuple[str, ...], float]) -> None:
        """Set ``values`` on ``gauge`` and remove the label sets it was given last time and not now."""
        for labels in self._labelled.get(gauge, set()) - values.keys():
            with contextlib.suppress(KeyError):
                gauge.remove(*labels)
        for labels, value in values.items():
            gauge.labels(*labels).set(value)
        self._labelled[gauge] = set(values)

    # -- daemon events ------------------------------------------------------------------------------------
    def record_error(self, error: BaseException) -> None:
        self.errors.labels(type(error).__name__).inc()

    def record_success(self, now: datetime) -> None:
        self.last_success.set(now.timestamp())

    def record_model(self, fitted_at: datetime, pending: bool) -> None:
        """A model was fitted on the history ending at ``fitted_at``: in a tick or by a refit swapped in."""
        self.model_fitted.set(fitted_at.timestamp())
        self.configured_model_pending.set(1 if pending else 0)
        with self._model_registered:  # the first fit registers the gauges, set before they are scraped
            if not self._model_exported:
                self.registry.register(self.model_fitted)
                self.registry.register(self.configured_model_pending)
                self._model_exported = True

    def set_identity(self, mode: str, identity: str) -> None:
        self.info.labels(mode, identity).set(1)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class BackoffCollector(Collector):
    """``leadtime_pool_backoff_until_seconds{pool,reason}``: for each pool the planner backs off, the Unix time its
    back-off ends, read from the planner's memory at every scrape, with why: ``stockout`` after a stockout (or an
    exhausted quota), ``failing-changes`` after its scale-ups kept failing with errors a retry may fix for longer than
    its lead time. A pool whose back-off has ended has no series, and a replica that does not lead (its memory is not
    the one the planner acts on) exports none.

    A ``backoff`` skip is no stand-in: the planner records one only when it still wants the pool to grow, and a
    backed-off pool's room is capped at its current size, so an on-demand pool or a spot pool at 0 units that is
    out of capacity records none.

    Beside it, from the same memory, ``leadtime_pool_blocked{pool}``: 1 for each pool blocked after a permanent
    error (nothing is sent to it until a person lifts the block), also when the block was read back after a restart;
    a pool that is not blocked has no series."""

    def __init__(self, memory: Callable[[], PlannerMemory | None], clock: Clock) -> None:
        self._memory = memory  # the leader's memory; None while this replica does not lead
        self._clock = clock

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "leadtime_pool_backoff_until_seconds",
            "Unix time until which a pool gets no scale-up: out of capacity or quota (reason stockout), or its "
            "scale-ups kept failing for longer than its lead time (reason failing-changes); no series when it is not "
            "backed off.",
            labels=["pool", "reason"],
        )
        memory = self._memory()
        if memory is not None:
            now = self._clock.now()
            for pool_id, until in sorted(memory.backoff_until.items()):
                if until > now:
                    family.add_metric([pool_id, memory.why_backed_off(pool_id).value], until.timestamp())
        yield family
        blocked = GaugeMetricFamily(
            "leadtime_pool_blocked",
            "1 while a pool is blocked after a permanent error: nothing is sent to it until a person lifts the block "
            "in the stored planner memory; no series when it is not blocked.",
            labels=["pool"],
        )
        for pool_id in sorted(memory.blocked if memory is not None else ()):
            blocked.add_metric([pool_id], 1.0)
        yield blocked


class BudgetLedgerCollector(Collector):
    """Whether this replica's ledger holds each monthly-capped budget's current period from its start, read at
    every scrape from the coverage of its latest tick (``agent.ledger.coverage.LedgerCoverage``), beside the budget
    gauges: ``leadtime_budget_ledger_since_seconds{budget}``, the Unix time from which the ledger holds every pool
    of the budget (the latest of their first records; no series while one has none), and
    ``leadtime_budget_spend_incomplete{budget}``, 1 while the period started before that (the spend so far leaves
    out the time before, and so does the cap), else 0."""

    def __init__(self, coverage: Callable[[], Sequence[LedgerCoverage]]) -> None:
        self._coverage = coverage

    def collect(self) -> Iterator[GaugeMetricFamily]:
        since = GaugeMetricFamily(
            "leadtime_budget_ledger_since_seconds",
            "Unix time from which the ledger holds every pool of the budget (the latest of their first records).",
            labels=["budget"],
        )
        incomplete = GaugeMetricFamily(
            "leadtime_budget_spend_incomplete",
            "1 while the budget's period started before the ledger's first record of one of its pools (spend so "
            "far leaves out its time before), else 0.",
            labels=["budget"],
        )
        for coverage in sorted(self._coverage(), key=lambda c: c.budget):
            if coverage.since is not None:
                since.add_metric([coverage.budget], coverage.since.timestamp())
            incomplete.add_metric([coverage.budget], 0.0 if coverage.complete else 1.0)
        yield since
        yield incomplete


class _WaitedScaleUp(Protocol):
    @property
    def pool_id(self) -> str: ...
    @property
    def requested_at(self) -> datetime: ...


class ScaleUpWaits(Protocol):
    """What the stalled-scale-up alert reads (``agent.budget_watch.BudgetWatch``): the agent's own scale-ups whose
    units are still waited for as a recent tick judged them on pools it read, the pools' lead times and how many of
    them a scale-up may take."""

    @property
    def judged_pending(self) -> Sequence[_WaitedScaleUp]: ...
    @property
    def pools(self) -> Mapping[str, PoolSpec]: ...
    @property
    def stall_factor(self) -> float: ...


class ScaleUpWaitCollector(Collector):
    """The agent's own stall condition for scale-ups, read at every scrape, so the alert rule can say what the agent
    says: ``leadtime_pool_scale_up_waiting_since_seconds{pool}``, the Unix time the oldest of the pool's scale-ups
    still waited for was asked (no series when none is: every unit asked for is ready, or the pool was asked for
    less; nor while no tick ended a judgement of it in the last two ticks and the misfire grace, or the last one
    could not read the pool: missing data, told by LeadtimeNotTicking and LeadtimePoolUnreadable, is not a cloud
    that does not deliver), and
    ``leadtime_pool_scale_up_stalled_after_seconds{pool}``, how long a scale-up of the pool may wait before it is
    stalled: its lead time times ``alerts.stalled_after_lead_times``.

    Only the leader's scale-ups are waited for: a replica that does not lead exports neither."""

    def __init__(self, waits: Callable[[], ScaleUpWaits | None]) -> None:
        self._waits = waits  # the leader's; None while this replica does not lead

    def collect(self) -> Iterator[GaugeMetricFamily]:
        since = GaugeMetricFamily(
            "leadtime_pool_scale_up_waiting_since_seconds",
            "Unix time the oldest scale-up of the pool whose units are still not ready was asked; no series when "
            "none is waited for.",
            labels=["pool"],
        )
        allowed = GaugeMetricFamily(
            "leadtime_pool_scale_up_stalled_after_seconds",
            "How long a scale-up of the pool may wait for its units before it is stalled: the pool's lead time "
            "times alerts.stalled_after_lead_times.",
            labels=["pool"],
        )
        waits = self._waits()
        if waits is not None:
            oldest: dict[str, datetime] = {}
            for scale_up in waits.judged_pending:
                at = oldest.get(scale_up.pool_id)
                oldest[scale_up.pool_id] = scale_up.requested_at if at is None else min(at, scale_up.requested_at)
            for pool_id, at in sorted(oldest.items()):
                since.add_metric([pool_id], at.timestamp())
            for pool_id, spec in sorted(waits.pools.items()):
                allowed.add_metric([pool_id], (spec.lead_time * waits.stall_factor).total_seconds())
        yield since
        yield allowed

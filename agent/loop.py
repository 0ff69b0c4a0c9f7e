"""The agent loop: observe -> forecast -> plan -> re-validate -> act -> record -> alert, one tick at a time.

``Agent.run_once(now)`` is the whole tick; time is always the ``now`` argument, so the simulator can drive a month in
seconds and the daemon drives it from a scheduler. Models are refitted by ``refit(now)`` on their own schedule;
``run_once`` only refits when no model has been fitted yet or the refit interval has passed; one that fails does not
fail the tick. The daemon refits beside its ticks instead (``stage_refit``). See ``agent.model_refits`` for both.

A tick observes and forecasts demand through ``agent.outlook`` (what it knows before it decides, read through
``agent.demand_reads`` on the forecast step grid, and at its instant) and delivers its alerts through
``agent.tick_alerts``, which carries the open conditions in the planner memory. The slice adapter's record of
slices short of hosts (``AgentParts.short_slices``) goes into the planner memory after each tick, so the memory a
new leader reads carries it across restarts (the daemon hands it back at its first read).
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import pandas as pd

from actuators.base import Actuator, NodeDrainer
from agent.alerts import broken_unit_events, missing_data_events, missing_zone_events, unheld_reserve_events
from agent.budget_watch import BudgetWatch
from agent.burst_history import HourlyBurstProfile
from agent.conditions import ConditionTracker, not_evaluated, still_holding
from agent.demand_reads import fetch_demand
from agent.drains import NodeDrains
from agent.executor import Progress, blocked_pool_alerts, clear_failed_units, execute, unread_pool_alerts
from agent.ledger.base import Ledger
from agent.ledger.shared_file import LeaderWrittenLedger
from agent.memory_clock import memory_within_clock
from agent.model_refits import StagedRefit, held_unread, joined_history, kept_unread, refit_in_tick, tick_read_cut
from agent.notify.base import Notifier
from agent.observation import with_group_series
from agent.onprem_capacity import onprem_capacity_events, read_onprem
from agent.outlook import ONPREM_READ_SHARE, Outlook, observe_and_forecast
from agent.planning import PlanInput, PlannerMemory, plan_capacity, resolve_service_levels
from agent.planning.groups import demand_groups
from agent.planning.pacing import BurstProfile
from agent.sources.base import READ_DEADLINE_SETTING, MetricSource, read_deadline, read_time_left
from agent.sources.onprem_capacity import OnPremCapacitySource
from agent.tick_alerts import conclude, deliver, tell_failed, with_conditions
from config.schema import PlannerSettings, Settings
from forecasting.base import Forecaster
from models import (
    ActionResult,
    ActionStatus,
    AlertEvent,
    CapacityPlan,
    DemandForecast,
    MetricsUnavailable,
    PoolState,
)
from models.errors import RefitReadCut

if TYPE_CHECKING:  # the slice adapter imports the cloud SDKs' errors, which only a live daemon loads
    from actuators.short_slices import ShortSlices

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TickReport:
    """What one tick saw, decided and did."""

    now: datetime
    observed: dict[str, float]
    forecasts: dict[str, DemandForecast]
    problems: dict[str, str]
    plan: CapacityPlan
    results: tuple[ActionResult, ...]
    alerts: tuple[AlertEvent, ...] = field(default_factory=tuple)
    resolved: tuple[AlertEvent, ...] = field(default_factory=tuple)  # level conditions this tick found gone


@dataclass
class AgentParts:
    """The outside world of one agent, passed in so that tests and the simulator can substitute any part."""

    source: MetricSource
    forecaster: Forecaster
    actuator: Actuator
    ledger: Ledger
    notifier: Notifier
    # Pools that shrink only by draining idle nodes, each with its drainer (GKE node pools); the others resize.
    drainers: Mapping[str, NodeDrainer] = field(default_factory=dict)
    # Reads the units of the on-prem pools that can take work now; without it they are planned on their max_units.
    onprem: OnPremCapacitySource | None = None
    # The pools whose releases are drains of their nodes, where not those of ``drainers``: a dry run given no drainer
    # (recommend) plans as the daemon, which drains them (None: the pools of ``drainers``).
    drained: Collection[str] | None = None
    # Since when each TPU slice has been seen short of hosts (the GKE slice adapter's), kept in the planner memory.
    short_slices: ShortSlices | None = None


class Agent:
    def __init__(
        self,
        settings: Settings,
        parts: AgentParts,
        *,
        tick: timedelta | None = None,
        step: timedelta | None = None,
        planner: PlannerSettings | None = None,
        extra_quantiles: Sequence[float] = (),
        holder: str = "leadtime",
        stand_in: Forecaster | None = None,
        monotonic: Callable[[], float] | None = None,
    ) -> None:
        """``monotonic``: the daemon's ``Clock.monotonic``, which the ledger measures the time by where the wall
        clock stepped back (``agent.ledger.clock_steps``)."""
        self.settings = settings
        self.parts = parts
        self.tick = tick or settings.loop.tick_interval
        # how long a tick reads on-prem capacity and demand before it holds what is not read (``observe``)
        self.reads_within = settings.loop.read_deadline or self.tick / 2
        # how long a refit beside the ticks reads its history (``stage_refit``): the next one is due after the interval
        self.refit_reads_within = settings.forecast.refit_interval / 2
        self.step = step or settings.forecast.step
        self.planner = planner or settings.planner
        self.classes = settings.demand_class_models()
        self.pools = settings.pool_specs()
        self.pool_by_id = {p.pool_id: p for p in self.pools}
        self.groups = demand_groups([c.name for c in self.classes], self.pools)
        self.service_levels = resolve_service_levels(self.classes, self.pools, self.planner)
        self.levels = tuple(
            sorted(set(settings.forecast.quantiles) | set(self.service_levels.values()) | set(extra_quantiles))
        )
        self.horizon = self._horizon_steps()
        self.memory = PlannerMemory()
        self.budget_watch = BudgetWatch(
            settings, self.pool_by_id, parts.ledger, holder, tick=self.tick, monotonic=monotonic
        )
        # the level conditions raised, to tell when each clears
        self.conditions = ConditionTracker(settings.alerts.resolve_after, settings.alerts.dedup_window)
        self.drains = NodeDrains(parts.drainers, self.planner.scale_down_stabilization) if parts.drainers else None
        self.last_refit: datetime | None = None
        # per pool: the target units of its last read in this process, with the agent's resizes carried out since: the
        # units a pool whose read fails is known to hold (``PlanInput.last_read_units``), ledger record or not
        self.last_read_units: dict[str, int] = {}
        # Off in the daemon, whose scheduled refit is the only one once a model is fitted (see the module's text).
        self.refit_in_ticks = True
        # The classes the refit in the current tick fitted no model for (``_refit_in_tick``): held, forecasts dropped.
        self._held_by_refit: frozenset[str] = frozenset()
        # Until a model is fitted: the history the ticks' refits have read so far and the classes it holds, so that
        # each tick reads only the classes not read yet (``_refit_in_tick``); dropped once the fit is done.
        self._first_history: tuple[pd.DataFrame, frozenset[str]] | None = None
        # Told of each fit made by ``fit_on`` (a tick's refit included): the end of its history and whether the
        # configured model is still pending. The daemon exports it (``leadtime_model_fitted_timestamp_seconds``).
        self.on_fitted: Callable[[datetime, bool], None] | None = None
        self.waiting_costs = settings.waiting_costs()
        self._paced = any(b.pacing == "forecast" for b in settings.budgets)
        self._profiles = HourlyBurstProfile(
            self.groups, self.pools, settings.forecast.history, self.step, self.tick, self.budget_watch.budgets,
            self.waiting_costs,
        )  # fmt: skip
        self._last_tick: datetime | None = None
        # With a stand-in, ticks forecast with it until the first staged refit installs the configured model.
        self.configured_model_pending: Forecaster | None = None
        if stand_in is not None:
            self.configured_model_pending, parts.forecaster = parts.forecaster, stand_in

    @property
    def memory(self) -> PlannerMemory:
        """The planner's memory, of the configured pools only."""
        return self._memory

    @memory.setter
    def memory(self, memory: PlannerMemory) -> None:
        """Whatever sets it (the stored memory read back, a tick's outcome), what it says of a pool not in the
        configuration (removed or renamed since it was saved) is dropped and logged: such a pool is neither alerted
        on nor exported, its block not inherited by a pool added later under its id, and the next save leaves it
        out of the store."""
        kept = memory.only(self.pool_by_id)
        if kept is not memory:
            gone = sorted(memory.pools() - kept.pools())
            log.warning(
                "planner memory: dropped what it held for pools not in the configuration: %s",
                ", ".join(gone),
                extra={"pools": gone, "blocked": {p: memory.blocked[p] for p in gone if p in memory.blocked}},
            )
        self._memory = kept

    # -- schedule-driven entry points -------------------------------------------------------------------------
    def refit(self, now: datetime) -> None:
        """Fit the forecaster on the configured history window ending at ``now``."""
        history, _ = self._fetch(now - self.settings.forecast.history, now)
        self.fit_on(history, now)

    def fit_on(self, history: pd.DataFrame, now: datetime) -> None:
        """Fit the forecaster on ``history``, the configured history window ending at ``now`` that the caller has
        already read; the next tick does not refit until the refit interval has passed."""
        self.parts.forecaster.fit(with_group_series(history, self.groups), self.step)
        self.last_refit = now
        self._first_history = None
        log.info("refit model=%s rows=%d", self.parts.forecaster.name, len(history))
        if self.on_fitted is not None:
            self.on_fitted(now, self.configured_model_pending is not None)

    def stage_refit(self, now: datetime) -> StagedRefit:
        """Read the history window ending at ``now``, within ``refit_reads_within``, for a refit beside the ticks: it
        reads the metric source only (the settings it reads are fixed), so a tick may run meanwhile. A read cut by
        the deadline raises ``RefitReadCut``. The staged refit's ``take`` copies the model between two ticks."""
        history_span = self.settings.forecast.history
        with read_deadline(self.refit_reads_within):
            history, unread = self._fetch(now - history_span, now)
            left = read_time_left()
        if unread and left is not None and left[0] <= 0:
            raise RefitReadCut.of(history_span, self.refit_reads_within, sorted(unread), len(self.classes))
        # one class's failed read does not fail the others' refit: each is logged, its model kept
        return StagedRefit(history, now, self.groups, self.step, self._take, self._install, unread=kept_unread(unread))

    def _take(self) -> tuple[Forecaster, Forecaster | None]:
        """Copies of the model to refit (the configured one while a stand-in forecasts) and of the stand-in in use,
        refitted instead when the configured model's fit fails. Between ticks: a tick may fit the model in use."""
        pending = self.configured_model_pending
        model = copy.deepcopy(pending or self.parts.forecaster)
        return model, (copy.deepcopy(self.parts.forecaster) if pending is not None else None)

    def _install(self, staged: StagedRefit) -> None:
        self.last_refit = staged.now
        self._first_history = None
        if staged.failure is not None and staged.stand_in is not None:
            self.parts.forecaster = staged.stand_in
            log.info(
                "refit model=%s rows=%d (the stand-in, refitted beside the ticks: the configured model %s is still "
                "pending, its fit failed: %s: %s)",
                staged.stand_in.name,
                len(staged.history),
                self.configured_model_pending.name if self.configured_model_pending is not None else "?",
                type(staged.failure).__name__,
                staged.failure,
            )
            return
        if staged.model is None:
            raise RuntimeError("StagedRefit.install before take: nothing was fitted")
        self.parts.forecaster = staged.model
        self.configured_model_pending = None
        log.info("refit model=%s rows=%d (fitted beside the ticks)", staged.model.name, len(staged.history))

    def run_once(self, now: datetime) -> TickReport:
        return self.act(now, self.observe(now))

    def watch(self, now: datetime, *, leading: bool = False) -> None:
        """A standby's tick: read the pools and charge the ledger, nothing else (no plan, no write to a pool), so
        the ledger of a replica that takes over has no hole for the time another replica led. A ledger file the
        replicas share is the leader's to charge: a standby only reads the budgets' spend from it. A standby forgets
        the conditions it raised while it led (the leader tells their ends) and the scale-ups it waited for (the
        leader waits for them: ``BudgetWatch.stand_by``); a leader that watches only, its memory not read yet
        (``leading``), keeps them."""
        if not leading:
            self.conditions.forget()
            self._memory = with_conditions(self._memory, self.conditions)
            self.budget_watch.stand_by()
        states = {s.pool_id: s for s in self.parts.actuator.list_pools()}
        self.last_read_units.update({p: s.target_units for p, s in states.items()})
        if isinstance(self.parts.ledger, LeaderWrittenLedger) and not self.parts.ledger.writing:
            self.budget_watch.spend(now)
        else:
            self.budget_watch.observe(now, states)

    def observe(self, now: datetime) -> Outlook:
        """Observe the on-prem pools' capacity and demand, and forecast demand (refitting first when the refit
        interval has passed). Both are read within ``loop.read_deadline`` (half a tick unless set): a class a slow
        source has not answered by then is held, and the tick goes on. The on-prem capacity is read first, within its
        own share of that time (``ONPREM_READ_SHARE`` of the tick, at most the whole deadline), so that neither a slow
        demand read nor a refit in the tick leaves it a request cut to nothing (planned on ``max_units`` with a
        warning that blamed Prometheus), and a slow capacity query leaves demand the rest."""
        problems: dict[str, str] = {}
        self._held_by_refit = frozenset()
        # a read the on-prem deadline ends names the setting it comes from: the tick, or loop.read_deadline when shorter
        share = self.tick * ONPREM_READ_SHARE
        onprem_by = f"loop.tick_interval (on-prem capacity is read within {ONPREM_READ_SHARE:.0%} of a tick)"
        with read_deadline(self.reads_within):
            with read_deadline(
                min(share, self.reads_within), onprem_by if share < self.reads_within else READ_DEADLINE_SETTING
            ):
                onprem = read_onprem(self.parts.onprem, self.pools, now)
            observed, forecasts = observe_and_forecast(
                now,
                problems,
                source=self.parts.source,
                forecaster=self.parts.forecaster,
                classes=self.classes,
                groups=self.groups,
                step=self.step,
                horizon=self.horizon,
                levels=self.levels,
                max_staleness=self.settings.forecast.max_staleness,
                refit_if_due=self._refit_if_due,
            )
        if held := self._held_by_refit:  # no model fitted for them: their forecasts, and their groups', are dropped
            held |= {g.name for g in self.groups if g.is_aggregate and held.intersection(g.members)}
            forecasts = {name: f for name, f in forecasts.items() if name not in held}
        return Outlook(observed, forecasts, problems, onprem)

    def act(self, now: datetime, outlook: Outlook) -> TickReport:
        """Plan on ``outlook`` and the pools' fresh state, re-validate, act, record spend and alert. A step that raises
        fails the tick, but the alerts collected until then, the executor's among them, are delivered first
        (``tell_failed``): a ledger write that fails once the executor has acted would otherwise lose a stockout for
        good, which is raised only when it begins."""
        alerts: list[AlertEvent] = missing_data_events(outlook.problems, now)
        try:
            report = self._act(now, outlook, alerts)
        except Exception:
            self.budget_watch.unclaim()  # its releases may not be carried out: the others shed for them
            self._memory = tell_failed(self.conditions, self._memory, self.parts.notifier, now, alerts)
            raise
        deliver(self.parts.notifier, [*report.alerts, *report.resolved])
        self._last_tick = now
        return report

    def _act(self, now: datetime, outlook: Outlook, alerts: list[AlertEvent]) -> TickReport:
        """The tick once observed, adding its alerts to ``alerts`` as it goes; the report to deliver them from."""
        observed, forecasts, problems = outlook.observed, outlook.forecasts, outlook.problems
        # times a tick wrote while the wall clock was ahead would hold the pools for the step's length
        self.memory = memory_within_clock(self.memory, now, self.pool_by_id)
        states = {s.pool_id: s for s in self.parts.actuator.list_pools()}
        alerts.extend(unread_pool_alerts(self.parts.actuator, now))  # held as unobserved by the planner
        alerts.extend(broken_unit_events(states, now))  # replaced, never deleted while busy: a person decides
        alerts.extend(missing_zone_events(states, now))  # planned on its other zones: a person brings it back
        alerts.extend(blocked_pool_alerts(self.memory, now))  # told again every tick while blocked
        alerts.extend(onprem_capacity_events(outlook.onprem, self.pools, now))
        spends = self.budget_watch.observe(now, states, self.last_read_units)
        cleared = clear_failed_units(states, self.parts.actuator, self.pool_by_id, self.memory, now)
        self.memory = cleared.memory
        alerts.extend(cleared.alerts)
        seen = self._with_idle_nodes(states, now, alerts)
        self.last_read_units.update({p: s.target_units for p, s in seen.items()})
        plan = plan_capacity(
            PlanInput(
                now=now,
                tick=self.tick,
                pools=self.pools,
                states=seen,
                forecasts=forecasts,
                observed=observed,
                service_levels=self.service_levels,
                settings=self.planner,
                memory=self.memory,
                groups=self.groups,
                forecast_step=self.step,
                budgets=spends,
                waiting_costs=self.waiting_costs,
                burst_profile=self._burst_profile(now, outlook.onprem.units),
                onprem_units=outlook.onprem.units,
                drained=frozenset(self.parts.drainers if self.parts.drained is None else self.parts.drained),
                last_read_units=dict(self.last_read_units),
            )
        )
        reserved = self.budget_watch.reserve(now, plan, seen)  # a take-back of nodes being drained adds nothing
        plan = reserved.plan
        alerts.extend(reserved.alerts)
        alerts.extend(unheld_reserve_events(plan, now))  # planned with less spot reserve than configured
        if log.isEnabledFor(logging.INFO):  # rendering every record costs a tenth of a replayed tick: only when kept
            for _, decision in sorted(plan.decisions.items()):  # one line per pool, rendered from its record
                log.info("decision: %s", decision.why(), extra=decision.log_fields())
        done = Progress(self.memory)  # kept as the executor acts: what it did before an error it raises
        try:
            execution = execute(plan, self.parts.actuator, self.pool_by_id, self.memory, now, self.drains, done)
        except Exception:
            self.budget_watch.executed(done.results)  # the releases sent before it keep their claims, the others not
            self.memory = done.memory  # the pools it changed, backed off or blocked, and its alerts, told
            alerts.extend(done.alerts)
            raise
        self.budget_watch.executed(execution.results)  # a failure from here on takes back no release carried out
        self.memory = execution.memory
        if (short := self.parts.short_slices) is not None:  # as this tick's reads left it, for the next save
            self.memory = replace(self._memory, slices_short_since=short.known())
        alerts.extend(execution.alerts)
        carried = {r.key for r in execution.results if r.status in (ActionStatus.DONE, ActionStatus.STARTED)}
        self.last_read_units.update({r.pool_id: r.to_units for r in plan.resizes if r.key in carried})
        # in the planner's sizes, as the plan's resizes are: the nodes being drained out of the targets, still billed
        self.budget_watch.acted(now, plan, execution.results, seen)
        alerts.extend(self.budget_watch.alerts(now, plan, spends, seen, execution.results))
        holding = still_holding(self.memory, states, now)
        unknown = not_evaluated(self.pool_by_id, states, self.budget_watch.pending)
        concluded = conclude(self.conditions, self._memory, now, alerts, holding, unknown)
        self._memory = concluded.memory
        results, resolved = cleared.results + execution.results, tuple(concluded.resolved)
        return TickReport(now, observed, forecasts, problems, plan, results, tuple(alerts), resolved)

    # -- steps of the tick -----------------------------------------------------------------------------------
    def _refit_if_due(self, now: datetime, names: Sequence[str], problems: dict[str, str]) -> bool:
        """Refit when no model has been fitted yet, or (``refit_in_ticks``) the refit interval has passed; whether
        there is a model to forecast with. A failure with no model fitted holds every class with its reason."""
        due = self.last_refit is None or (
            self.refit_in_ticks and now - self.last_refit >= self.settings.forecast.refit_interval
        )
        if not due:
            return True
        return refit_in_tick(self._refit_in_tick, now, self.last_refit, names, problems)

    def _refit_in_tick(self, now: datetime) -> dict[str, str]:
        """Refit on the history window ending at ``now``, read within the tick's read deadline (``reads_within``)
        again; the classes held, each with why (``agent.model_refits``). With no model fitted yet, the history read by
        the ticks before is kept and only the classes not read yet are read: if the deadline cut the read, the classes
        read so far are fitted and each class not read is held, the fit not marked done (the next tick reads the
        classes held, and only them); a class whose read failed though the deadline had not passed is left out of a
        fit marked done, as a refit beside the ticks leaves it. With models fitted before, a read cut by the deadline
        raises ``RefitReadCut`` and a class otherwise not read keeps its model."""
        history_span = self.settings.forecast.history
        first = self.last_refit is None
        kept, read_before = (self._first_history if first else None) or (None, frozenset[str]())
        to_read = [c for c in self.classes if c.name not in read_before]
        with read_deadline(self.reads_within):
            history, unread = fetch_demand(self.parts.source, to_read, now - history_span, now, self.step)
            left = read_time_left()
        cut = bool(unread) and left is not None and left[0] <= 0
        if kept is not None:
            history = joined_history(kept, history)
        if not first and cut:
            raise tick_read_cut(history_span, self.reads_within, sorted(unread), len(self.classes))
        if not cut:  # every class read, or the ones not read failed though the deadline had not passed
            kept_unread(unread)
            self.fit_on(history, now)
            return {}
        held = held_unread(unread, self.reads_within)
        self._first_history = (history, frozenset(c.name for c in self.classes if c.name not in unread))
        if len(held) < len(self.classes):
            self.parts.forecaster.fit(with_group_series(history, self.groups), self.step)
            log.info(
                "refit model=%s rows=%d (in the tick, without %d class(es) not read: held, read again next tick)",
                self.parts.forecaster.name,
                len(history),
                len(held),
            )
        self._held_by_refit = frozenset(held)
        return held

    def _with_idle_nodes(
        self, states: dict[str, PoolState], now: datetime, alerts: list[AlertEvent]
    ) -> dict[str, PoolState]:
        """Pools that shrink by drains, as the planner must see them: idle nodes observed, drains in progress out."""
        if self.drains is None:
            return states
        seen, drain_alerts = self.drains.observe(states, now)
        alerts.extend(drain_alerts)
        return seen

    # -- helpers ---------------------------------------------------------------------------------------------
    def _burst_profile(self, now: datetime, onprem_read: Collection[str]) -> BurstProfile | None:
        """The burst need profile a paced budget plans on (``agent.burst_history.HourlyBurstProfile``); None when no
        budget is paced on a forecast or the history cannot be read (the cap still holds)."""
        if not self._paced:
            return None
        return self._profiles.at(now, self._fetch, self.parts.onprem, onprem_read)

    def _fetch(self, start: datetime, end: datetime) -> tuple[pd.DataFrame, dict[str, MetricsUnavailable]]:
        return fetch_demand(self.parts.source, self.classes, start, end, self.step)

    def _horizon_steps(self) -> int:
        return max(1, math.ceil(self.settings.planning_horizon(self.tick) / self.step))

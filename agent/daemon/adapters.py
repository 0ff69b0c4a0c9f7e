"""Fitting the agent loop (``agent.loop.Agent``) to what the daemon drives and reports.

``AgentLoopAdapter`` turns the loop's ``TickReport`` into the daemon's view (forecasts, pool states, plan,
results, errors, and whether the tick was blind: it could read no class's demand or no pool), keeps the planner's
memory in its store across restarts and leader changes (loaded when this replica becomes the leader, saved after a
tick that changed it) and lets a standby charge its ledger. The open alert conditions the memory carries are adopted
by the loop's tracker once, at the first load after this replica becomes the leader: afterwards the tracker is what
says which conditions are open (the store deleted or written back stale neither drops one nor brings an ended one
back). The slices short of hosts it carries are handed to the TPU slice adapter at that load only, the same way, and
so are the scale-ups its predecessor waited for to the budget watch (``BudgetWatch.restore``), whose own go into the
memory after each tick (``BudgetWatch.waited``), saved with it. A term after which another replica may have led
(``resume``'s ``another_led``) forgets the drains' memory too (``NodeDrains.forget``): that leader may have settled
them; the drains still marked on their nodes are taken over again. The removals this replica sent are kept until the
memory is read, whose drains settled (``drains_settled``, which the drains put in the memory after each tick:
``NodeDrains.settled``) are handed to the drains at that first load (``NodeDrains.recall_settled``): those another
leader settled are forgotten then, before any drain takes a step, and the others followed to their end.

A leader that has not read the planner memory since it became the leader (the store answered an error) plans and
acts on nothing: its own copy lacks the blocks, back-offs and recent changes its predecessor saved (a pool blocked
after a 403 would be resized again). Such a tick only watches, as a standby does (reads the pools, charges the
ledger), is blind ("planner memory not read yet", so the replica is not ready once it lasts the readiness bound),
tries the read again next tick, and alerts (``tick-failed``, subject ``planner-memory``) once the memory has gone
unread for the readiness bound, on the monotonic clock. A memory saved by a newer release (``StateDocumentTooNew``,
after a rollback or while a rolling upgrade runs) is held the same way, on purpose: this release cannot read the
blocks and back-offs in it, so it does not act without them; its readiness reason and alert name the newer document
and the two ways out (roll forward to a release that reads it, or delete the state ConfigMap to start afresh).
The loop keeps the daily report's counts in the planner memory too (``agent.daemon.day_counts.SharesDayCounts``,
handed to the daemon's summary in each tick's report as ``day_share``): what the term's first read of the memory found
(a new term starts at ``resume``), and the leader's counts after each tick, put in the memory and saved when due
(another window or leader, an action counted since, or ``DAY_COUNTS_REFRESH`` since they last went in: the skips and
errors of a tick that did nothing else do not write the ConfigMap every tick).
``PoolStateRecorder`` wraps the actuator the loop reads, keeping the newest pool states for the metrics (an
instrumentation wrapper, the loop is not changed for it).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from actuators import Actuator
from actuators.base import unread_pools
from agent.daemon.day_counts import DAY_COUNTS_REFRESH, DayRead, SharesDayCounts
from agent.daemon.demand_recorder import DemandRecorder
from agent.daemon.guard import Leadership
from agent.daemon.shadow_book import ShadowBook
from agent.loop import Agent, TickReport
from agent.model_refits import StagedRefit
from agent.planning import PlannerMemory
from agent.planning.memory import Condition, DayCounts, OpenCondition
from agent.state import MemoryKeeper, StateStore
from agent.tick_alerts import with_conditions
from models import (
    ActionResult,
    ActionStatus,
    ActuatorError,
    AlertEvent,
    AlertKind,
    BudgetSnapshot,
    CapacityPlan,
    DemandForecast,
    LedgerUnavailable,
    MetricsUnavailable,
    PoolState,
    Severity,
    StateDocumentTooNew,
    StateUnavailable,
)
from models.clock import Clock
from models.durations import format_duration

UNREAD_MEMORY_SUBJECT = "planner-memory"


class PoolStateRecorder:
    """Passes everything through; remembers what ``list_pools`` returned last."""

    def __init__(self, inner: Actuator) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self._last: tuple[PoolState, ...] = ()

    def list_pools(self) -> Sequence[PoolState]:
        pools = tuple(self._inner.list_pools())
        with self._lock:
            self._last = pools
        return pools

    def unread_pools(self) -> Mapping[str, ActuatorError]:
        return unread_pools(self._inner)

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        return self._inner.resize(pool_id, to_units, key)

    @property
    def last(self) -> tuple[PoolState, ...]:
        with self._lock:
            return self._last


@dataclass(frozen=True)
class DaemonTickReport:
    forecasts: Sequence[DemandForecast]
    pools: Sequence[PoolState]
    plan: CapacityPlan | None
    results: Sequence[ActionResult]
    budgets: Sequence[BudgetSnapshot]
    errors: Sequence[Exception]
    blind: str | None = None
    day_share: SharesDayCounts | None = None  # where the daily report's counts are kept for the next leader


class AgentLoopAdapter:
    def __init__(
        self,
        agent: Agent,
        pools: PoolStateRecorder,
        state: StateStore,
        leadership: Leadership,
        clock: Clock,
        shadow: tuple[ShadowBook, DemandRecorder] | None = None,
    ) -> None:
        self._agent = agent
        self._shadow = shadow  # dry-run: what the recommendations would have cost, and the demand read
        self._reload_shadow = False
        self._pools = pools
        self.keeper = MemoryKeeper(state, agent.pool_by_id)
        self._leadership = leadership
        self._clock = clock
        self._unread_since: float | None = None  # monotonic: since when this leader has not read its memory
        self._day_term = 0  # the terms started (``resume``), for the daily report's counts
        self._day: DayRead | None = None  # what the current term read of them
        self._day_kept: float | None = None  # monotonic: when they last went in the memory

    @property
    def agent(self) -> Agent:
        return self._agent

    def resume(self, another_led: bool = False) -> None:
        """A new term starts (``Resumable.resume``). ``another_led``: the drains' memory is forgotten too
        (``NodeDrains.forget``), as a fresh replica has none, and the drains still in the cluster's record are taken
        over from their nodes' marks, the cloud asked about each: another leader may have settled one this replica
        remembers (its pods told, the autoscaler bounds moved), or sent the removal of one it started. A term continued
        by a late renewal of this replica's own lease keeps it: nobody else led, and its removals under way, the nodes
        it left cordoned while the cloud deleted them and its drains' timeouts are its own to carry on. The removals
        it sent are forgotten only once the planner memory says another leader settled their drains (at its first
        load: ``NodeDrains.recall_settled``)."""
        if another_led and self._agent.drains is not None:
            self._agent.drains.forget()
        self.keeper.resume()
        # a new term: what it waited for before is not its to judge (another may have led since, without a standby
        # tick of this replica in between); it waits for the units in flight at its first tick that acts instead
        self._agent.budget_watch.stand_by()
        self._unread_since = None
        self._reload_shadow = self._shadow is not None  # read back before the next tick accounts (never raises)
        self._day_term, self._day = self._day_term + 1, None

    def run_once(self, now: datetime) -> DaemonTickReport:
        errors: list[Exception] = []
        first = not self.keeper.loaded
        memory, load_error = self.keeper.before_tick(self._agent.memory)
        self._agent.memory = memory
        if self._day is None or not self._day.read:  # the term's first tick, or its first read of the memory
            loaded, at = self.keeper.loaded, now if self._day is None else self._day.at
            self._day = DayRead(self._day_term, at, loaded, memory.day_counts if loaded else None)
        if not self.keeper.loaded:
            return self._memory_unread(now, load_error)
        if first:  # the open conditions its predecessor saved; from now on this replica's tracker holds them
            self._agent.conditions.adopt(memory.open_conditions, memory.conditions_ended, now)
            self._recall_short_slices(memory, now)
            self._agent.budget_watch.restore(memory.scale_ups_waited)  # and its budget watch the scale-ups
            if self._agent.drains is not None:  # and its drains the drains settled: after a forget, another's
                self._agent.drains.recall_settled(memory.drains_settled)
        self._unread_since = None
        try:
            report = self._agent.run_once(now)
        finally:  # what was acted on is saved even when the tick failed afterwards; only ever by the leader
            waited = self._agent.budget_watch.waited
            self._agent.memory = replace(self._agent.memory, scale_ups_waited=waited)
            if self._agent.drains is not None:
                self._agent.memory = replace(self._agent.memory, drains_settled=self._agent.drains.settled(now))
            save_error = (
                self.keeper.after_tick(self._agent.memory, now)
                if self._leadership.is_leader(self._clock.now())
                else None
            )
        errors += [MetricsUnavailable(name, why) for name, why in sorted(report.problems.items())]
        errors += [
            ActuatorError(r.pool_id, r.error or "failed") for r in report.results if r.status is ActionStatus.FAILED
        ]
        errors += [e for e in (load_error, save_error) if e is not None]
        if self._shadow is not None:
            book, demand = self._shadow
            try:
                if self._reload_shadow:  # a saved account this replica has not seen is never overwritten
                    book.reload()
                    self._reload_shadow = False
                book.record(now, demand.newest_step(now), self._pools.last, report.plan.targets)
            except LedgerUnavailable as exc:  # the tick decided and recorded; only the shadow account is behind
                errors.append(exc)
        return DaemonTickReport(
            forecasts=tuple(report.forecasts.values()),
            pools=self._pools.last,
            plan=report.plan,
            results=report.results,
            budgets=report.plan.budgets,
            errors=errors,
            blind=self._blind(report),
            day_share=self,
        )

    def day_read(self) -> DayRead:
        """What this term read of the daily report's counts kept (``SharesDayCounts``)."""
        return self._day or DayRead(self._day_term, self._clock.now(), False, None)

    def keep_day(self, counts: DayCounts) -> bool:
        """Put the daily report's counts in the memory and save it, when due (``SharesDayCounts``): True when the
        store holds them or they wait for their next turn. Not before the memory is read, nor by a standby, nor
        while the store fails (the memory's save is retried at the next tick, not twice a tick)."""
        if not self.keeper.loaded:
            return False
        held, monotonic = self._agent.memory.day_counts, self._clock.monotonic()
        due = (
            held is None
            or (held.since, held.led) != (counts.since, counts.led)
            or {n: c.actions for n, c in held.replicas.items()} != {n: c.actions for n, c in counts.replicas.items()}
            or self._day_kept is None
            or monotonic - self._day_kept >= DAY_COUNTS_REFRESH.total_seconds()
        )
        if not due:
            return True
        self._agent.memory = replace(self._agent.memory, day_counts=counts)
        self._day_kept = monotonic
        if self.keeper.failing or not self._leadership.is_leader(self._clock.now()):
            return False  # saved with the memory when its save is retried, at the next tick
        return self.keeper.after_tick(self._agent.memory, self._clock.now()) is None

    def keep_open(self, key: Condition, condition: OpenCondition, now: datetime) -> bool:
        """Carry the daemon's open ``tick-failed`` in the tracker's record and save it now (the failed tick saved the
        memory before the daemon knew it failed): True when the store holds it. Not before the memory is read: a
        leader that has not read it saves nothing."""
        if not self.keeper.loaded:
            return False
        self._agent.conditions.carry(key, condition)
        return self._save_conditions(now)

    def keep_closed(self, key: Condition, now: datetime) -> None:
        """Take the daemon's ``tick-failed`` out of the record once its end is told, and save that."""
        self._agent.conditions.drop(key)
        if self.keeper.loaded:
            self._save_conditions(now)

    def _save_conditions(self, now: datetime) -> bool:
        self._agent.memory = with_conditions(self._agent.memory, self._agent.conditions)
        if not self._leadership.is_leader(self._clock.now()):
            return False
        return self.keeper.after_tick(self._agent.memory, now) is None

    def _recall_short_slices(self, memory: PlannerMemory, now: datetime) -> None:
        """Hand the slices short of hosts its predecessor saved to the slice adapter, once: from now on the adapter's
        reads say which are short (and whether each is still the shortfall the record speaks of). An unbroken watch
        leaves at most the lease duration and two ticks between the last read of one leader and the first of the
        next (one before the old leader stops, one after the new one takes over)."""
        if (short := self._agent.parts.short_slices) is not None:
            settings = self._agent.settings
            gap = settings.daemon.leader_election.lease_duration + 2 * settings.loop.tick_interval
            short.recall(memory.slices_short_since, now, gap)

    def _memory_unread(self, now: datetime, load_error: StateUnavailable | None) -> DaemonTickReport:
        """A leader tick before the planner memory could be read: watch only, nothing planned or acted on."""
        errors: list[Exception] = [] if load_error is None else [load_error]
        try:
            self._agent.watch(now, leading=True)  # its open conditions kept: it still leads
        except (ActuatorError, LedgerUnavailable) as exc:  # counted; the tick is blind already
            errors.append(exc)
        if isinstance(load_error, StateDocumentTooNew):
            why = (
                f"planner memory saved by a newer release, not read ({load_error}); no pool is planned or acted on "
                f"until a release that reads it leads or {self._state_config_map()} is deleted"
            )
        else:
            why = f"planner memory not read yet ({load_error}); no pool is planned or acted on until it is"
        monotonic = self._clock.monotonic()
        if self._unread_since is None:
            self._unread_since = monotonic
        unread_for = timedelta(seconds=monotonic - self._unread_since)
        settings = self._agent.settings
        bound = settings.daemon.ready_bound(settings.loop.tick_interval)  # the readiness bound, as /readyz has it
        if unread_for >= bound:
            self._alert_unread(now, unread_for, load_error)
        return DaemonTickReport(
            forecasts=(),
            pools=self._pools.last,
            plan=None,
            results=(),
            budgets=(),
            errors=errors,
            blind=why,
            day_share=self,
        )

    def _alert_unread(self, now: datetime, unread_for: timedelta, error: StateUnavailable | None) -> None:
        unread = f"the leader has not read the planner memory for {format_duration(unread_for)}"
        if isinstance(error, StateDocumentTooNew):
            where = self._state_config_map()
            summary = (
                f"{unread}: {where} holds a planner memory saved by a newer release of leadtime, which this release "
                "cannot read (after a rollback, or while a rolling upgrade runs), so it plans and acts on no pool "
                "rather than without the blocks and back-offs saved there. Roll forward to a release that reads it "
                f"(the one that saved it, or later); or, to go on with this release, delete {where} (check first "
                "which pools it holds blocked: their blocks and every back-off are lost) and the leader starts "
                "afresh at its next tick"
            )
        else:
            summary = (
                f"{unread}: it plans and acts on no pool until it can (the blocks and back-offs its predecessor "
                "saved are in it). Check that the Kubernetes API answers and that the agent's ServiceAccount may get "
                "the state ConfigMap the error names"
            )
        event = AlertEvent(
            AlertKind.TICK_FAILED, Severity.WARNING, now, UNREAD_MEMORY_SUBJECT, summary, {"error": str(error)}
        )
        self._agent.parts.notifier.notify(event)

    def _state_config_map(self) -> str:
        """The state ConfigMap as an operator finds it: its name and, when configured, its namespace."""
        state = self._agent.settings.daemon.state
        if state.config_map_namespace is None:
            return f"the state ConfigMap {state.config_map_name} (in the Lease's namespace)"
        return f"the state ConfigMap {state.config_map_namespace}/{state.config_map_name}"

    def _blind(self, report: TickReport) -> str | None:
        """Why the tick had nothing to plan on: no demand class had data (Prometheus unreachable, a wrong URL), or
        no pool could be read (a refused permission, a cloud API that cannot be reached); None when it had."""
        classes = [c.name for c in self._agent.classes]
        if classes and not report.observed:
            name = next((n for n in classes if n in report.problems), classes[0])
            why = report.problems.get(name, "no data")
            return f"no demand class has data ({len(classes)} held; {name}: {why})"
        unread = unread_pools(self._pools)
        if unread and not self._pools.last:
            pool_id, error = sorted(unread.items())[0]
            return f"no pool could be read ({len(unread)} held; {pool_id}: {error})"
        return None

    def watch(self, now: datetime) -> None:
        self._agent.watch(now)

    def refit(self, now: datetime) -> None:
        self._agent.refit(now)

    def stage_refit(self, now: datetime) -> StagedRefit:
        return self._agent.stage_refit(now)

"""The loop's money side: charge the ledger for what the pools hold, hand the planner each budget's spend, and
raise the alerts about spend and slow capacity (budget thresholds, projected overspend, stalled scale-ups).

One tick: ``observe`` (charge what was held since the last tick, return budget spend for the planner, and note
whether the ledger holds each budget's period from its start: ``coverage``),
``reserve`` (reserve the plan's scale-ups against budgets shared with other agents, see
``agent.budget_reserve``), ``acted`` (charge the agent's own scale-ups from this instant; remember them), ``alerts``
(a budget whose period started before the ledger's first record is told once per period: its spend so far leaves
out the time before, see ``agent.ledger.coverage.LedgerCoverage``; a projected overspend, a deferred hard stop, a
budget's scale-ups trimmed while pools nobody knows the units of keep room back (``agent.budget_unknown_pools``) and a
stalled scale-up are raised every tick while they hold, so that ``agent.conditions`` can tell when each ends).

The scale-ups waited for travel in the planner memory the leader saves, so that a new leader waits for those its
predecessor asked for, from when they were asked, and for the units in flight no saved one explains from its first read
(``agent.scale_up_memory``: ``waited``, ``restore``, ``stand_by``).

What the page exports of them (``judged_pending``, read by ``agent.daemon.metrics.ScaleUpWaitCollector``) is what a tick
judged on pools it read, and only while that judgement is recent: a leader whose ticks fail (or that has not ticked yet
in its term) re-checks nothing, and its stale scale-ups would read as the cloud not delivering (LeadtimeNotTicking
tells that instead); a pool that cannot be read is neither stalled nor on time (LeadtimePoolUnreadable tells that). Its
scale-up stays waited for, and once the pool is read again it is judged on its whole wait since it was asked.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from agent.alerts import PendingScaleUp, outstanding, stalled_scale_up_events
from agent.budget_alerts import (
    budget_threshold_events,
    hard_stop_deferred_event,
    ledger_incomplete_event,
    projected_overspend_event,
)
from agent.budget_reserve import BudgetReserver, Reserved, in_service
from agent.budget_reserve_caps import releasing_units
from agent.budget_unknown_pools import unknown_pool_events
from agent.ledger.accrual import PoolReading
from agent.ledger.base import Ledger
from agent.ledger.coverage import LedgerCoverage
from agent.ledger.meter import SpendMeter
from agent.ledger.pool_ids import pool_previous_ids
from agent.ledger.reservations import Reservations
from agent.planning.budget import Budget, BudgetSpend, billed_after, scale_up_charges
from agent.planning.budget_caps import known_units
from agent.planning.budgeting import draining_going_units
from agent.planning.enforcement import deferred_stops, find_overspends
from agent.scale_up_memory import ScaleUpMemory
from config.schema import Settings
from models import ActionResult, ActionStatus, AlertEvent, CapacityPlan, PoolKind, PoolSpec, PoolState, Resize

_BILLED = (ActionStatus.DONE, ActionStatus.STARTED)  # a recorded (dry-run) action bills nothing
_HISTORY = timedelta(days=32)  # longer than any month period: every scale-up that could drive a projection


class BudgetWatch:
    def __init__(
        self,
        settings: Settings,
        pools: Mapping[str, PoolSpec],
        ledger: Ledger,
        holder: str = "leadtime",
        tick: timedelta | None = None,
        monotonic: Callable[[], float] | None = None,
    ) -> None:
        """``monotonic``: the seconds of a clock that never steps (``Clock.monotonic``), read with each tick's
        ``now``: where the wall clock stepped back, the ledger charges the time it measures (``None``: a simulation,
        whose time never steps back)."""
        self.budgets = [Budget.from_settings(b) for b in settings.budgets]
        # spend under a pool's previous ids counts as the pool's: this agent's pools' and the remote pools' of the
        # budgets shared with other agents (``remote_previous_ids``), in the spend read and the reservations alike
        previous_ids = pool_previous_ids({p.id: p.previous_ids for p in settings.pools}, self.budgets)
        self.reserver = (
            BudgetReserver(
                ledger,
                self.budgets,
                pools,
                holder,
                settings.ledger.reservation_ttl,
                previous_ids,
                hold=settings.planner.scale_down_stabilization + (tick or settings.loop.tick_interval),
                tick=tick or settings.loop.tick_interval,
            )
            if any(b.remote_pools for b in self.budgets) and isinstance(ledger, Reservations)
            else None
        )
        # A tick is an observation: an interval of one tick (and a tick half a tick late) is not a gap, whatever
        # gap_after says. A simulation ticks at its trace's step, 10 minutes on the ServeGen trace.
        tick = tick or settings.loop.tick_interval
        self.tick = tick
        self.meter = SpendMeter(ledger, max(settings.ledger.gap_after, tick * 1.5), previous_ids=previous_ids)
        # whether the ledger is charged: a simulated agent with no budget turns it off (``agent.simulation.assembly``),
        # as nothing reads its spend back
        self.charges = True
        self.pools = pools
        self.stall_factor = settings.alerts.stalled_after_lead_times
        self.release_after = settings.planner.scale_down_stabilization  # a scale-up's hold: lead time, this, a tick
        self._by_name = {b.name: b for b in self.budgets}
        self._scale_ups: list[tuple[datetime, Resize]] = []
        self._pending: list[PendingScaleUp] = []
        # the scale-ups a new leader takes over, from the planner memory and the units in flight; a saved one is
        # trusted across the old leader's last tick, the Lease running out and the new leader's first tick (up to the
        # misfire grace late), its judgement renewed at every tick
        self.scale_up_memory = ScaleUpMemory(
            pools, settings.daemon.leader_election.lease_duration + 2 * tick + settings.daemon.misfire_grace
        )
        # the monotonic seconds at which the last tick ended judging the scale-ups waited for (None: never, or a
        # simulation's watch, which has no monotonic clock), and the pools that tick could not read; a judgement is
        # recent for two ticks and the misfire grace: a tick that overruns its interval skips the slot after it
        # (one tick at a time), and the next may start up to the grace late and take a tick itself
        self._judged: tuple[float | None, frozenset[str]] | None = None
        self._judged_for = 2 * tick + settings.daemon.misfire_grace
        self._spent: dict[str, tuple[datetime, float]] = {}  # budget -> (period start, spent at the last tick)
        self.coverage: list[LedgerCoverage] = []  # as of the last spend read
        self._told: dict[str, datetime] = {}  # budget -> the period start its incomplete ledger was last alerted for
        self._unseen: dict[str, datetime] = {}  # unread pool the ledger has no record of -> since when it is unread
        self._unread: dict[str, int] = {}  # pool not read this tick -> the units its spend is counted at
        self._last_read: dict[str, int] = {}  # pool -> the units the agent last read it at (``observe``)
        self._monotonic = monotonic
        self._stamp: tuple[datetime, float] | None = None  # the tick's now, and the monotonic seconds read with it
        # pool -> the first of its releases in a row whose calls gave no clear answer (``executed``), and the results
        # of this tick's such calls no longer counted as carried out
        self._unclear_since: dict[str, datetime] = {}
        self._expired: frozenset[str] = frozenset()

    @property
    def scale_ups(self) -> tuple[tuple[datetime, Resize], ...]:
        """The agent's own scale-ups of the last 32 days, with when each was carried out: what overspends name."""
        return tuple(self._scale_ups)

    @property
    def pending(self) -> tuple[PendingScaleUp, ...]:
        """The scale-ups whose units are waited for: a stalled scale-up is one of them."""
        return tuple(self._pending)

    @property
    def judged_pending(self) -> tuple[PendingScaleUp, ...]:
        """The scale-ups waited for as the last tick judged them, for the page: none when no tick judged them within
        the last two ticks and the daemon's misfire grace since it ended (the leader's ticks fail, or it has not ticked
        yet), nor those of a pool that tick could not read. A watch without a monotonic clock (a simulation) calls
        every judgement recent."""
        if self._judged is None:
            return ()
        at, unread = self._judged
        if at is not None and self._monotonic is not None and self._monotonic() - at > self._judged_for.total_seconds():
            return ()
        return tuple(p for p in self._pending if p.pool_id not in unread)

    @property
    def adopts_in_flight(self) -> bool:
        """Whether the agent's writes reach its pools (dry-run: not): a new leader then takes over the saved
        scale-ups and the units in flight, and a tick claims its releases in a shared budget (``ShedClaims.sends``)."""
        return self.scale_up_memory.acts

    @adopts_in_flight.setter
    def adopts_in_flight(self, acts: bool) -> None:
        self.scale_up_memory.acts = acts
        if self.reserver is not None:  # a release only recorded is never claimed as being released
            self.reserver.sheds.sends = acts

    def executed(self, results: Sequence[ActionResult]) -> None:
        """Once the executor acted: take back the claims of the releases it did not carry out, and keep those of the
        ones it did for the commit (``ShedClaims.executed``). A release whose call gave no clear answer
        (``ActionResult.unclear``) counts as carried out until its pool's releases have had no clear answer, tick
        after tick, for its lead time, from the first of them: the cloud carrying out none of them, the others sharing
        its budget would otherwise never shed for its units. A release that was refused, carried out, or not asked
        for again starts that count anew, so refusals before a release the cloud carried out never cut its count."""
        at = {r.pool_id: r.at for r in results if r.unclear}
        self._unclear_since = {p: self._unclear_since.get(p, first) for p, first in at.items()}
        expired = {r.key for r in results if r.unclear and r.at - self._unclear_since[r.pool_id] >= self._lead(r)}
        self._expired = frozenset(expired)
        judged = [replace(r, unclear=False) if r.key in expired else r for r in results]
        if self.reserver is not None:
            self.reserver.sheds.executed(judged, {r.pool_id for r in results if r.key in expired})

    def _lead(self, result: ActionResult) -> timedelta:
        spec = self.pools.get(result.pool_id)
        return spec.lead_time if spec is not None else self.tick

    def unclaim(self) -> None:
        """Take back the releases a tick claimed and did not carry out, when it fails before its commit
        (``ShedClaims.release``): those carried out are marked as going, as the commit marks them."""
        if self.reserver is not None:
            self.reserver.sheds.release()

    @property
    def waited(self) -> tuple[PendingScaleUp, ...] | None:
        """What the planner memory keeps of the scale-ups waited for (``ScaleUpMemory.waited``)."""
        return self.scale_up_memory.waited(self._pending)

    def restore(self, saved: Sequence[PendingScaleUp] | None) -> None:
        """The scale-ups the planner memory saved (this leader's first read of it): ``ScaleUpMemory.restore``."""
        self.scale_up_memory.restore(saved)

    def stand_by(self) -> None:
        """This replica no longer leads, or begins a new term as leader: the scale-ups it waited for are the leader's
        to wait for (in between, another may have led and resized their pools), and it takes over what the memory saved
        and what is in flight at its first tick that acts as leader."""
        self._pending = []
        self.scale_up_memory.stand_by()
        self._judged = None
        if self.reserver is not None:  # the drains under way are no longer its own to mark as going
            self.reserver.marks.reset()

    def observe(
        self, now: datetime, states: Mapping[str, PoolState], last_read: Mapping[str, int] | None = None
    ) -> list[BudgetSpend]:
        """Charge what each pool held since the last tick; each budget's spend so far, for the planner, with the
        units last recorded for the pools whose state could not be read (missing from ``states``). ``last_read``:
        the units the agent last read each pool at, with its resizes carried out since (``Agent.last_read_units``)."""
        self._stamp = None if self._monotonic is None else (now, self._monotonic())
        self._last_read = dict(last_read or {})
        if self.charges:
            self.meter.observe(self._reading(now, s.pool_id, s.billed_units) for s in states.values())
        spends = self.spend(now, unread=[p for p in self.pools if p not in states])
        # an unread pool still bills: it is kept reserved (``acted``) at the more of the units the agent last read it at
        # and those the ledger last recorded it billing, as the planner counts it (``known_units``: a target read
        # leaves out nodes still draining), so that a failed read never frees its room for another agent.
        # Known by neither (unread since the agent's first tick: a role still propagating), it is reserved at nothing:
        # its max_units to the period's end would shut the other agents out of room it may never use. The pool's
        # pool-unreadable alert says only that it cannot be read; the budget's (``unknown_pool_events``) says what the
        # planner's trim keeps back for it (its max_units over each scale-up's hold) and which scale-ups that trimmed.
        known = known_units(spends, last_read)
        self._unread = {p: known[p] for p in self.pools if p not in states and p in known}
        return spends

    def spend(self, now: datetime, unread: Collection[str] = ()) -> list[BudgetSpend]:
        """Each budget's spend so far, read from the ledger without charging anything, with the units last recorded
        for the pools in ``unread`` and what they held since (not recorded until they are read again), and, for a
        budget shared with other agents, what they keep reserved in its month period and in the current hour
        (``BudgetSpend.committed_elsewhere_usd``, ``committed_elsewhere_hour_usd``); ``coverage`` says whether the
        ledger holds each period from its start."""
        prices = {p: spec.price_per_unit_hour_usd for p, spec in self.pools.items()}
        if self.reserver is not None:  # what the other agents sharing a budget hold: in its period's projection
            # read before the spend: each counted from where its agent's recorded spend ends, a tick the agent records
            # between the two reads is counted twice (never missed, as it would be read the other way round)
            month, hour = self.reserver.held_elsewhere(now), self.reserver.held_elsewhere_this_hour(now)
            to_end = self.reserver.held_elsewhere(now, to_period_end=True)
            going, going_hour = self.reserver.releasing_elsewhere(now), self.reserver.releasing_elsewhere(now, True)
            staying = self.reserver.staying_elsewhere(now, 2 * self.tick)
        spends = self.meter.budget_spend(self.budgets, now, unread, prices)
        if self.reserver is not None:
            spends = [
                replace(
                    s,
                    committed_elsewhere_usd=month.get(s.budget.name, 0.0),
                    committed_elsewhere_to_period_end_usd=to_end.get(s.budget.name),
                    committed_elsewhere_hour_usd=hour.get(s.budget.name, 0.0),
                    releasing_elsewhere_usd=going.get(s.budget.name, 0.0),
                    releasing_elsewhere_hour_usd=going_hour.get(s.budget.name, 0.0),
                    staying_elsewhere_usd=staying.get(s.budget.name, 0.0),
                )
                for s in spends
            ]
        self.coverage = self.meter.coverage(self.budgets, now)
        # a pool the ledger has no record of is unread since the first tick this watch found it so
        self._unseen = {p: self._unseen.get(p, now) for p in unread}
        return [self._with_unseen(spend) for spend in spends]

    def _with_unseen(self, spend: BudgetSpend) -> BudgetSpend:
        unseen = {p: at for p, at in self._unseen.items() if p in spend.budget.pools and p not in spend.unread_since}
        return replace(spend, unread_since={**spend.unread_since, **unseen}) if unseen else spend

    def reserve(self, now: datetime, plan: CapacityPlan, states: Mapping[str, PoolState] | None = None) -> Reserved:
        """The plan with its scale-ups reserved against the budgets (trimmed or held where not granted), each for the
        units it adds to the bill of its pool as ``states`` (the planner's) has it."""
        return Reserved(plan) if self.reserver is None else self.reserver.reserve(now, plan, states, self._unread)

    def acted(
        self,
        now: datetime,
        plan: CapacityPlan,
        results: Sequence[ActionResult],
        states: Mapping[str, PoolState],
    ) -> None:
        """Remember the agent's own scale-ups for overspend and stall alerts and charge them from now on; release
        the reservations of scale-ups not carried out, and keep what the pools hold (``states``, with the
        scale-ups carried out) reserved in the budgets shared with other agents, with the pools not read this tick at
        the units ``observe`` counted them at: a failed read never frees their room for another agent. They are
        remembered before the ledger is written: a write that fails (``LedgerUnavailable``, raised) leaves them waited
        for and named, and its readings to the next tick's write (``SpendMeter.observe``)."""
        billed = {r.key for r in results if r.status in _BILLED}
        ups = [r for r in plan.resizes if r.key in billed and r.is_scale_up]
        self._scale_ups = [(at, r) for at, r in self._scale_ups if now - at <= _HISTORY]
        self._scale_ups += [(now, r) for r in ups]
        # before its own, checked on the pools as read before it acted: a saved scale-up whose pool was since asked for
        # less (or that is ready) is dropped, so one asked again now is waited for from now. A pool not read this tick
        # is taken at the first tick that reads it.
        self._pending += self.scale_up_memory.take_over(now, states)
        self._pending += [PendingScaleUp(r.pool_id, now, r.from_units, r.to_units, judged_at=now) for r in ups]
        if self.charges:
            self.meter.observe(self._reading(now, r.pool_id, self._charged(r, states)) for r in ups)
        if self.reserver is not None:
            self.reserver.settle(results)
            held = {**self._unread, **{pool_id: s.billed_units for pool_id, s in states.items()}}
            # a dead predecessor's scale-ups are taken over by the units in service, not by broken ones nor nodes being
            # drained, which may be gone while the units it bought bill on; a pool not read this tick covers none
            covered = {pool_id: in_service(s) for pool_id, s in states.items()}
            for r in ups:  # counted from now, a queued resource's too: it may be granted at any moment
                state = states.get(r.pool_id)
                held[r.pool_id] = max(
                    held.get(r.pool_id, 0), r.to_units if state is None else billed_after(state, r.to_units)
                )
                covered[r.pool_id] = max(
                    covered.get(r.pool_id, 0), r.to_units if state is None else in_service(state, r.to_units)
                )
            # a release with no clear answer (``carried_out``) is marked as going, as it kept its claim
            unclear = [r.unclear and r.key not in self._expired for r in results]  # as ``executed`` judged them
            going = [replace(r, status=ActionStatus.STARTED) if u else r for r, u in zip(results, unclear, strict=True)]
            self.reserver.commit(now, held, covered, releasing_units(plan, going, states))

    def alerts(
        self,
        now: datetime,
        plan: CapacityPlan,
        spends: Sequence[BudgetSpend],
        states: Mapping[str, PoolState],
        results: Sequence[ActionResult],
    ) -> list[AlertEvent]:
        """The tick's alerts about spend and slow capacity; ``results`` are what the executor did with ``plan``, which
        a projected overspend tells its releases by (carried out, recommended in dry-run, rejected), not the plan.
        ``states`` are the pools as the planner saw them this tick (``plan`` was made on them: the nodes being drained
        out of their targets), read before the executor acted: a scale-up is waited for at the target ``plan`` and
        ``results`` leave its pool at, in the sizes it was asked in, until its units are ready or its pool was asked
        for less."""
        events: list[AlertEvent] = []
        for coverage in self.coverage:
            if not coverage.complete and self._told.get(coverage.budget) != coverage.period_start:
                self._told[coverage.budget] = coverage.period_start
                events.append(ledger_incomplete_event(coverage, now))
        for snapshot in plan.budgets:
            budget = self._by_name.get(snapshot.budget)
            if budget is None:  # an hourly cap: its overrun is a projected-overspend alert, not a threshold
                continue
            last = self._spent.get(budget.name)
            previous = None if last is None else (last[1] if last[0] == snapshot.period_start else 0.0)
            events += budget_threshold_events(snapshot, previous, budget.alert_thresholds, now)
            self._spent[budget.name] = (snapshot.period_start, snapshot.spent_usd)
        billed = {pool_id: s.billed_units for pool_id, s in states.items()}
        # raised every tick while it waits (a notifier tells it once per window), so that its end is told
        read = self._last_read  # a pool not read is projected as the planner projects it
        events += [
            hard_stop_deferred_event(d, now) for d in deferred_stops(now, spends, self.pools, billed, self.tick, read)
        ]
        events += unknown_pool_events(
            now, plan, self.budgets, spends, self.pools, billed, self.release_after, self.tick, read
        )
        going = draining_going_units(states, plan.resizes)  # billing one more tick, as the shed counts them
        for overspend in find_overspends(now, spends, self.pools, billed, read, going, self.tick):
            budget = self._by_name[overspend.budget]
            drivers = scale_up_charges(self._scale_ups, self.pools, budget, overspend.period)
            releases = [r for r in plan.resizes if r.pool_id in budget.pools]
            events.append(projected_overspend_event(overspend, now, drivers, releases, results))
        # the scale-ups are waited for on the pools as this tick left them, in the planner's sizes they were asked in
        after = _carried_out(states, plan, results)
        self._pending = [
            p if p.pool_id not in after else self.scale_up_memory.judged(p, now)
            for p in outstanding(self._pending, after)
        ]
        judged_at = None if self._monotonic is None else self._monotonic()  # the judgement ends here
        self._judged = (judged_at, frozenset(p.pool_id for p in self._pending if p.pool_id not in after))
        events += stalled_scale_up_events(self._pending, after, self.pools, now, self.stall_factor)
        return events

    def _charged(self, resize: Resize, states: Mapping[str, PoolState]) -> int:
        """The units ``resize``'s pool is charged from now on: those billed before it and the ones it adds, except in a
        queued-resource pool, whose new units wait for resources unbilled (the next read charges them once granted)."""
        state = states.get(resize.pool_id)
        if state is None:
            return resize.to_units
        spec = self.pools.get(resize.pool_id)
        if spec is not None and spec.kind is PoolKind.TPU_QUEUED_RESOURCE:
            return state.billed_units
        return billed_after(state, resize.to_units)

    def _reading(self, now: datetime, pool_id: str, units: int) -> PoolReading:
        spec = self.pools.get(pool_id)
        return PoolReading(pool_id, now, units, spec.price_per_unit_hour_usd if spec else 0.0, self._monotonic_at(now))

    def _monotonic_at(self, now: datetime) -> float | None:
        """The monotonic seconds of the tick at ``now``: those read with it at the start of the tick (a scale-up is
        charged from the tick's instant, as on the wall clock), else read now."""
        if self._monotonic is None:
            return None
        if self._stamp is None or self._stamp[0] != now:
            self._stamp = (now, self._monotonic())
        return self._stamp[1]


def _carried_out(
    states: Mapping[str, PoolState], plan: CapacityPlan, results: Sequence[ActionResult]
) -> dict[str, PoolState]:
    """``states`` with the targets of the resizes of ``plan`` the executor carried out (``results``): what the pools
    were asked for once the tick acted. A unit asked for is not ready yet, and the units a release drains are out of
    the planner's target from the start of their drains."""
    done = {r.key for r in results if r.status in _BILLED}
    out = dict(states)
    for resize in plan.resizes:
        state = out.get(resize.pool_id)
        if state is not None and resize.key in done:
            out[resize.pool_id] = replace(state, target_units=resize.to_units)
    return out

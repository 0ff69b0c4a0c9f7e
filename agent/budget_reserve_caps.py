"""The caps a scale-up on a budget shared with other agents is reserved in (``agent.budget_reserve``): each cap's
reservation key, the period it is made for, what a unit costs in it and the span of time that amount pays for.

A budget's monthly and hourly caps are reserved under their own keys, the current period under the key earlier
releases use and a period reserved before it starts under a key naming its start (``reserved_periods``); a unit is
priced over what is left of the period, or over the budget's commit horizon if that ends first, and the reservation
records that span (``span_paid_for``) so that agents with other horizons count it over spans of their own.

The units an agent is releasing (``releasing_units``: its nodes being drained and what its tick's releases take off the
bill) are marked under a key of their own (``releasing_key``, ``Cap.releasing``), which no cap counts; a drain's units
for the first two ticks of the drain only, consecutive ticks of this replica's term as leader (``ReleaseMarks``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from agent.ledger.reservations import ReservationRequest
from agent.planning.budget import Budget, CapKind, Period, billed_after
from models import DRAIN_KEY_MARK, ActionResult, ActionStatus, CapacityPlan, PoolState


@dataclass(frozen=True)
class Cap:
    """One cap a pool's scale-up spends from: the reservation's budget key, its period and what a unit costs in it."""

    key: str  # the budget's name for its monthly cap, ``NAME/hourly`` for its hourly cap (``reserved_periods``)
    budget: Budget
    period: Period
    cap_usd: float
    per_unit_usd: float
    ledger_pools: tuple[str, ...] = ()  # the ids whose spend counts in the budget: its pools' and their previous ids
    counted_with: tuple[str, ...] = ()  # the other keys the same period's reservations are made under
    horizon: timedelta | None = None  # the budget's commit horizon (monthly caps): the units are paid for that far

    @property
    def current(self) -> bool:
        """Whether this is the cap's current period, reserved under its plain key (not a period reserved ahead)."""
        return "@" not in self.key[len(self.budget.name) :]

    def releasing(self, now: datetime, units: int, holder: str, tick: timedelta) -> ReservationRequest:
        """Mark ``units`` of the pool as being released (``releasing_key``): counted in no cap, never refused, and
        read by the other agents' sheds only while their holder renews it (it lives two of its ``tick``). The units
        bill until its next tick observes them gone (the ledger charges a release one tick late), so the mark pays for
        its span from then on only."""
        start, end = span_paid_for(self.period, now, self.horizon)
        gone = min(end, start + tick)
        share = (end - gone) / (end - start) if end > start else 0.0
        return ReservationRequest(
            budget=releasing_key(self.key),
            pools=self.ledger_pools or tuple(sorted(self.budget.pools)),
            period_start=self.period.start,
            period_end=self.period.end,
            cap_usd=math.inf,
            amount_usd=units * self.per_unit_usd * share,
            holder=holder,
            ttl=min(2 * tick, self.period.end - now),
            covers=(gone, end),
        )

    def request(self, now: datetime, units: int, holder: str, ttl: timedelta, cap_usd: float) -> ReservationRequest:
        """Reserve ``units`` of the pool in this cap, for ``ttl`` but never past the period's end, recording the span
        the amount pays for (``span_paid_for``) so that the other agents carry it over spans of their own."""
        return ReservationRequest(
            budget=self.key,
            pools=self.ledger_pools or tuple(sorted(self.budget.pools)),
            period_start=self.period.start,
            period_end=self.period.end,
            cap_usd=cap_usd,
            amount_usd=units * self.per_unit_usd,
            holder=holder,
            ttl=min(ttl, self.period.end - now),
            counted_with=self.counted_with,
            covers=span_paid_for(self.period, now, self.horizon),
        )


def reserved_periods(
    budget: Budget, now: datetime, hold: timedelta
) -> list[tuple[str, Period, float, timedelta | None, tuple[str, ...]]]:
    """The periods of ``budget``'s caps a reservation at ``now`` is made in: each one's key, period, cap, horizon and
    the other keys the same period is reserved under. The ledger sums a key's reservations against its cap whatever
    period they were made for, so a period reserved before it starts is keyed by its start (``NAME/hourly@START``,
    ``NAME@START``): made now, a reservation for it must count there once it is the current period, not in this one.
    The current period stays under the key earlier releases reserve it under (``NAME/hourly``, ``NAME``), so that
    agents of both releases sharing a budget see each other's reservations of it, and a request for it counts those
    made under its start's key as well (while it was the next period). Reserving it under both keys would count an
    agent's own reservations twice.

    An hourly cap is reserved in this hour and the next, as the planner holds it over the next hour (a rate): the
    units held or bought now go on spending then, and the other agents' plans count none of this agent's pools
    there. A monthly cap is reserved in the next month period too once the reservation reaches it: its commit horizon
    or, unset or shorter, the ``hold`` of a unit bought now (the pool's lead time, the idle window, a tick: the hold
    with which the planner's trim holds the next period's cap). There it runs to that period's end, or over the
    commit horizon from now."""
    periods: list[tuple[str, Period, float, timedelta | None, tuple[str, ...]]] = []
    for kind, period, cap_usd in budget.caps(now):
        if kind is CapKind.MONTH:
            horizon = budget.commit_horizon
            periods.append((budget.name, period, cap_usd, horizon, (keyed(budget.name, period),)))
            if now + max(hold, horizon or hold) > period.end:
                following = budget.period(period.end)
                periods.append((keyed(budget.name, following), following, cap_usd, horizon, ()))
            continue
        plain = f"{budget.name}/{kind}"
        following = Period(period.end, period.end + (period.end - period.start))
        periods.append((plain, period, cap_usd, None, (keyed(plain, period),)))
        periods.append((keyed(plain, following), following, cap_usd, None, ()))
    return periods


def span_paid_for(period: Period, now: datetime, horizon: timedelta | None) -> tuple[datetime, datetime]:
    """The span of ``period`` the units held at ``now`` are counted over (``Period.remaining``): to its end, or to
    the end of the commit ``horizon`` if that comes first."""
    start = max(now, period.start)
    end = period.end if horizon is None else min(period.end, now + horizon)
    return start, max(start, end)


def releasing_key(plain: str) -> str:
    """The key under which an agent marks the units of a cap's current period it is releasing: apart from the cap's
    keys, so that no grant counts them twice (the units still bill, and its standing reservation still holds them)."""
    return f"{plain}/releasing"


def keyed(plain: str, period: Period) -> str:
    """The key of a period reserved before it is the current one: the cap's key with the period's start."""
    return f"{plain}@{period.start.isoformat()}"


@dataclass(frozen=True)
class Releasing:
    """The units each pool bills that it is releasing (``releasing_units``), in two parts: ``started``, what the
    tick's releases carried out take off the bill, and ``draining``, its nodes being drained since earlier ticks
    (``PoolState.draining_units``)."""

    started: Mapping[str, int]
    draining: Mapping[str, int] = field(default_factory=dict)


class ReleaseMarks:
    """Which of the units an agent is releasing it marks as going (``BudgetReserver.commit``): a drain's units at the
    tick it starts and the next one, not for as long as it lasts. A drain blocked by a PodDisruptionBudget stays
    started until its timeout (15 minutes by default), and a mark renewed at each of its ticks kept every other agent
    sharing the budget from shedding for those units all that time, though they still bill: its nodes being drained
    are marked only up to the units the agent's previous tick started releasing, so the mark of a drain still running
    lapses two ticks after its last renewal (``Cap.releasing``) and the others count its units as staying again.

    The previous tick is the one immediately before, no more than 1.5 ``tick`` earlier: the units a commit started are
    kept with its time, so a tick that failed before committing does not carry a drain's mark to its third tick. The
    memory is the replica's, and ``reset`` when it stands by: a restarted, newly elected or re-elected one marks none
    of the drains under way (a replica leading again would have marked those another leader started)."""

    def __init__(self, tick: timedelta = timedelta(minutes=1)) -> None:
        self.tick = tick
        self._started: dict[str, int] = {}  # the units the last commit's releases started, per pool
        self._at: datetime | None = None  # that commit's tick

    def reset(self) -> None:
        """Forget the units started: what this replica marks next is its own drains only (``BudgetWatch.stand_by``)."""
        self._started, self._at = {}, None

    def marked(self, releasing: Releasing | None, now: datetime) -> dict[str, int]:
        """The units of ``releasing`` to mark at the tick at ``now``, per pool: all it started, and of its nodes being
        drained no more than the previous tick started."""
        if releasing is None:
            return {}
        started = {p: n for p, n in releasing.started.items() if n > 0}
        previous = self._started if self._at is not None and timedelta(0) < now - self._at <= 1.5 * self.tick else {}
        self._started, self._at = started, now
        out = {p: started.get(p, 0) + min(n, previous.get(p, 0)) for p, n in releasing.draining.items() if n > 0}
        return {p: n for p, n in {**started, **out}.items() if n > 0}


def releasing_units(plan: CapacityPlan, results: Sequence[ActionResult], states: Mapping[str, PoolState]) -> Releasing:
    """The units each pool bills that it is releasing once the executor acted (``commit``'s ``releasing``): its nodes
    being drained and what the tick's releases carried out take off its bill (``billed_after``). A release sent as a
    size change takes all of that off once accepted; one carried out as drains (a pool with a node drainer: the
    executor's results are keyed ``<release key>/drain/<node>``) takes off one unit per drain accepted, never more
    than the release takes off the bill."""
    accepted = [r.key for r in results if r.status in (ActionStatus.DONE, ActionStatus.STARTED)]
    started: dict[str, int] = {}
    for resize in plan.resizes:
        state = states.get(resize.pool_id)
        if resize.is_scale_up or state is None:
            continue
        going = max(0, state.billed_units - billed_after(state, resize.to_units))
        if resize.key not in accepted:  # not sent as a size change: its drains accepted, a node each
            going = min(going, sum(1 for key in accepted if key.startswith(resize.key + DRAIN_KEY_MARK)))
        started[resize.pool_id] = started.get(resize.pool_id, 0) + going
    draining = {pool_id: s.draining_units for pool_id, s in states.items() if s.draining_units > 0}
    return Releasing({p: n for p, n in started.items() if n > 0}, draining)

"""The caps a budget holds at a moment, and the units each of its pools is counted at. Pure.

Every budget's caps at ``now`` (``caps_at``): a monthly cap is held over what is left of its month period (or only as
far as its ``commit_horizon``, within the period), an hourly cap over what is left of the hour and over the whole
next hour, so it also caps the rate of spend; and, for the trim, a monthly cap over the next month period too, which
binds only the scale-ups whose minimum hold reaches into it (``Cap.crossing``). A cap knows its room left and, for a
hard stop, how long it waits for a pool of it not read (``Cap.waits``).

A pool is counted at the units it bills now; one not read this tick at the more of the units the agent last read it
at and those the ledger last recorded it holding (``units_now``); an on-prem pool not read at its ``max_units`` (it is
never resized). A cloud pool known by neither (``unknown_pools``) holds units nobody knows: the projection counts
nothing for it, but a cap's room for a scale-up counts it at its ``max_units`` (``Cap.unknown_usd``), so that a
missing value never frees money for new spend: over the scale-up's hold where a hard stop holds the cap (a
``commit_horizon``: the stop can take the units granted back once the pool is read), to the period's end where none
does (busy units granted are never released). The trim records what that kept back (``models.BudgetCut.unknown_usd``).
A monthly or hourly cap of a budget other agents share also knows what they keep reserved in its period (the month,
or the current hour: ``Cap.elsewhere_usd``),
which its projection counts beside the spend recorded (``Cap.committed_usd``), and, carried to the period's end
where a commit horizon bounds it, the snapshot's (``Cap.elsewhere_to_period_end``). A shed takes out of it what
they mark as being released (``Cap.to_shed_from_usd``), and a hard stop counts what their units kept cost over its
next two ticks (``Cap.staying_usd``), so that agents sharing a broken cap shed its excess once between them.
``agent.planning.enforcement`` holds the caps.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from agent.planning.budget import BudgetSpend, CapKind, Period
from models import PoolKind, PoolSpec

EPS_USD = 1e-6


@dataclass
class Cap:
    budget: str
    kind: CapKind
    period: Period
    cap_usd: float
    spent_usd: float
    pools: frozenset[str]
    lookahead: bool = False
    crossing: bool = False  # the next month period: binds only scale-ups whose minimum hold reaches into it
    horizon: timedelta | None = None  # the budget's commit horizon (monthly caps): units counted only that far
    room_usd: float = 0.0
    unread_since: Mapping[str, datetime] = field(default_factory=dict)  # BudgetSpend.unread_since
    stop_wait: timedelta = timedelta(0)  # how long the hard stop waits for an unread pool (Budget.unread_stop_wait)
    unknown: tuple[str, ...] = ()  # its pools not read whose units nobody knows (``unknown_pools``)
    elsewhere_usd: float = 0.0  # other agents' reservations in the period (``BudgetSpend.committed_elsewhere_usd``, or
    # ``committed_elsewhere_hour_usd`` for the current hour)
    elsewhere_to_end_usd: float | None = None  # the same to the period's end, as read (None: scaled from it)
    releasing_usd: float = 0.0  # of ``elsewhere_usd``, what they mark as being released: shed already
    staying_usd: float = 0.0  # what their units kept cost over the hard stop's next two ticks

    @property
    def to_shed_from_usd(self) -> float:
        """What a shed projects the period from: ``committed_usd`` less what the other agents mark as being released
        (``releasing_usd``), which their own sheds took already: each agent sharing a broken cap sheds only the excess
        the others' releases leave."""
        return self.committed_usd - min(self.releasing_usd, self.elsewhere_usd)

    @property
    def committed_usd(self) -> float:
        """What the period's projection starts from: the spend recorded and what other agents sharing the budget
        keep reserved in it (the trim leaves the latter out: the ledger's reservations hold it)."""
        return self.spent_usd + self.elsewhere_usd

    def elsewhere_to_period_end(self, now: datetime) -> float:
        """What the other agents sharing the budget keep reserved (``elsewhere_usd``), carried to the period's end:
        as the ledger carried each reservation over its own span (``elsewhere_to_end_usd``), or, not read so, scaled
        by the hours to the period's end over the hours this cap's horizon counts (the units held go on billing
        after it)."""
        if self.elsewhere_to_end_usd is not None:
            return self.elsewhere_to_end_usd
        counted = hours_in(self.period.remaining(now, self.horizon))
        if self.horizon is None or counted <= 0.0:
            return self.elsewhere_usd
        return self.elsewhere_usd * hours_in(self.period.remaining(now)) / counted

    def unread_from(self, unread: Collection[str], now: datetime) -> datetime | None:
        """Since when the hard stop has waited for the pools of this cap in ``unread`` (none: ``None``): the oldest
        of their last records, ``now`` for a pool the ledger has no record of."""
        missing = self.pools & frozenset(unread)
        return min((self.unread_since.get(p, now) for p in missing), default=None)

    def waits(self, unread: Collection[str], now: datetime) -> bool:
        """Whether this cap's hard stop still waits for a pool of it not read this tick."""
        since = self.unread_from(unread, now)
        return since is not None and now < since + self.stop_wait

    def until(self, now: datetime) -> datetime | None:
        """Where this cap's projection ends when its commit horizon ends it before the period does."""
        if self.horizon is None or now + self.horizon >= self.period.end:
            return None
        return now + self.horizon

    def unknown_span(self, hold: timedelta) -> timedelta | None:
        """How far ahead its pools nobody knows the units of are counted against a scale-up held for ``hold``: over
        the hold (within the commit horizon) where a hard stop holds the cap (a ``commit_horizon``), as the stop can
        release the units granted once the pool turns out to hold more; without one, to the period's end (``None``),
        as busy units granted are never released and bill to its end whatever the pool turns out to hold."""
        return None if self.horizon is None else min(hold, self.horizon)

    def unknown_usd(self, now: datetime, pools: Mapping[str, PoolSpec], hold: timedelta) -> float:
        """What its pools nobody knows the units of (``unknown``) cost at their ``max_units`` from ``now`` over
        ``unknown_span``, within this cap's period: kept out of its room for the scale-up only."""
        hours = hours_in(self.period.remaining(now, self.unknown_span(hold)))
        return sum(pools[p].max_units * pools[p].price_per_unit_hour_usd for p in self.unknown) * hours

    def hours_left(self, now: datetime) -> float:
        """Hours of this cap's period that the units held now are counted for."""
        return hours_in(self.period.remaining(now, self.horizon))

    @property
    def label(self) -> str:
        label = f"budget {self.budget!r} ({self.kind} cap {self.cap_usd:,.2f} USD)"
        if self.crossing:
            label += (
                f" for the period opening {self.period.start:%Y-%m-%d %H:%M} UTC, which units bought now reach "
                f"(lead time + idle window + one tick)"
            )
        return label


def units_now(
    spends: Sequence[BudgetSpend],
    pools: Mapping[str, PoolSpec],
    billed: Mapping[str, int],
    last_read: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """The units each pool is counted at: those billed now; for a pool not read, the more of the units the agent last
    read it at (``last_read``, with its own resizes carried out since) and those the ledger last recorded it holding,
    as either may be the newer and a cap must count what the pool may bill; an on-prem pool not read, its
    ``max_units``; a pool known by none of these (``unknown_pools``), nothing: see ``Cap.unknown_usd``."""
    known = known_units(spends, last_read)
    units: dict[str, int] = {}
    for pool_id, spec in pools.items():
        if pool_id in billed:
            units[pool_id] = billed[pool_id]
        elif pool_id in known:
            units[pool_id] = known[pool_id]
        else:
            units[pool_id] = spec.max_units if spec.kind is PoolKind.ON_PREM else 0
    return units


def known_units(spends: Sequence[BudgetSpend], last_read: Mapping[str, int] | None = None) -> dict[str, int]:
    """The units each pool not read is known to hold: the more of those the agent last read it at (``last_read``,
    its target with its own resizes carried out since) and those the ledger last recorded it billing (nodes still
    draining included), as either may be the newer and a cap must count what the pool may bill. A pool known by
    neither is left out. The planner's projection (``units_now``) and the shared budget's reservation of an unread
    pool (``agent.budget_watch``) both count these."""
    known: dict[str, int] = {}
    for spend in spends:
        known.update(spend.last_units)
    for pool_id, units in (last_read or {}).items():
        known[pool_id] = max(units, known.get(pool_id, units))
    return known


def unknown_pools(
    spends: Sequence[BudgetSpend],
    pools: Mapping[str, PoolSpec],
    billed: Mapping[str, int],
    last_read: Mapping[str, int] | None = None,
) -> frozenset[str]:
    """The cloud pools not read whose units nobody knows: never read by the agent (``last_read``) and with no record in
    the ledger (unread since the agent started, as a new install whose cloud role is still propagating)."""
    recorded = {p for spend in spends for p in spend.last_units}
    seen = last_read or {}
    return frozenset(
        p
        for p, spec in pools.items()
        if p not in billed and p not in seen and p not in recorded and spec.kind is not PoolKind.ON_PREM
    )


def caps_at(now: datetime, spends: Sequence[BudgetSpend], crossing: bool = False) -> list[Cap]:
    """Every cap at ``now``. An hourly cap is also held over the whole next hour (a rate): otherwise a scale-up
    late in an hour, cheap against the minutes left, would break the next hour the moment it starts. With
    ``crossing``, a monthly cap is also held over the next month period, for the scale-ups that reach it."""
    caps = []
    for spend in sorted(spends, key=lambda s: s.budget.name):
        name, pools = spend.budget.name, spend.budget.pools
        for kind, period, cap_usd in spend.budget.caps(now):
            horizon = spend.budget.commit_horizon if kind is CapKind.MONTH else None
            caps.append(
                Cap(
                    name,
                    kind,
                    period,
                    cap_usd,
                    spend.spent(kind),
                    pools,
                    horizon=horizon,
                    unread_since=spend.unread_since,
                    stop_wait=spend.budget.unread_stop_wait,
                    elsewhere_usd=(
                        spend.committed_elsewhere_usd if kind is CapKind.MONTH else spend.committed_elsewhere_hour_usd
                    ),
                    elsewhere_to_end_usd=spend.committed_elsewhere_to_period_end_usd if kind is CapKind.MONTH else None,
                    releasing_usd=(
                        spend.releasing_elsewhere_usd if kind is CapKind.MONTH else spend.releasing_elsewhere_hour_usd
                    ),
                    staying_usd=spend.staying_elsewhere_usd if kind is CapKind.MONTH else 0.0,
                )
            )
            if kind is CapKind.HOUR:
                following = Period(period.end, period.end + (period.end - period.start))
                caps.append(Cap(name, kind, following, cap_usd, 0.0, pools, lookahead=True))
            elif crossing:
                following = spend.budget.period(period.end)
                caps.append(
                    Cap(name, kind, following, cap_usd, 0.0, pools, lookahead=True, crossing=True, horizon=horizon)
                )
    return caps


def hours_in(span: timedelta) -> float:
    return span.total_seconds() / 3600.0

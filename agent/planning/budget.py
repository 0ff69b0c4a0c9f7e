"""Budgets: their periods (a month from a configured day in a time zone, and the clock hour), spend projected to
the end of a period, and what the agent's scale-ups cost against them. Pure: ``now`` is always a parameter.

A projection assumes the units a plan holds keep running to the end of the period (a run-rate projection), on
top of what the ledger says was already spent. Enforcement of caps on a plan lives in
``agent.planning.enforcement``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from enum import StrEnum
from zoneinfo import ZoneInfo

from config.schema import BudgetSettings, Pacing
from models import PoolSpec, PoolState, Resize

_HOUR = timedelta(hours=1)


class CapKind(StrEnum):
    MONTH = "monthly"
    HOUR = "hourly"


@dataclass(frozen=True)
class Period:
    """A half-open interval of time ``[start, end)``, both tz-aware UTC."""

    start: datetime
    end: datetime

    def remaining(self, now: datetime, horizon: timedelta | None = None) -> timedelta:
        """Time left in the period after ``now`` (all of it before it starts, none after it ends); with a
        ``horizon``, only the part of it before ``now + horizon``."""
        end = self.end if horizon is None else min(self.end, now + horizon)
        return max(timedelta(0), end - max(now, self.start))


@dataclass(frozen=True)
class Budget:
    """A cap in USD per month (from ``period_start_day`` at midnight in ``tz``) and/or per clock hour, over a
    named set of pools (this agent's, and those other agents sharing the budget record in the same ledger)."""

    name: str
    pools: frozenset[str]
    monthly_cap_usd: float | None = None
    hourly_cap_usd: float | None = None
    period_start_day: int = 1
    tz: tzinfo = UTC
    alert_thresholds: tuple[float, ...] = (0.5, 0.8, 1.0)
    pacing: Pacing = "none"
    commit_horizon: timedelta | None = None  # None: units are counted to the period end (see enforcement)
    remote_pools: frozenset[str] = frozenset()  # those of ``pools`` that other agents run (a shared budget)
    remote_previous_ids: tuple[tuple[str, tuple[str, ...]], ...] = ()  # a remote pool's ids before a rename
    unread_stop_wait: timedelta = timedelta(minutes=10)  # how long a hard stop waits for an unread pool

    def __post_init__(self) -> None:
        if not 1 <= self.period_start_day <= 28:
            raise ValueError(f"budget {self.name!r}: period_start_day must be within 1..28")

    @classmethod
    def from_settings(cls, settings: BudgetSettings) -> Budget:
        return cls(
            name=settings.name,
            pools=frozenset(settings.pools) | frozenset(settings.remote_pools),
            monthly_cap_usd=settings.monthly_cap_usd,
            hourly_cap_usd=settings.hourly_cap_usd,
            period_start_day=settings.period_start_day,
            tz=ZoneInfo(settings.timezone),
            alert_thresholds=tuple(sorted(settings.alert_thresholds)),
            pacing=settings.pacing,
            commit_horizon=settings.commit_horizon,
            remote_pools=frozenset(settings.remote_pools),
            remote_previous_ids=tuple(sorted(settings.remote_previous_ids.items())),
            unread_stop_wait=settings.unread_stop_wait,
        )

    def period(self, now: datetime) -> Period:
        """The month period holding ``now``: from the start day at local midnight to the same day next month."""
        local = _aware(now).astimezone(self.tz)
        year, month = local.year, local.month
        if local.day < self.period_start_day:
            year, month = _shift_month(year, month, -1)
        start = datetime(year, month, self.period_start_day, tzinfo=self.tz)
        end = datetime(*_shift_month(year, month, 1), self.period_start_day, tzinfo=self.tz)
        return Period(start.astimezone(UTC), end.astimezone(UTC))

    def hour(self, now: datetime) -> Period:
        """The local clock hour holding ``now`` (matters for zones offset by a half or quarter hour): an hour long,
        from the last full hour of the local clock, read at the zone's UTC offset at ``now``. So it always holds
        ``now``, also where a daylight-saving shift is half an hour (Australia/Lord_Howe): the hour after such a
        shift overlaps the hour before it by the half hour, whose spend then counts against both."""
        at = _aware(now).astimezone(UTC)
        offset = at.astimezone(self.tz).utcoffset() or timedelta(0)
        wall = at.replace(tzinfo=None) + offset
        start = (wall.replace(minute=0, second=0, microsecond=0) - offset).replace(tzinfo=UTC)
        return Period(start, start + _HOUR)

    def caps(self, now: datetime) -> list[tuple[CapKind, Period, float]]:
        """Each cap this budget sets, with the period it applies to at ``now``."""
        caps = []
        if self.monthly_cap_usd is not None:
            caps.append((CapKind.MONTH, self.period(now), self.monthly_cap_usd))
        if self.hourly_cap_usd is not None:
            caps.append((CapKind.HOUR, self.hour(now), self.hourly_cap_usd))
        return caps


@dataclass(frozen=True)
class BudgetSpend:
    """What a budget's pools spent so far (from the ledger) in the current month period and clock hour, and
    ``last_units``: for those of its pools whose state could not be read this tick, the units the ledger last
    recorded them holding (its newest entry, an opening mark included); a pool the ledger has no record of is not
    there, and is counted at its ``max_units``. ``unread_since``: where each of those entries ends, from when the
    spend counts the pool at those units without the ledger having recorded it (the ledger charges that stretch
    when the pool is read again).

    ``committed_elsewhere_usd``: for a budget other agents share (``remote_pools``), what they keep reserved in the
    current month period (``agent.budget_reserve.BudgetReserver.held_elsewhere``): the units they hold, to the
    period's end (or over the commit horizon), and their scale-ups under way. Not spend: it is counted only in the
    projection the overspend check and its shed make of the period (``agent.planning.budget_caps.Cap.elsewhere_usd``),
    never in ``spent_period_usd`` (thresholds, reports, metrics), nor in the trim, which the ledger's reservations
    hold already. ``committed_elsewhere_to_period_end_usd``: the same carried to the period's end whatever the commit
    horizon (the budget's snapshot; ``None``: not read, and scaled from ``committed_elsewhere_usd``).
    ``committed_elsewhere_hour_usd``: the same for its hourly cap, what they keep reserved in the current hour
    (``BudgetReserver.held_elsewhere_this_hour``): their units to the hour's end.
    ``releasing_elsewhere_usd`` / ``releasing_elsewhere_hour_usd``: of those, what they mark as being released
    (``BudgetReserver.releasing_elsewhere``), which a shed counts as shed already, so that agents sharing a broken cap
    do not each shed for all of it. ``staying_elsewhere_usd``: what the units they keep cost from their last tick over
    the next two ticks, which a hard stop projects beside the spend recorded (``BudgetReserver.staying_elsewhere``)."""

    budget: Budget
    now: datetime
    spent_period_usd: float
    spent_hour_usd: float
    last_units: Mapping[str, int] = field(default_factory=dict, hash=False)
    unread_since: Mapping[str, datetime] = field(default_factory=dict, hash=False)
    committed_elsewhere_usd: float = 0.0
    committed_elsewhere_to_period_end_usd: float | None = None
    committed_elsewhere_hour_usd: float = 0.0
    releasing_elsewhere_usd: float = 0.0
    releasing_elsewhere_hour_usd: float = 0.0
    staying_elsewhere_usd: float = 0.0

    def spent(self, kind: CapKind) -> float:
        return self.spent_period_usd if kind is CapKind.MONTH else self.spent_hour_usd


def project(
    spent_usd: float,
    period: Period,
    now: datetime,
    pools: Iterable[str],
    units: Mapping[str, int],
    prices: Mapping[str, float],
    held: Mapping[str, int] | None = None,
    settle: timedelta = timedelta(0),
    horizon: timedelta | None = None,
) -> float:
    """Spend at the end of ``period`` if each pool holds ``units`` from ``now`` on (with a ``horizon``, spend by
    ``now + horizon`` if that comes first).

    A pool asked to shrink keeps billing its ``held`` units for ``settle`` (one tick: the ledger charges the
    last observed capacity until the next observation), then bills its new units.
    """
    remaining = period.remaining(now, horizon)
    first = min(settle, remaining)
    first_h, rest_h = _hours(first), _hours(remaining - first)
    total = spent_usd
    for pool in pools:
        target = units.get(pool, 0)
        before = max(target, (held or {}).get(pool, target))
        total += prices.get(pool, 0.0) * (before * first_h + target * rest_h)
    return total


@dataclass(frozen=True)
class ScaleUpCharge:
    """What one of the agent's scale-ups adds to a period's spend: its extra units from ``at`` to period end."""

    at: datetime
    pool_id: str
    from_units: int
    to_units: int
    cost_usd: float

    def describe(self) -> str:
        return (
            f"{self.at:%Y-%m-%d %H:%M} UTC {self.pool_id} {self.from_units}->{self.to_units} units "
            f"(+{self.cost_usd:,.2f} USD to period end)"
        )


def scale_up_charges(
    scale_ups: Sequence[tuple[datetime, Resize]],
    pools: Mapping[str, PoolSpec],
    budget: Budget,
    period: Period,
) -> list[ScaleUpCharge]:
    """The scale-ups inside ``period`` on the budget's pools, most expensive first: what drove a projection."""
    charges = []
    for at, resize in scale_ups:
        spec = pools.get(resize.pool_id)
        if spec is None or resize.pool_id not in budget.pools or not resize.is_scale_up:
            continue
        if not period.start <= at < period.end:
            continue
        extra = resize.to_units - resize.from_units
        cost = extra * spec.price_per_unit_hour_usd * _hours(period.end - at)
        charges.append(ScaleUpCharge(at, resize.pool_id, resize.from_units, resize.to_units, cost))
    return sorted(charges, key=lambda c: (-c.cost_usd, c.at, c.pool_id))


def billed_after(state: PoolState, to_units: int) -> int:
    """The units ``state``'s pool is counted as billing once its target is ``to_units`` (every money figure counts
    billed units, ``PoolState.billed_units``; a target counts only the units asked for). A scale-up's added units
    count from the moment they are asked for, in every pool: a Cloud TPU queued resource still waiting for resources
    bills nothing yet, but may be granted at any moment, and the cap must hold then (once it is read waiting, it
    counts only when granted). A scale-up first takes back the idle nodes being drained (``takeable_units``): they
    are billed already, and only the units beyond them are new. A release takes the units not billed first (a size
    change removes units in flight newest first, and the waiting ones are the newest), never a broken unit, nor a node
    already being drained (billed until its drain deletes it)."""
    if to_units >= state.target_units:
        return state.billed_units + max(0, to_units - state.target_units - state.takeable_units)
    waiting_left = max(0, state.waiting_units - (state.target_units - to_units))
    return max(0, to_units - waiting_left) + _kept(state)


def target_for(state: PoolState, billed: int) -> int:
    """The target at which ``state``'s pool bills ``billed`` units (the inverse of ``billed_after``): at the units
    billed now or above, its target takes back its idle nodes being drained (``takeable_units``, billed already) and
    grows by as many more; below, the lowest target that bills no more (its waiting units gone first, its broken ones
    and those being drained kept)."""
    if billed >= state.billed_units:
        return state.target_units + state.takeable_units + billed - state.billed_units
    return max(0, billed - _kept(state))


def taken_back(state: PoolState, to_units: int) -> int:
    """Of ``state``'s nodes being drained, those a target of ``to_units`` takes back (``takeable_units``: a scale-up
    takes its idle nodes being drained before it buys)."""
    return min(state.takeable_units, max(0, to_units - state.target_units))


def draining_going(state: PoolState, to_units: int) -> int:
    """Of ``state``'s nodes being drained, those still going at a target of ``to_units``: billed until their drains
    delete them, which a shed counts as one more tick (``agent.planning.budget_shed``), not to the period's end."""
    return state.draining_units - taken_back(state, to_units)


def released_to(state: PoolState, after: int, release: int) -> int:
    """The target at which ``state``'s pool, planned at ``after``, releases ``release`` units as a shed counts them
    (``draining_going``): a take-back of its nodes being drained is given up first (left to their drains, they go
    after one more tick), then the units billed go (``target_for``, its nodes being drained kept)."""
    back = min(release, taken_back(state, after))
    rest = release - back
    return after - back if not rest else target_for(state, billed_after(state, after - back) - rest)


def _kept(state: PoolState) -> int:
    """The units ``state``'s pool bills that no release takes: its broken units and its nodes being drained (billed to
    the period's end in the grant and the trim; a shed counts those being drained one more tick: ``draining_going``)."""
    return len(state.broken_units) + state.draining_units


def _hours(span: timedelta) -> float:
    return span.total_seconds() / 3600.0


def _aware(now: datetime) -> datetime:
    if now.tzinfo is None:
        raise ValueError(f"budget periods need a tz-aware time, got {now.isoformat()}")
    return now


def _shift_month(year: int, month: int, by: int) -> tuple[int, int]:
    index = year * 12 + (month - 1) + by
    return index // 12, index % 12 + 1

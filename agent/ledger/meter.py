"""The spend meter: feeds pool readings through accrual into a ledger, and reads budget spend back out.

This is the only place the loop touches the ledger: ``observe`` after each observation of the pools (and again
after the agent's own resizes, so a scale-up is charged from the moment it was asked for), ``budget_spend``
before planning, and ``coverage`` with it.

``budget_spend`` also says what a pool whose state could not be read this tick last held: the units of its
newest ledger entry (the opening mark of its last reading, or the agent's scale-up after it), one index probe per
such pool. The budgets project it at those units rather than at its ``max_units`` (a single failed read of a big
pool would otherwise project an overspend that is not there). Its spend since that entry is counted too, without
being recorded: what accrual will charge for it when the pool is read again holding the same units (the units of
that entry from its end to now). Otherwise the unread stretch would be missing from the spend, and the room it
leaves would go to the other pools' scale-ups until the pool is read again and the whole stretch is charged at
once (an h100 pool of 10 units unread for 3 hours: 2,400 USD).

``coverage`` says, per budget with a monthly cap, whether the ledger holds the whole of the current period: a
ledger that began after the period started (a new pod's file on an ``emptyDir``, a first install mid-month) reads
the spend before its first record as nothing, so the cap counts only the spend since then. It is judged per pool:
each of the budget's own pools (not those other agents run) must have a record at or before the period's start,
since a bill imported for some pools only (a standard export bills GPU node pools, not TPU slices) fills the
period for those alone. The planner is not
told otherwise (a guess at the missing spend would be wrong one way or the other; billed costs imported for the
period fill it exactly): the loop alerts, and the daemon exports it. Once a period is found covered it stays
covered (records are never removed), so a tick asks the ledger only about budgets not yet known to be covered.

The ledger keeps spend by pool id, so a pool renamed in the configuration would start its budgets' period at zero:
a pool's ``previous_ids`` (the ids it was known by) count as its own, in its budgets' spend and in their coverage
(``counted_pools``). Spend recorded this period under an id no configured pool has or had (``unclaimed_spend``:
a pool renamed without them, a pool removed, another deployment's pool on a shared ledger) counts in no budget: it
is logged once, at the first read of the budgets' spend, naming each such pool and what it spent, and, where a budget
shares pools other agents run (``remote_pools``), the ``remote_previous_ids`` that would count a renamed one's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from agent.ledger.accrual import GRID, Accrual, PoolReading, accrue, resolve
from agent.ledger.base import Ledger, Newest, RecordedSince
from agent.ledger.clock_steps import Baseline, ClockSteps, Placed, accrued, baseline, place
from agent.ledger.period_spend import PeriodSpend, SpendAsk
from agent.planning.budget import Budget, BudgetSpend
from models import LedgerEntry, LedgerUnavailable

log = logging.getLogger(__name__)

# The most readings kept while the ledger cannot be written (a day of one-minute ticks of seven pools); the oldest
# go first, their time charged all the same by the next reading, at the units held before them.
KEPT_READINGS = 10_000


@dataclass(frozen=True)
class LedgerCoverage:
    """Since when the ledger holds a budget's spend, against the start of the budget's current month period:
    ``first`` is the first record of each of the budget's own pools (``None``: it has none yet)."""

    budget: str
    period_start: datetime
    period_end: datetime
    first: tuple[tuple[str, datetime | None], ...]
    where: str

    @property
    def since(self) -> datetime | None:
        """Since when the ledger holds every pool of the budget: the latest of their first records (``None`` while
        one has none)."""
        firsts = [at for _, at in self.first]
        return None if not firsts or None in firsts else max(at for at in firsts if at is not None)

    @property
    def late(self) -> tuple[tuple[str, datetime | None], ...]:
        """The pools whose first record is later than the period's start, or that have none."""
        return tuple((pool, at) for pool, at in self.first if at is None or at > self.period_start)

    @property
    def complete(self) -> bool:
        """Whether the ledger holds the whole period so far: every pool has a record at or before its start."""
        return not self.late

    def late_pools(self, when: Callable[[datetime], str] = datetime.isoformat) -> str:
        """The late pools for a message: ``v5e-slices (first record <when>), h100 (no record yet)``."""
        return ", ".join(
            f"{pool} ({'no record yet' if at is None else f'first record {when(at)}'})" for pool, at in self.late
        )


NEW_OR_LOST = (
    "a pool created after the period started had no spend before its first record, but the ledger cannot tell it "
    "from one whose records were lost, or one renamed whose old id is not among its previous_ids"
)
Previous = Mapping[str, Collection[str]]  # pool id -> the ids it was known by (its previous_ids)


def ledger_coverage(
    budget: Budget, now: datetime, first: Mapping[str, datetime], where: str, previous: Previous | None = None
) -> LedgerCoverage:
    """The coverage of ``budget``'s current month period, from the first records of its pools (``first``, as
    ``RecordedSince.recorded_since`` reads them), a pool's first being the earliest under its id or its
    ``previous`` ones."""
    period = budget.period(now)
    pools = []
    for pool in own_pools(budget):
        found = [first[i] for i in (pool, *(previous or {}).get(pool, ())) if i in first]
        pools.append((pool, min(found) if found else None))
    return LedgerCoverage(budget.name, period.start, period.end, tuple(pools), where)


def pool_previous_ids(own: Previous, budgets: Iterable[Budget]) -> dict[str, tuple[str, ...]]:
    """Every pool with the ids it was known by: this agent's pools' ``previous_ids`` (``own``) and the remote pools'
    of the budgets shared with other agents (``remote_previous_ids``). Two budgets that share a remote pool may each
    list some of its old ids (each old id belongs to one pool): all of them count as the pool's, in both budgets."""
    merged: dict[str, tuple[str, ...]] = {pool: tuple(dict.fromkeys(ids)) for pool, ids in own.items()}
    for budget in budgets:
        for pool, ids in budget.remote_previous_ids:
            merged[pool] = tuple(dict.fromkeys((*merged.get(pool, ()), *ids)))
    return merged


def own_pools(budget: Budget) -> list[str]:
    """The budget's pools this agent records (the others' agents judge theirs)."""
    return sorted(budget.pools - budget.remote_pools)


def counted_pools(pools: Iterable[str], previous: Previous | None) -> list[str]:
    """The ledger ids whose spend counts as these pools': theirs and their previous ids."""
    pools = set(pools)
    return sorted(pools.union(*((previous or {}).get(p, ()) for p in pools)))


@runtime_checkable
class _ListsEntries(Protocol):
    def entries(self) -> Sequence[LedgerEntry]: ...

    def spent(self, pools: Sequence[str], start: datetime, end: datetime) -> float: ...


def unclaimed_spend(
    ledger: object, budgets: Sequence[Budget], previous: Previous, now: datetime
) -> tuple[datetime, dict[str, float]] | None:
    """What the ledger's pools that no configured pool has or had (``previous``: every configured pool, with its
    previous ids; the budgets' pools, other agents' included) spent since the earliest start of the budgets'
    current periods, for those with a record since then; ``None`` without budgets, or from a ledger that cannot
    list its entries. Reads every entry of the ledger: asked once, at start."""
    if not budgets or not isinstance(ledger, _ListsEntries):
        return None
    since = min(b.period(now).start for b in budgets)
    known = set(counted_pools(previous, previous)).union(*(b.pools for b in budgets))
    found = sorted({e.pool_id for e in ledger.entries() if e.end > since or e.start >= since} - known)
    return since, {pool: ledger.spent([pool], since, now) for pool in found}


def unclaimed_message(
    since: datetime,
    spent: Mapping[str, float],
    where: str,
    when: Callable[[datetime], str],
    budgets: Sequence[Budget] = (),
) -> str:
    """The warning for ``unclaimed_spend``'s pools; ``where``: ``at <the ledger's place>``. An id may be the old id of
    a pool another agent runs in one of ``budgets`` (its ``remote_pools``), renamed there: its spend counts in those
    budgets once a budget's ``remote_previous_ids`` lists it, so the warning names that setting; nothing is to be done
    only about spend that counts in none of this agent's budgets."""
    named = ", ".join(f"{pool} ({usd:,.2f} USD)" for pool, usd in spent.items())
    message = (
        f"the ledger {where} holds spend since {when(since)} under pool ids no configured pool has: {named}; it "
        "counts in no budget. A pool of this agent renamed? List its old id in the pool's previous_ids, and its spend "
        "counts as the pool's own. "
    )
    remote = sorted(set().union(*(b.remote_pools for b in budgets)))
    if remote:
        shared = ", ".join(b.name for b in budgets if b.remote_pools)
        olds = ", ".join(spent)
        listed = (
            f"{{{remote[0]}: [{olds}]}}"
            if len(remote) == 1
            else f"{{<pool>: [{olds}]}}, <pool> the one of {', '.join(remote)} it was renamed to"
        )
        message += (
            f"A pool another agent runs, shared by budget {shared} (remote_pools: {', '.join(remote)}), renamed "
            f"there? List its old id in the budget's budgets[].remote_previous_ids: {listed}, and its spend counts "
            "in the budget. "
        )
    return message + "A pool removed, or another deployment's in none of this agent's budgets: nothing to do"


class SpendMeter:
    def __init__(
        self, ledger: Ledger, gap_after: timedelta, grid: timedelta = GRID, previous_ids: Previous | None = None
    ) -> None:
        """``previous_ids``: every configured pool with the ids it was known by (see ``counted_pools``); without
        it the meter knows no pool beyond the budgets' and looks for no unclaimed spend."""
        self.ledger = ledger
        self.gap_after = gap_after
        self.grid = grid
        self.previous_ids = previous_ids or {}
        self._unclaimed_checked = previous_ids is None
        self._covered: dict[str, LedgerCoverage] = {}  # budget -> its current period, found complete
        self._warned: dict[str, datetime] = {}  # budget -> the period start it was last logged incomplete for
        self._kept: list[PoolReading] = []  # readings a failed write left to record
        self._baselines: dict[str, Baseline] = {}  # pool -> what its next reading's monotonic time is measured from
        self._steps = ClockSteps()

    def observe(self, readings: Iterable[PoolReading]) -> list[Accrual]:
        """Record what the readings add to the ledger, all in one write transaction that also reads the pools'
        newest entries, so another writer on the same ledger cannot slip in between the read and the write. A
        reading behind a pool's newest entry (the wall clock stepped back) is charged by the monotonic clock
        (``agent.ledger.clock_steps``). Readings a write could not record (``LedgerUnavailable``) are kept and
        recorded before the next call's, so that no spend is lost; the error is raised all the same."""
        readings = [*self._kept, *readings]
        accruals: list[Accrual] = []
        placed: list[Placed] = []
        baselines: dict[str, Baseline | None] = {}

        def derive(recorded: Newest) -> list[LedgerEntry]:
            newest = dict(recorded)
            accruals.clear()
            placed.clear()
            baselines.clear()
            baselines.update(self._baselines)
            entries: list[LedgerEntry] = []
            for reading in readings:
                pool = reading.pool_id
                where = place(newest[pool], reading, baselines.get(pool))
                accrual = accrued(newest[pool], where, self.gap_after, self.grid)
                baselines[pool] = baseline(newest[pool], where)
                for entry in accrual.entries:
                    newest[pool] = _newer(newest[pool], entry)
                entries.extend(accrual.entries)
                accruals.append(accrual)
                placed.append(where)
            return entries

        try:
            self.ledger.update(sorted({r.pool_id for r in readings}), derive)
        except LedgerUnavailable as exc:
            self._kept = readings[-KEPT_READINGS:]
            log.warning(
                "ledger not written (%s): %d readings of pools %s kept in memory, recorded before the next ones "
                "(lost only if the process ends before a write succeeds)",
                exc,
                len(self._kept),
                ", ".join(sorted({r.pool_id for r in self._kept})),
                extra={"kept_readings": len(self._kept), "dropped_readings": len(readings) - len(self._kept)},
            )
            raise
        self._kept = []
        self._baselines = {pool: b for pool, b in baselines.items() if b is not None}
        self._steps.tell(placed)
        for reading, accrual in zip(readings, accruals, strict=True):
            if accrual.gap is not None:
                log.warning(
                    "pool %s was not observed for %s; charged %d units through the gap (%.2f USD)",
                    reading.pool_id,
                    accrual.gap,
                    accrual.entries[0].units,
                    accrual.cost_usd,
                    extra={"pool": reading.pool_id, "gap_s": accrual.gap.total_seconds()},
                )
        return accruals

    def budget_spend(
        self,
        budgets: Sequence[Budget],
        now: datetime,
        unread: Collection[str] = (),
        prices: Mapping[str, float] | None = None,
    ) -> list[BudgetSpend]:
        """What each budget's pools have spent in the current month period and the current hour, up to ``now``:
        all in one read from the ledger's period totals when it keeps them (``agent.ledger.period_spend``). Each
        budget with a pool in ``unread`` (its state could not be read) gets the units the ledger last recorded it
        holding (``BudgetSpend.last_units``) and since when (``BudgetSpend.unread_since``), and its spend includes
        what that pool held since then (at ``prices``, USD per unit-hour), which is not recorded yet."""
        spends = self._spent(budgets, now)
        asked = sorted({p for b in budgets for p in b.pools} & set(unread))
        if not asked:
            return spends
        last = {p: entry for p in asked if (entry := self.ledger.last_entry(p)) is not None}
        unrecorded = {p: self._unrecorded(entry, now, (prices or {}).get(p, 0.0)) for p, entry in last.items()}
        out = []
        for spend in spends:
            mine = sorted(spend.budget.pools & last.keys())
            if not mine:
                out.append(spend)
                continue
            period, hour = spend.budget.period(now).start, spend.budget.hour(now).start
            out.append(
                replace(
                    spend,
                    spent_period_usd=spend.spent_period_usd + sum(_since(unrecorded[p], period) for p in mine),
                    spent_hour_usd=spend.spent_hour_usd + sum(_since(unrecorded[p], hour) for p in mine),
                    last_units={p: last[p].units for p in mine},
                    unread_since={p: last[p].end for p in mine},
                )
            )
        return out

    def _unrecorded(self, last: LedgerEntry, now: datetime, price: float) -> tuple[LedgerEntry, ...]:
        """What accrual will charge from the pool's newest entry to ``now`` if the pool is read again at ``now``
        holding the units of that entry (a gap is charged the larger side: those units at least)."""
        if now <= last.end:
            return ()
        return accrue(last, PoolReading(last.pool_id, now, last.units, price), self.gap_after, self.grid).entries

    def _spent(self, budgets: Sequence[Budget], now: datetime) -> list[BudgetSpend]:
        if isinstance(self.ledger, PeriodSpend):
            asks = [
                SpendAsk(tuple(self._counted(budget)), span.start, span.end, now)
                for budget in budgets
                for span in (budget.period(now), budget.hour(now))
            ]
            spent = self.ledger.spent_in_periods(asks, now)
            return [
                BudgetSpend(budget=budget, now=now, spent_period_usd=spent[2 * i], spent_hour_usd=spent[2 * i + 1])
                for i, budget in enumerate(budgets)
            ]
        spends = []
        for budget in budgets:
            period, hour = budget.period(now), budget.hour(now)
            spends.append(
                BudgetSpend(
                    budget=budget,
                    now=now,
                    spent_period_usd=self.ledger.spent(self._counted(budget), period.start, now),
                    spent_hour_usd=self.ledger.spent(self._counted(budget), hour.start, now),
                )
            )
        return spends

    def _counted(self, budget: Budget) -> list[str]:
        return counted_pools(budget.pools, self.previous_ids)

    def coverage(self, budgets: Sequence[Budget], now: datetime) -> list[LedgerCoverage]:
        """Whether the ledger holds each monthly-capped budget's current period from its start (none when the
        ledger cannot say: ``agent.ledger.base.RecordedSince``). One read of the pools of the budgets not yet
        found covered in their period; a budget found not covered is logged once per period. The first call also
        logs the spend the budgets leave out (``unclaimed_spend``)."""
        if not self._unclaimed_checked:
            self._warn_unclaimed(budgets, now)
        if not isinstance(self.ledger, RecordedSince):
            return []
        capped = [b for b in budgets if b.monthly_cap_usd is not None]
        periods = {b.name: b.period(now) for b in capped}
        asked = [b for b in capped if self._known(b.name, periods[b.name].start) is None]
        pools = counted_pools({p for b in asked for p in own_pools(b)}, self.previous_ids)
        since = self.ledger.recorded_since(pools) if asked else {}
        out = []
        for budget in capped:
            period = periods[budget.name]
            known = self._known(budget.name, period.start)
            if known is None:
                known = ledger_coverage(budget, now, since, self.ledger.where, self.previous_ids)
                if known.complete:
                    self._covered[budget.name] = known
                elif self._warned.get(budget.name) != period.start:
                    self._warned[budget.name] = period.start
                    log.warning(
                        "budget %s: its period started at %s but the ledger at %s holds these of its pools only "
                        "from later: %s; their spend before is not counted against its cap (%s)",
                        budget.name,
                        period.start.isoformat(),
                        known.where,
                        known.late_pools(),
                        NEW_OR_LOST,
                        extra={
                            "budget": budget.name,
                            "period_start": period.start.isoformat(),
                            "late_pools": [pool for pool, _ in known.late],
                        },
                    )
            out.append(known)
        return out

    def _warn_unclaimed(self, budgets: Sequence[Budget], now: datetime) -> None:
        found = unclaimed_spend(self.ledger, budgets, self.previous_ids, now)
        self._unclaimed_checked = True
        if found is not None and found[1]:
            since, spent = found
            where = f"at {self.ledger.where}" if isinstance(self.ledger, RecordedSince) else "in memory"
            log.warning(
                "%s",
                unclaimed_message(since, spent, where, datetime.isoformat, budgets),
                extra={"unclaimed_pools": sorted(spent), "since": since.isoformat()},
            )

    def _known(self, budget: str, period_start: datetime) -> LedgerCoverage | None:
        covered = self._covered.get(budget)
        return covered if covered is not None and covered.period_start == period_start else None


def _since(entries: Sequence[LedgerEntry], start: datetime) -> float:
    """The cost of the entries from ``start`` on (periods and hours start on the grid the entries are split on)."""
    return sum(e.cost_usd for e in entries if e.start >= start)


def _newer(last: LedgerEntry | None, entry: LedgerEntry) -> LedgerEntry:
    """The pool's newest entry once ``entry`` is recorded, as the ledger will report it."""
    if last is None or (entry.end, entry.start) > (last.end, last.start):
        return entry
    if entry.start == last.start:
        return resolve(last, entry) or last
    return last

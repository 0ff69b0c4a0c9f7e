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
once (an h100 pool of 10 units unread for 3 hours: 2,400 USD). Of that stretch, the pieces that start in a billed
interval of the pool (``agent.ledger.billed``) are left out: the ledger's spend counts the bill for them already,
as it will count it instead of their entries once they are recorded, so a bill imported for hours the pool was not
read counts them once. One more read a tick, of the billed intervals since the oldest such entry, only while a pool
is unread and the ledger keeps bills.

``coverage`` says, per budget with a monthly cap, whether the ledger holds the whole of the current period
(``agent.ledger.coverage``). The planner is not told otherwise (a guess at the missing spend would be wrong one way
or the other; billed costs imported for the period fill it exactly): the loop alerts, and the daemon exports it.
Once a period is found covered it stays covered (records are never removed), so a tick asks the ledger only about
budgets not yet known to be covered.

A pool's ``previous_ids`` count as its own, in its budgets' spend and in their coverage; spend under an id no
configured pool has or had counts in no budget, and is logged once, at the first read of the budgets' spend
(``agent.ledger.pool_ids``).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import cast

from agent.ledger.accrual import GRID, Accrual, PoolReading, accrue, resolve
from agent.ledger.base import Ledger, Newest, RecordedSince
from agent.ledger.billed import BilledCost, BilledIntervals
from agent.ledger.clock_steps import Baseline, ClockSteps, Placed, accrued, baseline, place
from agent.ledger.coverage import NEW_OR_LOST, LedgerCoverage, ledger_coverage
from agent.ledger.period_spend import PeriodSpend, SpendAsk
from agent.ledger.pool_ids import Previous, counted_pools, own_pools, unclaimed_message, unclaimed_spend
from agent.planning.budget import Budget, BudgetSpend
from models import LedgerEntry, LedgerUnavailable

log = logging.getLogger(__name__)

# The most readings kept while the ledger cannot be written (a day of one-minute ticks of seven pools); the oldest
# go first, their time charged all the same by the next reading, at the units held before them.
KEPT_READINGS = 10_000


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
        # what the ledger can do (``_kinds``), known for the ledger object it was worked out for: checking a protocol
        # with isinstance costs about as much as the rest of a tick's spend read
        self._kinds_of: tuple[Ledger, bool, bool, bool] | None = None

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
        unrecorded = self._unbilled(
            {p: self._unrecorded(entry, now, (prices or {}).get(p, 0.0)) for p, entry in last.items()}
        )
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

    def _unbilled(self, unrecorded: Mapping[str, tuple[LedgerEntry, ...]]) -> dict[str, tuple[LedgerEntry, ...]]:
        """``unrecorded`` without the pieces whose start lies in a billed interval of their pool: ``spent`` counts
        the bill for them (one read of the billed intervals of those pools since the oldest piece)."""
        out = dict(unrecorded)
        pieces = [e for entries in unrecorded.values() for e in entries]
        if not pieces or not self._kinds()[2]:
            return out
        ledger = cast(BilledIntervals, self.ledger)
        billed = ledger.billed_intervals(
            sorted(p for p, entries in unrecorded.items() if entries),
            min(e.start for e in pieces),
            max(e.end for e in pieces),
        )
        for pool, entries in unrecorded.items():
            bills = [b for b in billed if b.pool_id == pool]
            if bills:
                out[pool] = tuple(e for e in entries if not _covered(e, bills))
        return out

    def _kinds(self) -> tuple[bool, bool, bool]:
        """Whether the ledger keeps period totals (``PeriodSpend``), says since when it holds each pool
        (``RecordedSince``) and keeps billed costs (``BilledIntervals``)."""
        if self._kinds_of is None or self._kinds_of[0] is not self.ledger:
            ledger = self.ledger
            self._kinds_of = (
                ledger,
                isinstance(ledger, PeriodSpend),
                isinstance(ledger, RecordedSince),
                isinstance(ledger, BilledIntervals),
            )
        return self._kinds_of[1], self._kinds_of[2], self._kinds_of[3]

    def _spent(self, budgets: Sequence[Budget], now: datetime) -> list[BudgetSpend]:
        if self._kinds()[0]:
            ledger = cast(PeriodSpend, self.ledger)
            asks = [
                SpendAsk(tuple(self._counted(budget)), span.start, span.end, now)
                for budget in budgets
                for span in (budget.period(now), budget.hour(now))
            ]
            spent = ledger.spent_in_periods(asks, now)
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
        if not self._kinds()[1]:
            return []
        ledger = cast(RecordedSince, self.ledger)
        capped = [b for b in budgets if b.monthly_cap_usd is not None]
        periods = {b.name: b.period(now) for b in capped}
        asked = [b for b in capped if self._known(b.name, periods[b.name].start) is None]
        pools = counted_pools({p for b in asked for p in own_pools(b)}, self.previous_ids)
        since = ledger.recorded_since(pools) if asked else {}
        out = []
        for budget in capped:
            period = periods[budget.name]
            known = self._known(budget.name, period.start)
            if known is None:
                known = ledger_coverage(budget, now, since, ledger.where, self.previous_ids)
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


def _covered(entry: LedgerEntry, bills: Sequence[BilledCost]) -> bool:
    """Whether ``entry`` starts in one of its pool's billed intervals (the ledger's rule for a recorded entry)."""
    return any(b.start <= entry.start < b.end for b in bills)


def _newer(last: LedgerEntry | None, entry: LedgerEntry) -> LedgerEntry:
    """The pool's newest entry once ``entry`` is recorded, as the ledger will report it."""
    if last is None or (entry.end, entry.start) > (last.end, last.start):
        return entry
    if entry.start == last.start:
        return resolve(last, entry) or last
    return last

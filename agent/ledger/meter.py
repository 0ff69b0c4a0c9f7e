"""The spend meter: feeds pool readings through accrual into a ledger, and reads budget spend back out.

This is the only place the loop touches the ledger: ``observe`` after each observation of the pools (and again
after the agent's own resizes, so a scale-up is charged from the moment it was asked for), ``budget_spend``
before planning.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from agent.ledger.accrual import GRID, Accrual, PoolReading, accrue, resolve
from agent.ledger.base import Ledger, Newest
from agent.ledger.period_spend import PeriodSpend, SpendAsk
from agent.planning.budget import Budget, BudgetSpend
from models import LedgerEntry

log = logging.getLogger(__name__)


class SpendMeter:
    def __init__(self, ledger: Ledger, gap_after: timedelta, grid: timedelta = GRID) -> None:
        self.ledger = ledger
        self.gap_after = gap_after
        self.grid = grid

    def observe(self, readings: Iterable[PoolReading]) -> list[Accrual]:
        """Record what the readings add to the ledger, all in one write transaction that also reads the pools'
        newest entries, so another writer on the same ledger cannot slip in between the read and the write."""
        readings = list(readings)
        accruals: list[Accrual] = []

        def derive(recorded: Newest) -> list[LedgerEntry]:
            newest = dict(recorded)
            accruals.clear()
            entries: list[LedgerEntry] = []
            for reading in readings:
                pool = reading.pool_id
                accrual = accrue(newest[pool], reading, self.gap_after, self.grid)
                for entry in accrual.entries:
                    newest[pool] = _newer(newest[pool], entry)
                entries.extend(accrual.entries)
                accruals.append(accrual)
            return entries

        self.ledger.update(sorted({r.pool_id for r in readings}), derive)
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

    def budget_spend(self, budgets: Sequence[Budget], now: datetime) -> list[BudgetSpend]:
        """What each budget's pools have spent in the current month period and the current hour, up to ``now``:
        all in one read from the ledger's period totals when it keeps them (``agent.ledger.period_spend``)."""
        if isinstance(self.ledger, PeriodSpend):
            asks = [
                SpendAsk(tuple(sorted(budget.pools)), span.start, span.end, now)
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
                    spent_period_usd=self.ledger.spent(sorted(budget.pools), period.start, now),
                    spent_hour_usd=self.ledger.spent(sorted(budget.pools), hour.start, now),
                )
            )
        return spends


def _newer(last: LedgerEntry | None, entry: LedgerEntry) -> LedgerEntry:
    """The pool's newest entry once ``entry`` is recorded, as the ledger will report it."""
    if last is None or (entry.end, entry.start) > (last.end, last.start):
        return entry
    if entry.start == last.start:
        return resolve(last, entry) or last
    return last

"""Agents of two releases sharing a budget's hourly cap see each other's reservations of the current hour.

Earlier releases reserve an hourly cap's current hour under ``NAME/hourly`` and count only that key; this one also
reserves the next hour, under ``NAME/hourly@START``. When the current hour moved to a key of its own too, an agent of
each release sharing the cap (as during a rolling upgrade) counted none of the other's reservations: west (earlier
release) and east, each wanting 8 units at 8 USD a unit-hour against a cap of 100 USD an hour, were both granted and
spent 128 USD in the hour from 12:00. The current hour is reserved under ``NAME/hourly`` again, and a request for it
also counts what was reserved for it under ``NAME/hourly@START`` while it was the next hour. Run on one in-process
ledger both agents write, and on two connections to one PostgreSQL ledger."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.budget_reserve import BudgetReserver
from agent.budget_reserve_caps import Cap
from agent.ledger.pool_ids import counted_pools
from agent.ledger.reservations import Reservations
from agent.planning.budget import CapKind
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database
from tests.test_shared_budget_next_hour import HOURLY_CAP

START = datetime(2024, 1, 15, 12, tzinfo=UTC)
HOUR = (START, START + timedelta(hours=1))
FLEET_HOUR_USD = 8 * rig.UNIT_HOUR_USD  # what one agent's 8 units spend in the hour


class EarlierReleaseReserver(BudgetReserver):
    """The reservations of the release before hourly keys carried their hour: the current hour only, under
    ``NAME/hourly``, counting that key alone."""

    def _caps(self, now: datetime, pool_id: str) -> list[Cap]:
        spec = self.pools.get(pool_id)
        if spec is None or spec.price_per_unit_hour_usd <= 0.0:
            return []
        caps = []
        for budget in self.budgets:
            if pool_id not in budget.pools or not budget.remote_pools:
                continue
            for kind, period, cap_usd in budget.caps(now):
                horizon = budget.commit_horizon if kind is CapKind.MONTH else None
                hours = period.remaining(now, horizon).total_seconds() / 3600.0
                key = budget.name if kind is CapKind.MONTH else f"{budget.name}/{kind}"
                if hours > 0.0:
                    counted = tuple(counted_pools(budget.pools, self.previous_ids))
                    caps.append(Cap(key, budget, period, cap_usd, spec.price_per_unit_hour_usd * hours, counted))
        return caps


def _run(write_trace: TraceWriter, ledgers: rig.Ledgers) -> tuple[float, list[str], float]:
    """Both agents demand 64 chips from 12:00, ticking every 5 minutes to 13:00, west on the earlier release: the
    spend of the hour from 12:00, east's reservation alerts, and what east's first tick reserved under
    ``team/hourly``, the key west counts."""
    trace = write_trace({"train": [64.0] * 40}, start=(START - timedelta(hours=2)).isoformat(), step="5min")
    agents = [
        rig.member(rig.shared_budget_config(own, other, hourly_cap_usd=HOURLY_CAP), own, trace, ledger, START)
        for ledger, (own, other) in zip(ledgers, rig.PAIRS, strict=True)
    ]
    west = agents[0].agent
    reserver = west.budget_watch.reserver
    assert reserver is not None
    west.budget_watch.reserver = EarlierReleaseReserver(
        reserver.ledger, reserver.budgets, reserver.pools, "west", reserver.ttl, reserver.previous_ids
    )
    book = ledgers[0]
    assert isinstance(book, Reservations)
    east_alerts: list[str] = []
    seen_by_west = 0.0
    now = START
    while now < HOUR[1]:
        before = book.reserved("team/hourly", now)
        east_alerts += rig.refused(rig.tick(agents, now)["east"])
        if now == START:
            seen_by_west = book.reserved("team/hourly", now) - before
        now += timedelta(minutes=5)
    return ledgers[0].spent(["west", "east"], *HOUR), east_alerts, seen_by_west


def _check(spent: float, east_alerts: list[str], seen_by_west: float) -> None:
    assert spent <= HOURLY_CAP
    assert spent > FLEET_HOUR_USD  # east was granted what the cap leaves beside west, not held at none
    assert east_alerts and "budget 'team/hourly'" in east_alerts[0]
    assert seen_by_west > 0.0  # the reservations of both agents' first tick, under the key west counts


def test_an_earlier_release_and_this_one_share_the_current_hour_in_memory(write_trace: TraceWriter) -> None:
    _check(*_run(write_trace, rig.memory_ledgers()))


@POSTGRES
def test_an_earlier_release_and_this_one_share_the_current_hour_on_postgresql(
    write_trace: TraceWriter, postgres_database: Database
) -> None:
    with rig.postgres_ledgers(postgres_database) as ledgers:
        _check(*_run(write_trace, ledgers))

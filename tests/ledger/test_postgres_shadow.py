"""A dry-run daemon's shadow account kept in the PostgreSQL ledger: continued after a restart (a new process opens
the same database), one account per set of pools, and a damaged one refused naming where it is."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.daemon.shadow_book import PostgresShadowStore, ShadowBook, shadow_store
from agent.ledger.factory import open_ledger
from agent.ledger.postgres import PostgresLedger
from config.ledger import LedgerSettings
from models import CapacityTier, LedgerUnavailable, PoolKind, PoolSpec, PoolState
from models.demand import AcceleratorFamily
from tests.postgres.fixtures import POSTGRES, Database

pytestmark = POSTGRES
T0 = datetime(2024, 6, 30, 23, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
SPEC = PoolSpec(
    "gpu", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 10, 10.0, 2 * HOUR, ("train",)
)


def _open(database: Database) -> tuple[PostgresLedger, LedgerSettings]:
    settings = LedgerSettings(backend="postgresql", url=database.url, sslmode="disable")
    ledger = open_ledger(settings, {"LEADTIME_LEDGER_PASSWORD": database.password})
    assert isinstance(ledger, PostgresLedger)
    return ledger, settings


def _book(database: Database, pools: list[PoolSpec]) -> tuple[ShadowBook, PostgresLedger]:
    ledger, settings = _open(database)
    store = shadow_store(settings, ledger, pools)
    assert isinstance(store, PostgresShadowStore)
    return ShadowBook(pools, ["train"], HOUR, store), ledger


def _pools(ready: int) -> list[PoolState]:
    return [PoolState("gpu", T0, ready, ready)]


def test_the_account_continues_after_a_restart_and_is_kept_per_set_of_pools(postgres_database: Database) -> None:
    book, ledger = _book(postgres_database, [SPEC])
    book.record(T0, {}, _pools(1), {"gpu": 4})  # three units requested, in flight for two hours
    book.record(T0 + HOUR, {"train": 8.0}, _pools(1), {"gpu": 4})
    saved = book.account.to_dict()
    ledger.close()

    again, ledger = _book(postgres_database, [SPEC])  # the restarted daemon
    assert again.account.to_dict() == saved
    again.record(T0 + 2 * HOUR, {"train": 40.0}, _pools(1), {"gpu": 4})
    assert again.account.total.runs["recommended"].unserved_chip_hours == pytest.approx(32.0)  # still in flight
    assert again.account.total.runs["recommended"].cost_usd == pytest.approx(2 * 4 * 10.0)

    other = PoolSpec("tpu", SPEC.kind, SPEC.tier, SPEC.family, 8, 0, 10, 5.0, HOUR, ("train",))
    fresh, other_ledger = _book(postgres_database, [other])  # another deployment's pools: its own account
    assert fresh.account.total.intervals == 0
    other_ledger.close()
    ledger.close()


def test_a_damaged_account_is_refused_naming_where_it_is(postgres_database: Database) -> None:
    ledger, _ = _open(postgres_database)
    ledger.save_shadow("gpu", '{"version": 1}', T0)
    ledger.close()
    with pytest.raises(LedgerUnavailable, match=r"leadtime_shadow_accounts, name 'gpu'.*missing or malformed"):
        _book(postgres_database, [SPEC])


def test_a_new_leader_continues_the_account_the_previous_leader_kept(postgres_database: Database) -> None:
    standby, standby_ledger = _book(postgres_database, [SPEC])  # started while the other replica led
    leader, leader_ledger = _book(postgres_database, [SPEC])
    leader.record(T0, {}, _pools(2), {"gpu": 2})
    leader.record(T0 + HOUR, {"train": 8.0}, _pools(2), {"gpu": 2})
    assert standby.account.total.intervals == 0
    standby.reload()  # what the daemon does when this replica becomes the leader, before it accounts
    assert standby.account.to_dict() == leader.account.to_dict()
    standby.record(T0 + 2 * HOUR, {"train": 8.0}, _pools(2), {"gpu": 2})
    assert standby.account.total.runs["actual"].cost_usd == pytest.approx(2 * 2 * 10.0)
    standby_ledger.close()
    leader_ledger.close()

"""A dry-run daemon's shadow account in the PostgreSQL ledger when its pool set changes: a new account starts (named
by the new set), and a warning names the earlier set's account, left as it was; another deployment's account,
which shares no pool, is not taken for one."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from agent.daemon.shadow_book import PostgresShadowStore, ShadowBook, shadow_store
from agent.ledger.factory import open_ledger
from agent.ledger.postgres import PostgresLedger
from config.ledger import LedgerSettings
from models import CapacityTier, PoolKind, PoolSpec, PoolState
from models.demand import AcceleratorFamily
from tests.postgres.fixtures import POSTGRES, Database

pytestmark = POSTGRES
T0 = datetime(2024, 6, 30, 23, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
GPU = PoolSpec(
    "gpu", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 10, 10.0, 2 * HOUR, ("train",)
)
SPOT = PoolSpec("gpu-spot", GPU.kind, CapacityTier.SPOT, GPU.family, 8, 0, 10, 4.0, HOUR, ("train",))
TPU = PoolSpec("tpu", GPU.kind, GPU.tier, GPU.family, 8, 0, 10, 5.0, HOUR, ("train",))


def _book(database: Database, pools: list[PoolSpec]) -> tuple[ShadowBook, PostgresLedger]:
    settings = LedgerSettings(backend="postgresql", url=database.url, sslmode="disable")
    ledger = open_ledger(settings, {"LEADTIME_LEDGER_PASSWORD": database.password})
    assert isinstance(ledger, PostgresLedger)
    store = shadow_store(settings, ledger, pools)
    assert isinstance(store, PostgresShadowStore)
    return ShadowBook(pools, ["train"], HOUR, store), ledger


def _afresh(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "starts afresh" in r.getMessage()]


def test_a_changed_pool_set_starts_a_new_account_and_says_so(
    postgres_database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agent.daemon.shadow_book")
    book, ledger = _book(postgres_database, [GPU])
    assert _afresh(caplog) == []  # the first account of the ledger: nothing to say
    book.record(T0, {}, [PoolState("gpu", T0, 1, 1)], {"gpu": 2})
    book.record(T0 + HOUR, {"train": 8.0}, [PoolState("gpu", T0 + HOUR, 1, 1)], {"gpu": 2})
    saved = book.account.to_dict()
    ledger.close()

    _other, other_ledger = _book(postgres_database, [TPU])  # another deployment's pools share none
    assert _afresh(caplog) == []
    other_ledger.close()

    grown, ledger = _book(postgres_database, [GPU, SPOT])  # a pool added: the set changed
    assert grown.account.total.intervals == 0
    (said,) = _afresh(caplog)
    assert "'gpu' (last saved 2024-07-01T00:00:00+00:00)" in said
    assert "'tpu'" not in said
    assert [r.levelno for r in caplog.records if "starts afresh" in r.getMessage()] == [logging.WARNING]
    ledger.close()

    again, ledger = _book(postgres_database, [GPU])  # the earlier set's account was left as it was
    assert again.account.to_dict() == saved
    ledger.close()

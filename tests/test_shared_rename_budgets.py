"""A pool renamed (``previous_ids``) in a budget shared by two agents on one PostgreSQL ledger: the spend recorded
under its old id counts in the budget wherever it is read, in the reservations of the owning agent's scale-ups, and
in the other agent's spend and reservations once that agent's budget lists the old id in ``remote_previous_ids``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.budget_watch import BudgetWatch
from agent.cli import main
from agent.ledger.postgres import PostgresLedger
from agent.ledger.sqlite import SqliteLedger
from config import settings_from_mapping
from config.schema import Settings
from models import CapacityPlan, ConfigError, LedgerEntry, Resize
from tests.postgres.fixtures import POSTGRES, Database

NOW = datetime(2024, 3, 15, 12, tzinfo=UTC)  # 396 hours before the month ends
RENAMED_ON = datetime(2024, 3, 15, tzinfo=UTC)
PRICE = 10.0  # USD a unit-hour: a unit held to the period's end costs 3,960 USD
CAP = 150_000.0
OLD, OWNED, OTHER = "a100", "a100-prod", "b-h100"
_POOL = {"kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 40, "lead_time": "10m", "serves": ["train"]}


def _settings(pool: Mapping[str, Any], budget: Mapping[str, Any]) -> Settings:
    return settings_from_mapping(
        {
            "demand_classes": [{"name": "train"}],
            "pools": [{**_POOL, "price_per_unit_hour_usd": PRICE, **pool}],
            "budgets": [{"name": "shared", "monthly_cap_usd": CAP, **budget}],
        }
    )


OWNER = _settings({"id": OWNED, "previous_ids": [OLD]}, {"pools": [OWNED], "remote_pools": [OTHER]})
PEER = _settings(
    {"id": OTHER},
    {"pools": [OTHER], "remote_pools": [OWNED], "remote_previous_ids": {OWNED: [OLD]}},
)


@pytest.fixture
def ledger(postgres_database: Database) -> Iterator[PostgresLedger]:
    """98,650 USD spent under the pool's old id before the rename, 1,000 since; the other agent's pool 500."""
    with PostgresLedger(postgres_database.url, postgres_database.password) as ledger:
        ledger.record(LedgerEntry(OLD, datetime(2024, 3, 1, tzinfo=UTC), RENAMED_ON, 10, 98_650.0))
        ledger.record(LedgerEntry(OWNED, RENAMED_ON, NOW, 10, 1_000.0))
        ledger.record(LedgerEntry(OTHER, datetime(2024, 3, 1, tzinfo=UTC), NOW, 2, 500.0))
        yield ledger


def _watch(settings: Settings, ledger: PostgresLedger, holder: str) -> BudgetWatch:
    return BudgetWatch(settings, {p.pool_id: p for p in settings.pool_specs()}, ledger, holder=holder)


def _scale_up(pool_id: str, to_units: int) -> CapacityPlan:
    resize = Resize(pool_id, 0, to_units, "forecast", f"{pool_id}@{NOW.isoformat()}->{to_units}")
    return CapacityPlan(NOW, resizes=(resize,), targets={pool_id: to_units})


@POSTGRES
def test_the_owning_agent_reserves_against_the_spend_under_the_old_id(ledger: PostgresLedger) -> None:
    # 100,150 USD spent leaves 49,850: room for 12 units to the period's end, not the 20 asked for
    owner = _watch(OWNER, ledger, "west")
    assert owner.spend(NOW)[0].spent_period_usd == pytest.approx(100_150.0)

    reserved = owner.reserve(NOW, _scale_up(OWNED, 20))

    assert [(r.from_units, r.to_units) for r in reserved.plan.resizes] == [(0, 12)]
    assert ledger.reserved("shared", NOW) == pytest.approx(12 * PRICE * 396)


@POSTGRES
def test_the_other_agent_counts_the_old_id_it_is_told_of(ledger: PostgresLedger) -> None:
    peer = _watch(PEER, ledger, "east")

    assert peer.spend(NOW)[0].spent_period_usd == pytest.approx(100_150.0)
    reserved = peer.reserve(NOW, _scale_up(OTHER, 20))
    assert [(r.from_units, r.to_units) for r in reserved.plan.resizes] == [(0, 12)]


def test_the_budget_report_of_the_other_agent_counts_the_old_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ledger.sqlite"
    with SqliteLedger(path, fresh_if_empty=True) as ledger:
        ledger.record(LedgerEntry(OLD, datetime(2024, 3, 1, tzinfo=UTC), RENAMED_ON, 10, 98_650.0))
        ledger.record(LedgerEntry(OTHER, datetime(2024, 3, 1, tzinfo=UTC), NOW, 2, 500.0))
    document = PEER.model_dump(mode="json", exclude_defaults=True)
    config = tmp_path / "leadtime.yaml"
    config.write_text(yaml.safe_dump({**document, "ledger": {"path": str(path)}}), encoding="utf-8")

    assert main(["ledger", "budgets", "--config", str(config), "--at", NOW.isoformat()]) == 0

    out = capsys.readouterr().out
    (shared,) = [line.split() for line in out.splitlines() if line.startswith("shared ")]
    assert float(shared[-2].replace(",", "")) == pytest.approx(99_150.0, abs=0.005)
    assert not [line for line in out.splitlines() if line.startswith("not counted:")]


@pytest.mark.parametrize(
    ("remote_pools", "remote_previous_ids", "problem"),
    [
        ([OWNED], {"c-v100": ["old"]}, "'c-v100' is not in this budget's remote_pools"),
        ([OWNED], {OWNED: [OTHER]}, f"'{OTHER}' is the id of a pool now"),
        ([OWNED, "c-v100"], {OWNED: ["old"], "c-v100": ["old"]}, f"'old' is already a previous id of pool '{OWNED}'"),
        ([OWNED], {OWNED: ["Old_Id"]}, "remote_previous_ids"),
    ],
)
def test_remote_previous_ids_name_remote_pools_and_ids_no_pool_has(
    remote_pools: list[str], remote_previous_ids: dict[str, list[str]], problem: str
) -> None:
    budget = {"pools": [OTHER], "remote_pools": remote_pools, "remote_previous_ids": remote_previous_ids}
    with pytest.raises(ConfigError, match=problem):
        _settings({"id": OTHER}, budget)


def test_a_remote_pool_s_previous_ids_may_be_listed_in_each_budget_sharing_it() -> None:
    budget = {"monthly_cap_usd": CAP, "pools": [OTHER], "remote_pools": [OWNED], "remote_previous_ids": {OWNED: [OLD]}}
    settings = settings_from_mapping(
        {
            "demand_classes": [{"name": "train"}],
            "pools": [{**_POOL, "id": OTHER, "price_per_unit_hour_usd": PRICE}],
            "budgets": [{"name": "one", **budget}, {"name": "two", **budget}],
        }
    )
    assert [b.remote_previous_ids for b in settings.budgets] == [{OWNED: (OLD,)}, {OWNED: (OLD,)}]

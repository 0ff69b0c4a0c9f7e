"""A remote pool two budgets share, each naming some of its old ids in ``remote_previous_ids``: the spend under
every one of them counts as the pool's in both budgets (one map of old ids per pool, the union of the lists), in
the spend the daemon reads, in its reservations and in ``leadtime ledger budgets``. Before, the map was built budget
by budget and the last budget's list replaced the others', so the spend under the old ids it left out counted in
neither budget."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from agent.budget_watch import BudgetWatch
from agent.cli import main
from agent.ledger.sqlite import SqliteLedger
from config import settings_from_mapping
from models import CapacityPlan, LedgerEntry, Resize

NOW = datetime(2024, 3, 15, 12, tzinfo=UTC)  # 396 hours before the month ends
PRICE = 10.0  # USD a unit-hour: a unit held to the period's end costs 3,960 USD
OWN, REMOTE = "b-h100", "a100-prod"
FIRST, SECOND = "a100-v0", "a100"  # the remote pool's ids before its two renames
SPENT = 20_000.0 + 98_650.0 + 1_000.0  # under a100-v0, a100 and a100-prod
POOL = {"id": OWN, "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 40, "lead_time": "10m",
        "serves": ["train"], "price_per_unit_hour_usd": PRICE}  # fmt: skip
BODY = {
    "demand_classes": [{"name": "train"}],
    "pools": [POOL],
    "budgets": [
        {"name": "shared", "monthly_cap_usd": 150_000, "pools": [OWN], "remote_pools": [REMOTE],
         "remote_previous_ids": {REMOTE: [SECOND]}},
        {"name": "gpu-total", "monthly_cap_usd": 300_000, "pools": [OWN], "remote_pools": [REMOTE],
         "remote_previous_ids": {REMOTE: [FIRST]}},
    ],
}  # fmt: skip
SETTINGS = settings_from_mapping(BODY)


def _record(ledger: SqliteLedger) -> None:
    ledger.record(LedgerEntry(FIRST, datetime(2024, 3, 1, tzinfo=UTC), datetime(2024, 3, 5, tzinfo=UTC), 10, 20_000.0))
    ledger.record(
        LedgerEntry(SECOND, datetime(2024, 3, 5, tzinfo=UTC), datetime(2024, 3, 15, tzinfo=UTC), 10, 98_650.0)
    )
    ledger.record(LedgerEntry(REMOTE, datetime(2024, 3, 15, tzinfo=UTC), NOW, 10, 1_000.0))


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[SqliteLedger]:
    with SqliteLedger(tmp_path / "ledger.sqlite", fresh_if_empty=True) as ledger:
        _record(ledger)
        yield ledger


def _watch(ledger: SqliteLedger) -> BudgetWatch:
    return BudgetWatch(SETTINGS, {p.pool_id: p for p in SETTINGS.pool_specs()}, ledger, holder="east")


def test_both_budgets_count_the_spend_under_every_old_id_either_lists(ledger: SqliteLedger) -> None:
    spends = {s.budget.name: s.spent_period_usd for s in _watch(ledger).spend(NOW)}

    assert spends == {"shared": pytest.approx(SPENT), "gpu-total": pytest.approx(SPENT)}


def test_a_scale_up_is_reserved_against_the_spend_under_every_old_id(ledger: SqliteLedger) -> None:
    # 150,000 - 119,650 leaves 30,350 in the shared budget: 7 units to the period's end, not the 20 asked for
    resize = Resize(OWN, 0, 20, "forecast", f"{OWN}@{NOW.isoformat()}->20")
    plan = CapacityPlan(NOW, resizes=(resize,), targets={OWN: 20})

    reserved = _watch(ledger).reserve(NOW, plan)

    assert [(r.from_units, r.to_units) for r in reserved.plan.resizes] == [(0, 7)]
    assert ledger.reserved("shared", NOW) == pytest.approx(7 * PRICE * 396)


def test_the_budget_report_counts_every_old_id_in_both_budgets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ledger.sqlite"
    with SqliteLedger(path, fresh_if_empty=True) as ledger:
        _record(ledger)
    config = tmp_path / "leadtime.yaml"
    config.write_text(yaml.safe_dump({**BODY, "ledger": {"path": str(path)}}), encoding="utf-8")

    assert main(["ledger", "budgets", "--config", str(config), "--at", NOW.isoformat()]) == 0

    lines = capsys.readouterr().out.splitlines()
    for name in ("shared", "gpu-total"):
        (row,) = [line.split() for line in lines if line.startswith(f"{name} ")]
        assert float(row[-2]) == pytest.approx(SPENT, abs=0.005)
    assert not [line for line in lines if line.startswith("not counted:")]

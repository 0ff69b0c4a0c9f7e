"""``leadtime ledger import-sqlite`` moves a SQLite ledger into PostgreSQL: the same entries, the same billed costs
(``ledger import-billing``) and month-to-date spend as budgets count it to the cent, nothing doubled when run
again, and refused while a daemon still writes the file."""

from __future__ import annotations

import random
import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from agent.cli import main
from agent.ledger.accrual import PoolReading
from agent.ledger.billed import BilledCost
from agent.ledger.meter import SpendMeter
from agent.ledger.postgres import PostgresLedger
from agent.ledger.rows import to_us
from agent.ledger.sqlite import SqliteLedger
from models import LedgerEntry
from tests.ledger import billing_export_rig as billing
from tests.postgres.fixtures import POSTGRES, Database
from tests.unit.test_config_alerts_ledger import BASE

pytestmark = POSTGRES

T0 = datetime(2024, 7, 31, 21, 0, tzinfo=UTC)
MONTH = (datetime(2024, 7, 1, tzinfo=UTC), datetime(2024, 8, 1, tzinfo=UTC))


def _sqlite_ledger(path: Path) -> None:
    rng = random.Random(11)
    with SqliteLedger(path) as ledger:
        SpendMeter(ledger, timedelta(minutes=5)).observe(  # 200 ticks of two pools, in one transaction
            PoolReading(p, T0 + timedelta(minutes=minute), rng.randint(0, 6), 12.5)
            for minute in range(0, 600, 3)
            for p in ("a100", "h100")
        )


def _config(tmp_path: Path, database: Database, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LEADTIME_LEDGER_PASSWORD", database.password)
    config = tmp_path / "leadtime.yaml"
    ledger = {"backend": "postgresql", "url": database.url, "sslmode": "disable"}
    config.write_text(yaml.safe_dump({**BASE, "ledger": ledger}), encoding="utf-8")
    return config


def test_import_copies_every_entry_and_a_second_run_changes_nothing(
    tmp_path: Path, postgres_database: Database, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "ledger.sqlite"
    _sqlite_ledger(source)
    config = _config(tmp_path, postgres_database, monkeypatch)
    with SqliteLedger(source) as sqlite:
        want = sqlite.entries()
        month = {p: sqlite.spent([p], *MONTH) for p in ("a100", "h100")}
    assert main(["ledger", "import-sqlite", "--config", str(config), str(source)]) == 0
    assert main(["ledger", "import-sqlite", "--config", str(config), str(source)]) == 0
    out, err = capsys.readouterr()
    assert out.count(f"read {len(want)} entries of 2 pools") == 2
    assert err == ""
    with PostgresLedger(postgres_database.url, postgres_database.password) as postgres:
        assert postgres.entries() == want
        for pool, spent in month.items():
            assert postgres.spent([pool], *MONTH) == pytest.approx(spent, abs=0.005)
    assert month["a100"] > 0


def test_import_is_refused_while_a_daemon_writes_the_file(
    tmp_path: Path, postgres_database: Database, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "ledger.sqlite"
    _sqlite_ledger(source)
    config = _config(tmp_path, postgres_database, monkeypatch)
    with SqliteLedger(source):
        assert main(["ledger", "import-sqlite", "--config", str(config), str(source)]) == 2
    assert f"{source}.lock" in capsys.readouterr().err


def test_import_needs_a_postgresql_ledger_and_an_existing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "leadtime.yaml"
    config.write_text(yaml.safe_dump(BASE), encoding="utf-8")
    assert main(["ledger", "import-sqlite", "--config", str(config), str(tmp_path / "x.sqlite")]) == 2
    assert "ledger.backend" in capsys.readouterr().err


def test_import_copies_the_billed_costs_and_checks_spend_as_budgets_count_it(
    tmp_path: Path, postgres_database: Database, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A daemon's SQLite ledger whose first 4 of 6 hours were reconciled with the bill (``import-billing``), and
    one hour more billed by an earlier release, which stored a row whole (off the 15-minute grid)."""
    source = tmp_path / "ledger.sqlite"
    t0, end = billing.T0, billing.T0 + 6 * billing.HOUR
    with SqliteLedger(source) as ledger:
        ledger.record_many(
            [
                LedgerEntry(
                    pool, t0 + i * billing.QUARTER, t0 + (i + 1) * billing.QUARTER, n, n * billing.UNIT_HOUR / 4
                )
                for i in range(6 * 4)
                for pool, n in billing.UNITS.items()
            ]
        )
    (tmp_path / "daemon").mkdir()
    daemon_cfg = billing.config(tmp_path / "daemon", {"path": str(source)})
    export = tmp_path / "billing.json"
    export.write_text(billing.as_json(billing.export_rows()), encoding="utf-8")
    assert main(["ledger", "import-billing", "--config", str(daemon_cfg), str(export)]) == 0
    whole = BilledCost("h100", t0 + 4 * billing.HOUR + timedelta(minutes=7), end - timedelta(minutes=53), 21.0)
    with closing(sqlite3.connect(source)) as db, db:
        row = (whole.pool_id, to_us(whole.start), to_us(whole.end), whole.cost_usd)
        db.execute("INSERT INTO billed VALUES (?, ?, ?, ?)", row)  # as an earlier release stored it
        (pieces,) = db.execute("SELECT count(*) FROM billed").fetchone()
    pools = ["a100", "h100"]
    with SqliteLedger(source, read_only=True) as sqlite:
        want = {
            p: (sqlite.estimated([p], t0, end), sqlite.billed([p], t0, end), sqlite.spent([p], t0, end)) for p in pools
        }
        hourly = [sqlite.spent(pools, t0 + h * billing.HOUR, t0 + (h + 1) * billing.HOUR) for h in range(6)]
    capsys.readouterr()

    config = _config(tmp_path, postgres_database, monkeypatch)
    assert main(["ledger", "import-sqlite", "--config", str(config), str(source)]) == 0
    assert main(["ledger", "import-sqlite", "--config", str(config), str(source)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    estimated, billed, spent = (sum(w[i] for w in want.values()) for i in range(3))
    totals = f"estimated {estimated:.2f} USD, billed {billed:.2f} USD, spent {spent:.2f} USD"
    assert out.count(f"read 48 entries of 2 pools and {pieces} billed intervals from {source} ({totals})") == 2
    assert out.count(f"now holds {totals} for those pools over the same span") == 2
    with PostgresLedger(postgres_database.url, postgres_database.password) as postgres:
        for pool, (pool_estimated, pool_billed, pool_spent) in want.items():
            assert postgres.estimated([pool], t0, end) == pytest.approx(pool_estimated, abs=0.005)
            assert postgres.billed([pool], t0, end) == pytest.approx(pool_billed, abs=0.005)
            assert postgres.spent([pool], t0, end) == pytest.approx(pool_spent, abs=0.005)
        # Per hour too: the whole row is cut on the grid, its 53 minutes in hour 4 and 7 in hour 5.
        assert [postgres.spent(pools, t0 + h * billing.HOUR, t0 + (h + 1) * billing.HOUR) for h in range(6)] == (
            pytest.approx(
                [*hourly[:4], hourly[4] - whole.cost_usd * 7 / 60, hourly[5] + whole.cost_usd * 7 / 60], abs=0.005
            )
        )
    bill = 4 * sum(billing.A100_BILL) + 4 * billing.H100_BILL + whole.cost_usd
    assert billed == pytest.approx(bill)
    assert spent != pytest.approx(estimated, abs=1.0)


def test_import_warns_when_the_database_held_other_bills_for_the_pools(
    tmp_path: Path, postgres_database: Database, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "ledger.sqlite"
    _sqlite_ledger(source)
    config = _config(tmp_path, postgres_database, monkeypatch)
    with PostgresLedger(postgres_database.url, postgres_database.password) as postgres:
        postgres.record_billed([BilledCost("a100", T0, T0 + timedelta(hours=1), 1.0)])
    assert main(["ledger", "import-sqlite", "--config", str(config), str(source)]) == 0
    out, err = capsys.readouterr()
    assert "and 0 billed intervals" in out
    assert "held other spend or bills for these pools before the import" in err

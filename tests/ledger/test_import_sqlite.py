"""``leadtime ledger import-sqlite`` moves a SQLite ledger into PostgreSQL: the same entries and month-to-date
spend to the cent, nothing doubled when run again, and refused while a daemon still writes the file."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from agent.cli import main
from agent.ledger.accrual import PoolReading
from agent.ledger.meter import SpendMeter
from agent.ledger.postgres import PostgresLedger
from agent.ledger.sqlite import SqliteLedger
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

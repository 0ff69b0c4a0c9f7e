"""The commands that only read the PostgreSQL ledger (``leadtime recommend``, ``leadtime ledger budgets``) leave it
as they found it, on the suite's real server: its schema is checked, never created or migrated (a newer release's
dry run must not move production's schema past the daemon that writes it), its sessions are read-only, and a role
that may only SELECT reads it. An older schema they can read is read as it is; one they cannot, or a database no
daemon has written yet, is refused saying what to do."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
import yaml

from agent.cli import main
from agent.commands.recommend_ledger import open_read_only
from agent.ledger.billed import BilledCost
from agent.ledger.postgres import PostgresLedger
from agent.ledger.postgres_schema import MIGRATIONS, SCHEMA_VERSION
from agent.ledger.rows import to_us
from config.ledger import LedgerSettings
from models import LedgerEntry, LedgerUnavailable, NoLedgerSchema
from tests.postgres.fixtures import POSTGRES, Database

pytestmark = POSTGRES

MONTH = datetime(2026, 3, 1, tzinfo=UTC)
AT = datetime(2026, 3, 3, tzinfo=UTC)
QUARTER = timedelta(minutes=15)
SPEND = [LedgerEntry("a100", MONTH + i * QUARTER, MONTH + (i + 1) * QUARTER, 1, 4.0) for i in range(2 * 96)]
BILL = BilledCost("a100", MONTH, MONTH + timedelta(days=1), 300.0)
POOL = {"kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 4, "price_per_chip_hour_usd": 3.0,
        "lead_time": "10m", "serves": ["c"]}  # fmt: skip


def _as_older_release(database: Database, version: int) -> None:
    """The database as a release whose newest migration is ``version`` left it: those migrations applied."""
    with psycopg.connect(database.url, password=database.password) as db:
        db.execute(
            "CREATE TABLE leadtime_schema_migrations"
            " (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for number, statements in MIGRATIONS:
            if number <= version:
                for statement in statements:
                    db.execute(statement)
                db.execute("INSERT INTO leadtime_schema_migrations (version) VALUES (%s)", (number,))


def _spend_as_older_release(database: Database) -> None:
    """``SPEND`` and ``BILL`` as rows of the older schema."""
    with psycopg.connect(database.url, password=database.password) as db:
        for entry in SPEND:
            db.execute(
                "INSERT INTO leadtime_ledger_entries (pool_id, start_us, end_us, units, cost_usd)"
                " VALUES (%s, %s, %s, %s, %s)",
                (entry.pool_id, to_us(entry.start), to_us(entry.end), entry.units, entry.cost_usd),
            )
        db.execute(
            "INSERT INTO leadtime_billed_costs (pool_id, start_us, end_us, cost_usd) VALUES (%s, %s, %s, %s)",
            (BILL.pool_id, to_us(BILL.start), to_us(BILL.end), BILL.cost_usd),
        )


def reader_role(database: Database) -> Database:
    """A role of its own that may connect to the database and SELECT from its tables, and nothing else."""
    name = f"reader_{database.url.rsplit('/', 1)[1]}"
    password = f"pw-{name}"
    with psycopg.connect(database.url, password=database.password, autocommit=True) as db:
        db.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")  # names and password made here, not input
        db.execute(f"GRANT USAGE ON SCHEMA public TO {name}")
        db.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {name}")
    return Database(database.url.replace("://leadtime@", f"://{name}@"), password)


def schema_state(database: Database) -> tuple[int | None, list[str], list[str]]:
    """The schema version, the tables and the functions of the database's public schema."""
    with psycopg.connect(database.url, password=database.password) as db:
        tables = [str(r[0]) for r in db.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
        functions = [
            str(r[0])
            for r in db.execute(
                "SELECT p.proname FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace"
                " WHERE n.nspname = 'public'"
            )
        ]
        version = None
        if "leadtime_schema_migrations" in tables:
            row = db.execute("SELECT max(version) FROM leadtime_schema_migrations").fetchone()
            version = None if row is None else row[0]
    return version, sorted(tables), sorted(functions)


def _config(tmp_path: Path, database: Database, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LEADTIME_LEDGER_PASSWORD", database.password)
    body = {
        "demand_classes": [{"name": "c"}],
        "pools": [{"id": "a100", **POOL}],
        "budgets": [{"name": "research", "pools": ["a100"], "monthly_cap_usd": 10_000}],
        "ledger": {"backend": "postgresql", "url": database.url, "sslmode": "disable"},
    }
    path = tmp_path / "leadtime.yaml"
    path.write_text(yaml.safe_dump(body), encoding="utf-8")
    return path


def _settings(database: Database) -> LedgerSettings:
    return LedgerSettings(backend="postgresql", url=database.url, sslmode="disable")


def _budgets(config: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, list[str]]:
    assert main(["ledger", "budgets", "--config", str(config), "--at", AT.isoformat()]) == 0
    out = capsys.readouterr().out
    return {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.startswith("research")}


def test_an_older_schema_is_read_as_it_is_and_left_at_its_version(
    postgres_database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A database at schema 4 (billed costs, no running totals) that an older daemon still writes."""
    _as_older_release(postgres_database, 4)
    _spend_as_older_release(postgres_database)
    before = schema_state(postgres_database)
    assert before[0] == 4 < SCHEMA_VERSION

    # two days estimated at 384 USD each; the first one billed 300: spent 300 + 384
    [row] = _budgets(_config(tmp_path, postgres_database, monkeypatch), capsys).values()
    assert row[2:6] == ["768.00", "300.00", "384.00", "684.00"]
    with open_read_only(_settings(postgres_database)) as (ledger, month_to_date):
        assert month_to_date.known and "(read-only)" in month_to_date.note
        assert ledger.spent(["a100"], MONTH, AT) == pytest.approx(684.0)
        assert ledger.last_entry("a100") == LedgerEntry("a100", AT - timedelta(minutes=15), AT, 1, 4.0)
    assert schema_state(postgres_database) == before


def test_a_select_only_role_reads_the_current_schema_and_nothing_is_written(
    postgres_database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with PostgresLedger(postgres_database.url, postgres_database.password) as daemon:
        daemon.record_many(SPEND)
        daemon.record_billed([BILL])
        entries = daemon.entries()
    reader = reader_role(postgres_database)
    before = schema_state(postgres_database)

    [row] = _budgets(_config(tmp_path, reader, monkeypatch), capsys).values()
    assert row[2:6] == ["768.00", "300.00", "384.00", "684.00"]
    with open_read_only(_settings(reader)) as (ledger, month_to_date):
        assert month_to_date.known
        assert ledger.spent(["a100"], MONTH, AT) == pytest.approx(684.0)
    with PostgresLedger(reader.url, reader.password, read_only=True) as read_only:
        assert read_only.recorded_since(["a100"]) == {"a100": MONTH}
        with pytest.raises(LedgerUnavailable, match="opened read-only"):
            read_only.record(LedgerEntry("a100", AT, AT, 1, 0.0))
    with (  # the owner's read-only session too: the database itself refuses a write
        PostgresLedger(postgres_database.url, postgres_database.password, read_only=True) as owner,
        pytest.raises(psycopg.errors.ReadOnlySqlTransaction),
    ):
        owner._connection().execute("DELETE FROM leadtime_ledger_entries")
    assert schema_state(postgres_database) == before
    with PostgresLedger(postgres_database.url, postgres_database.password) as daemon:
        assert daemon.entries() == entries


def test_a_schema_too_old_to_read_is_refused_naming_it_and_left_alone(
    postgres_database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _as_older_release(postgres_database, 1)
    before = schema_state(postgres_database)
    config = _config(tmp_path, postgres_database, monkeypatch)

    assert main(["ledger", "budgets", "--config", str(config), "--at", AT.isoformat()]) != 0
    err = capsys.readouterr().err
    assert "has schema 1, older than this release reads (4 to" in err
    assert "upgrade the daemon that writes it first" in err
    with pytest.raises(LedgerUnavailable, match="has schema 1"), open_read_only(_settings(postgres_database)):
        pass
    assert schema_state(postgres_database) == before


def test_a_newer_schema_is_refused_read_only_too(postgres_database: Database) -> None:
    _as_older_release(postgres_database, SCHEMA_VERSION)
    with psycopg.connect(postgres_database.url, password=postgres_database.password) as db:
        db.execute("INSERT INTO leadtime_schema_migrations (version) VALUES (%s)", (SCHEMA_VERSION + 1,))
    with pytest.raises(LedgerUnavailable, match="newer than this release knows"):
        PostgresLedger(postgres_database.url, postgres_database.password, read_only=True)


def test_a_database_no_daemon_has_written_is_not_created(
    postgres_database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, postgres_database, monkeypatch)
    assert main(["ledger", "budgets", "--config", str(config), "--at", AT.isoformat()]) != 0
    assert "holds no leadtime ledger yet" in capsys.readouterr().err
    with open_read_only(_settings(postgres_database)) as (ledger, month_to_date):  # the dry run: spend unknown
        assert not month_to_date.known
        assert month_to_date.note.startswith("month-to-date spend unknown, assumed 0: the PostgreSQL ledger at")
        assert ledger.recorded is None
    with pytest.raises(NoLedgerSchema):
        PostgresLedger(postgres_database.url, postgres_database.password, read_only=True)
    assert schema_state(postgres_database) == (None, [], [])

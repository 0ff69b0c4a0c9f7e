"""The PostgreSQL ledger on a real server: selected and authenticated as configured (the password from a file or
the environment, never from the YAML or into a message), migrated once when agents start together, refusing a
schema it does not know, surviving a restart to the cent and a lost connection."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agent.ledger.accrual import PoolReading
from agent.ledger.factory import open_ledger
from agent.ledger.meter import SpendMeter
from agent.ledger.postgres import PostgresLedger
from agent.ledger.postgres_schema import SCHEMA_VERSION
from agent.ledger.postgres_writes import WRITE_LOCK
from config import settings_from_mapping
from config.ledger import LedgerSettings
from models import ConfigError, LedgerEntry, LedgerUnavailable
from tests.postgres.fixtures import POSTGRES, Database
from tests.postgres.server import free_port
from tests.unit import test_ledger_sqlite as sqlite_restart
from tests.unit.test_config_alerts_ledger import BASE

pytestmark = POSTGRES

ROOT = Path(__file__).resolve().parents[2]

T0 = datetime(2024, 6, 30, 23, 0, 3, 250001, tzinfo=UTC)
SPEND = LedgerEntry("a100", T0, T0 + timedelta(minutes=14), 4, 10.0)  # in one cell of the grid: stored as given


def settings(database: Database, **more: Any) -> LedgerSettings:
    return LedgerSettings(backend="postgresql", url=database.url, sslmode="disable", **more)


def test_the_password_comes_from_the_environment_variable_named(postgres_database: Database) -> None:
    ledger = open_ledger(
        settings(postgres_database, password_env="SPEND_DB_PW"), {"SPEND_DB_PW": postgres_database.password}
    )
    assert isinstance(ledger, PostgresLedger)
    ledger.record(SPEND)
    assert ledger.spent(["a100"], T0, T0 + timedelta(hours=1)) == pytest.approx(10.0)
    ledger.close()


def test_the_password_comes_from_the_file_named_first(postgres_database: Database, tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text(postgres_database.password + "\n", encoding="utf-8")
    ledger = open_ledger(settings(postgres_database, password_file=str(secret)), {"LEADTIME_LEDGER_PASSWORD": "wrong"})
    assert isinstance(ledger, PostgresLedger)
    ledger.close()


def test_a_wrong_password_is_refused_without_quoting_it(postgres_database: Database) -> None:
    with pytest.raises(LedgerUnavailable) as refused:
        open_ledger(settings(postgres_database), {"LEADTIME_LEDGER_PASSWORD": "not-the-Pa55word"})
    message = str(refused.value)
    assert "not-the-Pa55word" not in message and postgres_database.password not in message
    assert "password authentication failed" in message
    assert message.startswith("cannot migrate the PostgreSQL ledger at 127.0.0.1:")


def test_an_unreadable_password_file_is_a_config_error_naming_the_key(
    postgres_database: Database, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError) as refused:
        open_ledger(settings(postgres_database, password_file=str(tmp_path / "missing")), {})
    assert [p.key_path for p in refused.value.problems] == ["ledger.password_file"]


def test_a_server_that_does_not_answer_is_ledger_unavailable() -> None:
    url = f"postgresql://leadtime@127.0.0.1:{free_port()}/spend"
    with pytest.raises(LedgerUnavailable, match=r"cannot migrate the PostgreSQL ledger at 127\.0\.0\.1:\d+/spend"):
        PostgresLedger(url, "x", connect_timeout=timedelta(seconds=2))


@pytest.mark.parametrize(
    ("ledger", "key_path", "says"),
    [
        pytest.param({"backend": "postgresql"}, "ledger", "needs url", id="no url"),
        pytest.param(
            {"backend": "postgresql", "url": "postgresql://u:hunter2@db:5432/x"},
            "ledger.url",
            "must not hold a password",
            id="password in url",
        ),
        pytest.param({"backend": "postgresql", "url": "mysql://u@db/x"}, "ledger.url", "postgresql://", id="scheme"),
        pytest.param({"url": "postgresql://u@db/x"}, "ledger", "set backend: postgresql", id="url without backend"),
    ],
)
def test_bad_database_settings_are_refused_naming_the_key(ledger: dict[str, str], key_path: str, says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        settings_from_mapping({**BASE, "ledger": ledger}, source="test")
    assert [(p.key_path, says in p.message) for p in refused.value.problems] == [(key_path, True)]
    assert "hunter2" not in str(refused.value)


def test_agents_starting_together_apply_each_migration_once(postgres_database: Database) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def open_one() -> None:
        try:
            start.wait()
            PostgresLedger(postgres_database.url, postgres_database.password).close()
        except BaseException as exc:  # noqa: BLE001  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    with psycopg.connect(postgres_database.url, password=postgres_database.password) as db:
        versions = db.execute("SELECT version FROM leadtime_schema_migrations ORDER BY version").fetchall()
    assert versions == [(v,) for v in range(1, SCHEMA_VERSION + 1)]


def test_a_newer_schema_is_refused(postgres_database: Database) -> None:
    PostgresLedger(postgres_database.url, postgres_database.password).close()
    with psycopg.connect(postgres_database.url, password=postgres_database.password) as db:
        db.execute("INSERT INTO leadtime_schema_migrations (version) VALUES (%s)", (SCHEMA_VERSION + 1,))
    with pytest.raises(LedgerUnavailable, match=rf"has schema {SCHEMA_VERSION + 1}, newer than this release knows"):
        PostgresLedger(postgres_database.url, postgres_database.password)


def test_a_restarted_daemon_keeps_its_month_to_date_spend_to_the_cent(postgres_database: Database) -> None:
    readings = [PoolReading("a100", T0 + timedelta(minutes=m), 2 + m % 3, 29.36) for m in range(0, 600, 7)]
    with PostgresLedger(postgres_database.url, postgres_database.password) as before:
        SpendMeter(before, timedelta(minutes=10)).observe(readings[:40])
        month = before.spent(["a100"], T0, T0 + timedelta(days=1))
    with PostgresLedger(postgres_database.url, postgres_database.password) as after:  # a new pod, the same database
        assert after.spent(["a100"], T0, T0 + timedelta(days=1)) == pytest.approx(month, abs=0.005)
        SpendMeter(after, timedelta(minutes=10)).observe(readings[20:])  # replays 20 readings already charged
        want = sum(e.cost_usd for e in _reference(readings))
        assert after.spent(["a100"], T0, T0 + timedelta(days=1)) == pytest.approx(want, rel=1e-12)
    assert month > 0


def test_a_lost_connection_fails_one_call_and_the_next_reconnects(postgres_database: Database) -> None:
    with PostgresLedger(postgres_database.url, postgres_database.password) as ledger:
        ledger.record(SPEND)
        with psycopg.connect(postgres_database.url, password=postgres_database.password, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = 'leadtime' AND datname = current_database()"
            )
        with pytest.raises(LedgerUnavailable, match="cannot read the PostgreSQL ledger"):
            ledger.last_entry("a100")
        assert ledger.last_entry("a100") == SPEND


def test_a_writer_lock_held_by_a_stuck_session_fails_the_call_in_bounded_time(postgres_database: Database) -> None:
    """Another session holds the ledger's writer lock inside a transaction and never ends it (a process that
    hangs, a network gone mid-transaction): a write fails naming the timeout instead of waiting for ever, and
    works again once the lock is free."""
    with PostgresLedger(
        postgres_database.url, postgres_database.password, statement_timeout=timedelta(seconds=1)
    ) as ledger:
        with psycopg.connect(postgres_database.url, password=postgres_database.password) as other:
            other.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))  # the transaction stays open
            outcome: list[BaseException | None] = []
            writer = threading.Thread(target=lambda: outcome.append(_attempt(ledger, SPEND)), daemon=True)
            writer.start()
            writer.join(timeout=60)
            assert not writer.is_alive(), "the write still waits for the lock"
            (failure,) = outcome
            assert isinstance(failure, LedgerUnavailable)
            assert "statement timeout" in str(failure)
            other.rollback()
        ledger.record(SPEND)
        assert ledger.last_entry("a100") == SPEND


def _attempt(ledger: PostgresLedger, entry: LedgerEntry) -> BaseException | None:
    try:
        ledger.record(entry)
    except LedgerUnavailable as exc:
        return exc
    return None


def _reference(readings: list[PoolReading]) -> list[LedgerEntry]:
    from agent.ledger import InMemoryLedger

    memory = InMemoryLedger()
    SpendMeter(memory, timedelta(minutes=10)).observe(readings)
    return memory.entries()


_WRITER = """
import os, sys
from agent.ledger.meter import SpendMeter
from agent.ledger.postgres import PostgresLedger
from tests.unit.test_ledger_sqlite import GAP, readings
ledger = PostgresLedger(sys.argv[1], os.environ["LEADTIME_LEDGER_PASSWORD"])
meter = SpendMeter(ledger, GAP)
for i, reading in enumerate(readings(3000)):
    meter.observe([reading])
    if i == 200:
        print("ready", flush=True)
"""


def test_a_killed_writer_leaves_a_ledger_that_replay_completes(postgres_database: Database) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, postgres_database.url],
        cwd=ROOT,
        env={**os.environ, "LEADTIME_LEDGER_PASSWORD": postgres_database.password},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL
    feed = sqlite_restart.readings(3000)
    with PostgresLedger(postgres_database.url, postgres_database.password) as ledger:
        recorded = len(ledger.entries())
        SpendMeter(ledger, sqlite_restart.GAP).observe(feed)
        got = ledger.entries()
    assert 0 < recorded < len(got)
    assert got == sqlite_restart.reference(feed).entries()


def test_close_reopen_and_replay_loses_and_duplicates_nothing(postgres_database: Database) -> None:
    feed = sqlite_restart.readings(300)
    with PostgresLedger(postgres_database.url, postgres_database.password) as first:
        SpendMeter(first, sqlite_restart.GAP).observe(feed[:250])
    with PostgresLedger(postgres_database.url, postgres_database.password) as second:
        SpendMeter(second, sqlite_restart.GAP).observe(feed[100:])  # replays 150 readings already recorded
        assert second.entries() == sqlite_restart.reference(feed).entries()


def test_the_tls_mode_reaches_the_driver(postgres_database: Database) -> None:
    # The test server has no certificate: requiring TLS must fail the connection, not fall back to plain text.
    required = LedgerSettings(backend="postgresql", url=postgres_database.url, sslmode="require")
    with pytest.raises(LedgerUnavailable, match="server does not support SSL"):
        open_ledger(required, {"LEADTIME_LEDGER_PASSWORD": postgres_database.password})

"""The PostgreSQL ledger's schema: its migrations, and the checks of the schema version a database holds.

``MIGRATIONS`` are applied in order at open (``migrate``), inside one transaction holding an advisory lock, so two
agents starting at once apply each migration exactly once. A database whose schema is newer than this release
knows is refused. A read-only ledger checks the schema instead of upgrading it (``readable_schema``): one from
``READABLE_FROM`` on is read as it is, an older one, or a database no daemon has written yet (``NoLedgerSchema``),
is refused, saying what to do.

Columns an earlier release can live beside are added without a new version (``SPANS``, applied by ``migrate`` after
the versions): an agent of the release before, which refuses a schema newer than it knows, keeps running beside this
one on the same database, writing its rows without them (it names the columns it inserts) and reading the rows of
this one as it reads its own. They are added only where they can be now: ``ALTER TABLE`` needs the table's owner and
an exclusive lock, and neither is needed to run without them (their rows are then written and read as the release
before writes and reads them). A role with data rights only runs without them and is told once the statement its
owner should run, and sends no ``ALTER TABLE`` it cannot run (the server logs each refusal as an error); a table
another session holds (a report, ``pg_dump``) is not waited for more than ``SPANS_LOCK_TIMEOUT``, as every other
agent's reads of it queue behind the wait. Either way the running ledger looks again every ``SPANS_RETRY``
(``SpanColumns``), not trying while another session holds the table, so the columns come once the owner is given to
the role or the report ends, without a restart.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any, LiteralString

import psycopg
from psycopg import errors

from agent.ledger import postgres_totals as totals
from models import LedgerUnavailable, NoLedgerSchema

log = logging.getLogger(__name__)

# Advisory lock key (64-bit): "LDTGMIGR" serialises migrations.
_MIGRATION_LOCK = 0x4C44_5447_4D49_4752

Connection = psycopg.Connection[tuple[Any, ...]]

MIGRATIONS: tuple[tuple[int, tuple[LiteralString, ...]], ...] = (
    (
        1,
        (
            """CREATE TABLE leadtime_ledger_entries (
                pool_id  text             NOT NULL,
                start_us bigint           NOT NULL,
                end_us   bigint           NOT NULL,
                units    integer          NOT NULL CHECK (units >= 0),
                cost_usd double precision NOT NULL CHECK (cost_usd >= 0),
                PRIMARY KEY (pool_id, start_us)
            )""",
            "CREATE INDEX leadtime_ledger_entries_by_end"
            " ON leadtime_ledger_entries (pool_id, end_us DESC, start_us DESC)",
        ),
    ),
    (
        2,
        (
            """CREATE TABLE leadtime_budget_reservations (
                id         bigserial        PRIMARY KEY,
                budget     text             NOT NULL,
                holder     text             NOT NULL,
                amount_usd double precision NOT NULL CHECK (amount_usd >= 0),
                created_us bigint           NOT NULL,
                expires_us bigint           NOT NULL
            )""",
            "CREATE INDEX leadtime_budget_reservations_by_budget ON leadtime_budget_reservations (budget, expires_us)",
        ),
    ),
    (
        3,
        (
            """CREATE TABLE leadtime_shadow_accounts (
                name     text   PRIMARY KEY,
                body     text   NOT NULL,
                saved_us bigint NOT NULL
            )""",
        ),
    ),
    (
        4,
        (
            """CREATE TABLE leadtime_billed_costs (
                pool_id  text             NOT NULL,
                start_us bigint           NOT NULL,
                end_us   bigint           NOT NULL CHECK (end_us > start_us),
                cost_usd double precision NOT NULL,
                PRIMARY KEY (pool_id, start_us)
            )""",
            "CREATE INDEX leadtime_billed_costs_by_end ON leadtime_billed_costs (pool_id, end_us)",
        ),
    ),
    (5, totals.MIGRATION),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]
# The span of time each budget reservation's amount pays for (``agent.ledger.reservations.carried``); NULL in the
# rows of an earlier release.
SPANS: LiteralString = (
    "ALTER TABLE leadtime_budget_reservations ADD COLUMN IF NOT EXISTS covers_from_us bigint,"
    " ADD COLUMN IF NOT EXISTS covers_until_us bigint"
)
# How long the open waits for the table's lock to add them: every read of the table queues behind the wait.
SPANS_LOCK_TIMEOUT: LiteralString = "1s"
# How often a running agent tries again where they are missing: each try may hold every read of the table that long.
SPANS_RETRY = timedelta(minutes=5)
_RETRY_TEXT = f"{SPANS_RETRY.total_seconds() / 60:g} minutes"
READABLE_FROM = 4  # the oldest schema a read-only ledger reads: billed costs came in 4
TOTALS_FROM = 5  # the schema that keeps running period totals (``agent.ledger.postgres_totals``)


def readable_schema(db: Connection, where: str) -> int:
    """The schema version of the database at ``where`` a read-only ledger may read; refused, saying what to do,
    otherwise."""
    row = db.execute("SELECT to_regclass('leadtime_schema_migrations') IS NOT NULL").fetchone()
    if row is None or not row[0]:
        raise NoLedgerSchema(
            f"the PostgreSQL ledger at {where} holds no leadtime ledger yet (no leadtime_schema_migrations "
            "table): the daemon creates it when it first starts (or `leadtime ledger import-sqlite` does); a "
            "command that only reads the ledger does not"
        )
    current = held_schema(db, where)
    if current < READABLE_FROM:
        raise LedgerUnavailable(
            f"the PostgreSQL ledger at {where} has schema {current}, older than this release reads "
            f"({READABLE_FROM} to {SCHEMA_VERSION}), and a command that only reads the ledger does not upgrade "
            "it: upgrade the daemon that writes it first (it migrates the schema when it starts), or run the "
            "leadtime release that daemon runs"
        )
    return current


def held_schema(db: Connection, where: str) -> int:
    """The schema version the database holds; a newer one than this release knows is refused."""
    row = db.execute("SELECT COALESCE(max(version), 0) FROM leadtime_schema_migrations").fetchone()
    current = int(row[0]) if row is not None else 0
    if current > SCHEMA_VERSION:
        raise LedgerUnavailable(
            f"the PostgreSQL ledger at {where} has schema {current}, newer than this release knows "
            f"({SCHEMA_VERSION}): run a newer leadtime"
        )
    return current


def migrate(db: Connection, where: str) -> Spans:
    """Apply the migrations the database at ``where`` has not had yet, under the migration lock; whether the span
    columns are there after it (``_add_spans``)."""
    with db.transaction():
        db.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        db.execute(
            "CREATE TABLE IF NOT EXISTS leadtime_schema_migrations"
            " (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        current = held_schema(db, where)
        for version, statements in MIGRATIONS:
            if version > current:
                for statement in statements:
                    db.execute(statement)
                db.execute("INSERT INTO leadtime_schema_migrations (version) VALUES (%s)", (version,))
        if has_spans(db):  # checked first: ALTER TABLE locks the table even when it changes nothing
            return Spans.PRESENT
        return _add_spans(db, where)


class Spans(enum.Enum):
    """Whether the reservations table has the span columns (``SPANS``), and why not."""

    PRESENT = "present"
    NOT_OWNER = "not-owner"  # this role does not own the table
    HELD = "held"  # another session held the table longer than SPANS_LOCK_TIMEOUT


class SpanColumns:
    """The span columns of one ledger while it runs: where the open could not add them, added again at most every
    ``SPANS_RETRY`` (``retry``), as the table's owner may be given to this role and a report or a dump ends."""

    def __init__(self, where: str, monotonic: Callable[[], float]) -> None:
        self.state = Spans.PRESENT
        self._where = where
        self._monotonic = monotonic
        self._tried = 0.0

    def opened(self, state: Spans) -> None:
        self.state, self._tried = state, self._monotonic()

    def retry(self, db: Connection) -> None:
        """Add them if they are still missing and ``SPANS_RETRY`` has passed since the last try: in a transaction of
        its own, so under no lock of ours (every other agent's reads of the table queue behind the ALTER's wait), and
        not while another session holds the table (the try is left to the next ``SPANS_RETRY``)."""
        if self.state is Spans.PRESENT or self._monotonic() - self._tried < SPANS_RETRY.total_seconds():
            return
        self._tried = self._monotonic()
        if has_spans(db):
            self.state = Spans.PRESENT
        elif _held_by_others(db):
            return  # not queued behind the holder: every other agent's reads of the table would queue behind it
        else:
            self.state = _add_spans(db, self._where, self.state)
        if self.state is Spans.PRESENT:
            log.info(
                "the PostgreSQL ledger at %s: leadtime_budget_reservations has its span columns now; budget "
                "reservations record the span they pay for from now on",
                self._where,
            )


_told_owner: set[str] = set()  # the ledgers whose owner was told to add the spans, told once per process


def _add_spans(db: Connection, where: str, told: Spans | None = None) -> Spans:
    """Add the span columns (``SPANS``) in a savepoint (a transaction of its own outside one); left out, the ledger
    going on without them, when this role does not own the table or another session holds it. Says so unless this
    ledger was last ``told`` the same. Not sent without the owner's rights: the server logs each refusal as an
    ERROR."""
    if not _owns_reservations(db):
        return _not_owner(where)
    try:
        with db.transaction():
            db.execute(f"SET LOCAL lock_timeout = '{SPANS_LOCK_TIMEOUT}'")
            db.execute(SPANS)
    except errors.InsufficientPrivilege:  # the owner changed since the check
        return _not_owner(where)
    except errors.LockNotAvailable:
        if told is not Spans.HELD:
            log.warning(
                "the PostgreSQL ledger at %s: another session holds leadtime_budget_reservations (a report or a dump "
                "in a transaction), so `%s` waited %s and was left; budget reservations are recorded without the "
                "span they pay for (agents with different commit horizons count each other's over their own) until "
                "it succeeds: this agent tries again every %s, or its owner may run it",
                where,
                SPANS,
                SPANS_LOCK_TIMEOUT,
                _RETRY_TEXT,
            )
        return Spans.HELD
    return Spans.PRESENT


def _not_owner(where: str) -> Spans:
    if where not in _told_owner:
        _told_owner.add(where)
        log.warning(
            "the PostgreSQL ledger at %s: this role does not own leadtime_budget_reservations, so budget "
            "reservations are recorded without the span they pay for, as the release before records them (agents "
            "with different commit horizons count each other's over their own); its owner should run `%s` (or "
            "`ALTER TABLE leadtime_budget_reservations OWNER TO <this role>`): this agent tries again every %s "
            "and its reservations record their spans from then on, without a restart",
            where,
            SPANS,
            _RETRY_TEXT,
        )
    return Spans.NOT_OWNER


def _owns_reservations(db: Connection) -> bool:
    """Whether this role may alter the reservations table (it owns it, or has the rights of a role that does)."""
    row = db.execute(
        "SELECT pg_has_role(c.relowner, 'USAGE') FROM pg_class c WHERE c.oid = 'leadtime_budget_reservations'::regclass"
    ).fetchone()
    return row is not None and bool(row[0])


def _held_by_others(db: Connection) -> bool:
    """Whether another session holds a lock on the reservations table now (an ALTER would queue behind it, and every
    read of the table behind the ALTER). The lock timeout still bounds a lock taken between this and the ALTER."""
    row = db.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE relation = 'leadtime_budget_reservations'::regclass"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        " AND granted AND pid <> pg_backend_pid())"
    ).fetchone()
    return row is not None and bool(row[0])


def has_spans(db: Connection) -> bool:
    """Whether the reservations table has the columns of the spans its reservations pay for (``SPANS``)."""
    row = db.execute(
        "SELECT count(*) FROM information_schema.columns WHERE table_name = 'leadtime_budget_reservations'"
        " AND column_name IN ('covers_from_us', 'covers_until_us') AND table_schema = current_schema()"
    ).fetchone()
    return row is not None and int(row[0]) == 2

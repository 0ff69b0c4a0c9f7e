"""The PostgreSQL ledger: spend entries in a database that replicas, restarts and agents in other clusters share.

The same rules as the SQLite ledger: entries keyed by (pool, start), times as integer microseconds since the Unix
epoch (UTC), what a repeated key stores decided by ``accrual.resolve``. Every write is one transaction that first
takes a transaction-scoped advisory lock on the ledger, so writers (several agents, or replicas racing) take turns;
``update`` reads the pools' newest entries after taking it, so no other writer commits between that read and the
write. Readers never wait for the lock.

Budget reservations (``agent.ledger.reservations``) live beside the entries and are decided under the same
writer lock, so two agents racing for the last dollars of a cap take turns and only one can get them. They read
each pool's spend in the period from running totals that triggers keep as entries and billed costs are written
(``agent.ledger.postgres_totals``), not from the period's entries; so do the meter's spend reads
(``spent_in_periods``) and ``spent`` over a span that starts a period whose totals are kept. A dry-run daemon's
shadow account is kept beside them too, one row per account.

The schema is versioned: ``MIGRATIONS`` are applied in order at open, inside one transaction holding another
advisory lock, so two agents starting at once apply each migration exactly once. A database whose schema is newer
than this release knows is refused.

``read_only`` is how the commands that only read the ledger open it (``leadtime recommend``, ``leadtime ledger
budgets``): no migration and no advisory lock, every session's transactions read-only
(``default_transaction_read_only``), so the database refuses a write even if one were asked for, and a role that
may only SELECT can read. The schema is checked instead of upgraded: a newer release's dry run against a
production database must not move its schema past the daemon that writes it (which would then refuse to start).
A schema from ``READABLE_FROM`` on is read as it is (before the running totals, spend is summed from the entries
and billed costs); an older one, or a database no daemon has written yet (``NoLedgerSchema``), is refused,
saying what to do. The password never appears in the URL, the settings or any message: it is
passed to the driver separately. psycopg errors are translated into ``LedgerUnavailable`` here; after a lost
connection the next call connects again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, LiteralString, TypeVar

import psycopg

from agent.ledger import postgres_totals as totals
from agent.ledger.accrual import GRID, is_mark, resolve
from agent.ledger.base import Newest
from agent.ledger.billed import BilledCost, Reconciliation, on_grid
from agent.ledger.folding import Folded, entries_on_grid, fold
from agent.ledger.period_spend import SpendAsk
from agent.ledger.reservations import Grant, ReservationRequest
from agent.ledger.retention import BATCH, Pruning
from agent.ledger.rows import COLUMNS, from_row, from_us, to_row, to_us
from models import LedgerEntry, LedgerUnavailable, NoLedgerSchema

# Advisory lock keys (64-bit): "LDTGMIGR" serialises migrations, "LDTGWRIT" serialises writers.
_MIGRATION_LOCK = 0x4C44_5447_4D49_4752
_WRITE_LOCK = 0x4C44_5447_5752_4954
_ENTRIES: LiteralString = "leadtime_ledger_entries"
_BILLED: LiteralString = "leadtime_billed_costs"

T = TypeVar("T")
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
READABLE_FROM = 4  # the oldest schema a read-only ledger reads: billed costs came in 4
_TOTALS_FROM = 5  # the schema that keeps running period totals (``agent.ledger.postgres_totals``)

# Spend summed from the entries and billed costs, for a schema without running totals (read-only, see above).
_SPENT_SUMMED = f"""SELECT COALESCE(SUM({totals.spent_of("p.pool_id", "%(start)s", "%(end)s")}), 0.0)
    FROM unnest(%(pools)s::text[]) AS p (pool_id)"""

# The newest entry of each pool named: one index probe per pool, however long its history.
_NEWEST_OF_EACH = f"""
    SELECT e.* FROM unnest(%b::text[]) AS p (pool_id)
    CROSS JOIN LATERAL (
        SELECT {COLUMNS} FROM leadtime_ledger_entries AS x WHERE x.pool_id = p.pool_id
        ORDER BY x.end_us DESC, x.start_us DESC LIMIT 1
    ) AS e"""

# The newest charged entry (not a mark) of each pool named that ends at the given end (its newest entry's).
_CHARGED_ENDING = f"""
    SELECT e.* FROM unnest(%b::text[], %b::bigint[]) AS p (pool_id, end_us)
    CROSS JOIN LATERAL (
        SELECT {COLUMNS} FROM leadtime_ledger_entries AS x
        WHERE x.pool_id = p.pool_id AND x.end_us = p.end_us AND x.start_us < x.end_us
        ORDER BY x.start_us DESC LIMIT 1
    ) AS e"""

# The earliest start of each pool named among its entries and billed costs: one probe of each primary key per pool.
_SINCE = """
    SELECT p.pool_id, LEAST(
        (SELECT min(e.start_us) FROM leadtime_ledger_entries AS e WHERE e.pool_id = p.pool_id),
        (SELECT min(b.start_us) FROM leadtime_billed_costs AS b WHERE b.pool_id = p.pool_id))
    FROM unnest(%s::text[]) AS p (pool_id)"""


# No call waits for ever: a statement (a wait for the writer lock included) that takes longer fails, so the tick
# fails, holds the pools and alerts instead of hanging while the lease is still renewed; a session of ours left
# idle inside a transaction is ended by the server, so it cannot hold the writer lock for everyone; and keepalives
# on both ends notice a peer that vanished in minutes, not after the kernel's two hours.
STATEMENT_TIMEOUT = timedelta(seconds=20)
IDLE_IN_TRANSACTION_TIMEOUT = timedelta(seconds=60)
_KEEPALIVE = {"keepalives": "1", "keepalives_idle": "30", "keepalives_interval": "10", "keepalives_count": "3"}


def _session_limits(statement_timeout: timedelta, read_only: bool = False) -> dict[str, str]:
    settings: dict[str, object] = {
        "statement_timeout": int(statement_timeout / timedelta(milliseconds=1)),
        "idle_in_transaction_session_timeout": int(IDLE_IN_TRANSACTION_TIMEOUT / timedelta(milliseconds=1)),
        "tcp_keepalives_idle": _KEEPALIVE["keepalives_idle"],
        "tcp_keepalives_interval": _KEEPALIVE["keepalives_interval"],
        "tcp_keepalives_count": _KEEPALIVE["keepalives_count"],
    }
    if read_only:
        settings["default_transaction_read_only"] = "on"
    return _KEEPALIVE | {"options": " ".join(f"-c {name}={value}" for name, value in settings.items())}


class PostgresLedger:
    """A ledger in the PostgreSQL database at ``url`` (``postgresql://USER@HOST:PORT/DATABASE``, no password);
    ``read_only``: read as it is, never migrated or written (see the module's docstring). ``retention``: how long a
    history ``update`` keeps (``agent.ledger.retention``; ``None``: all of it)."""

    def __init__(
        self,
        url: str,
        password: str | None = None,
        *,
        connect_timeout: timedelta = timedelta(seconds=10),
        options: dict[str, str] | None = None,
        statement_timeout: timedelta = STATEMENT_TIMEOUT,
        read_only: bool = False,
        retention: timedelta | None = None,
    ) -> None:
        self._pruning = Pruning(retention)
        self._url = url
        self._password = password
        self._connect_timeout = max(1, int(connect_timeout.total_seconds()))
        self._options = dict(options or {}) | _session_limits(statement_timeout, read_only)
        self._lock = threading.Lock()
        self._db: Connection | None = None
        self.where = _describe(url)
        self.read_only = read_only
        self.schema = SCHEMA_VERSION  # what the open found (read-only) or left (migrated)
        with self._lock:
            try:
                if read_only:
                    self.schema = self._run("read", self._readable_schema)
                else:
                    self._run("migrate", self._migrate)
            except BaseException:
                self._close()
                raise

    # -- Ledger -------------------------------------------------------------------------------------------
    def record(self, entry: LedgerEntry) -> None:
        self.record_many([entry])

    def record_many(self, entries: Sequence[LedgerEntry]) -> None:
        if entries:  # cut on the grid, so an entry across cells counts in each (agent.ledger.folding)
            pieces = entries_on_grid(entries)
            self._update([], lambda _: pieces, folding=False)

    def update(self, pools: Sequence[str], derive: Callable[[Newest], Sequence[LedgerEntry]]) -> None:
        """Charged intervals are folded into the pool's newest charged entry where they continue it
        (``agent.ledger.folding``)."""
        self._update(pools, derive, folding=True)

    def _update(
        self, pools: Sequence[str], derive: Callable[[Newest], Sequence[LedgerEntry]], *, folding: bool
    ) -> None:
        def write(db: Connection) -> None:
            with db.transaction():
                db.execute("SELECT pg_advisory_xact_lock(%s)", (_WRITE_LOCK,))
                newest: dict[str, LedgerEntry | None] = dict.fromkeys(pools)
                if pools:
                    rows = db.execute(_NEWEST_OF_EACH, (list(pools),)).fetchall()
                    newest.update({str(row[0]): from_row(row) for row in rows})
                entries = derive(dict(newest))
                folded = fold(_charged(db, newest), entries) if folding else Folded(tuple(entries))
                _write(db, folded.entries, newest)
                _extend(db, folded)
                cutoff = self._pruning.due(folded.entries) if folding else None
                if cutoff is not None:
                    self._pruning.removed(cutoff, _prune(db, cutoff))

        with self._lock:
            self._run("write", write)

    def spent(self, pools: Sequence[str], start: datetime, end: datetime) -> float:
        """Billed cost where the pool's spend was billed (``agent.ledger.billed``), estimated spend elsewhere."""
        wanted = sorted(set(pools))
        if not wanted:
            return 0.0
        query = totals.SPENT if self.schema >= _TOTALS_FROM else _SPENT_SUMMED
        rows = self._query(query, {"pools": wanted, "start": to_us(start), "end": to_us(end)})
        return float(rows[0][0])

    def spent_in_periods(self, asks: Sequence[SpendAsk], now: datetime) -> list[float]:
        """From the running totals of the asks' periods (``agent.ledger.postgres_totals``), added when missing as
        a reservation adds them; an ask whose ``until`` lies outside its period is summed as ``spent`` sums. A
        read-only ledger adds nothing: each ask is read as ``spent`` reads it (from a total where one is kept)."""
        if self.read_only:
            return [self.spent(a.pools, a.period_start, a.until) for a in asks]
        inside = [a for a in asks if a.within]
        with self._lock:
            found = iter(
                self._run(
                    "read",
                    lambda db: totals.so_far(db, inside, now, lock=_take_write_lock),
                )
            )
        return [next(found) if a.within else self.spent(a.pools, a.period_start, a.until) for a in asks]

    # -- billed costs (agent.ledger.billed) ---------------------------------------------------------------
    def estimated(self, pools: Sequence[str], start: datetime, end: datetime) -> float:
        return self._sum("leadtime_ledger_entries", pools, start, end)

    def billed(self, pools: Sequence[str], start: datetime, end: datetime) -> float:
        return self._sum("leadtime_billed_costs", pools, start, end)

    def record_billed(self, costs: Sequence[BilledCost]) -> None:
        """One transaction under the writer lock: the intervals the pieces overlap go, the pieces come in. A stored
        interval a piece overlaps starts less than the pool's longest stored interval before the piece does, which
        bounds the search for it to a range of the primary key (else each piece would look at every later one)."""
        if not costs:
            return
        costs = on_grid(costs)
        columns = [
            [c.pool_id for c in costs],
            [to_us(c.start) for c in costs],
            [to_us(c.end) for c in costs],
            [c.cost_usd for c in costs],
        ]

        def write(db: Connection) -> None:
            with db.transaction():
                db.execute("SELECT pg_advisory_xact_lock(%s)", (_WRITE_LOCK,))
                db.execute(
                    "DELETE FROM leadtime_billed_costs AS b USING unnest(%s::text[], %s::bigint[], %s::bigint[])"
                    " AS n (pool_id, start_us, end_us)"
                    " WHERE b.pool_id = n.pool_id AND b.start_us < n.end_us AND b.end_us > n.start_us"
                    " AND b.start_us > n.start_us - GREATEST(%s, (SELECT max(l.end_us - l.start_us)"
                    " FROM leadtime_billed_costs AS l WHERE l.pool_id = ANY(%s)))",
                    [*columns[:3], GRID // timedelta(microseconds=1), columns[0]],
                )
                db.execute(
                    "INSERT INTO leadtime_billed_costs (pool_id, start_us, end_us, cost_usd)"
                    " SELECT * FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::float8[])",
                    columns,
                )

        with self._lock:
            self._run("write", write)

    def reconcile(self, pools: Sequence[str], start: datetime, end: datetime) -> list[Reconciliation]:
        wanted = sorted(set(pools))
        if not wanted:
            return []
        rows = self._query(
            "SELECT b.pool_id, SUM(b.end_us - b.start_us) / 3.6e9, SUM((SELECT COALESCE(SUM(e.cost_usd), 0.0)"
            " FROM leadtime_ledger_entries AS e"
            " WHERE e.pool_id = b.pool_id AND e.start_us >= b.start_us AND e.start_us < b.end_us)), SUM(b.cost_usd)"
            " FROM leadtime_billed_costs AS b WHERE b.pool_id = ANY(%s) AND b.start_us >= %s AND b.start_us < %s"
            " GROUP BY b.pool_id ORDER BY b.pool_id",
            (wanted, to_us(start), to_us(end)),
        )
        return [Reconciliation(str(p), float(h), float(e), float(b)) for p, h, e, b in rows]

    def _sum(self, table: LiteralString, pools: Sequence[str], start: datetime, end: datetime) -> float:
        wanted = sorted(set(pools))
        if not wanted:
            return 0.0
        rows = self._query(
            f"SELECT COALESCE(SUM(cost_usd), 0.0) FROM {table}"
            " WHERE pool_id = ANY(%s) AND start_us >= %s AND start_us < %s",
            (wanted, to_us(start), to_us(end)),
        )
        return float(rows[0][0])

    def last_entry(self, pool_id: str) -> LedgerEntry | None:
        rows = self._query(
            f"SELECT {COLUMNS} FROM leadtime_ledger_entries WHERE pool_id = %s"
            " ORDER BY end_us DESC, start_us DESC LIMIT 1",
            (pool_id,),
        )
        return from_row(rows[0]) if rows else None

    def recorded_since(self, pools: Sequence[str]) -> dict[str, datetime]:
        """The earliest start of each pool's entries and billed costs (``LEAST`` skips a pool's missing one)."""
        rows = self._query(_SINCE, (sorted(set(pools)),))
        return {str(pool): from_us(int(first)) for pool, first in rows if first is not None}

    # -- Reservations (see agent.ledger.reservations) ------------------------------------------------------
    def reserve(self, request: ReservationRequest, now: datetime) -> Grant:
        return self.reserve_many([request], now)[0]

    def reserve_many(
        self,
        requests: Sequence[ReservationRequest],
        now: datetime,
        replacing: Sequence[int] = (),
        replacing_holder: str | None = None,
    ) -> list[Grant]:
        """Decide the requests in order, in one transaction: each sees the grants before it; the reservations
        ``replacing`` names, and those ``replacing_holder`` holds (whichever session made them), are released in it
        first."""

        def decide(db: Connection) -> list[Grant]:
            names = sorted({k for r in requests for k in r.keys})
            with db.transaction():
                db.execute("SELECT pg_advisory_xact_lock(%s)", (_WRITE_LOCK,))
                db.execute(
                    "DELETE FROM leadtime_budget_reservations WHERE (budget = ANY(%s) AND expires_us <= %s)"
                    " OR id = ANY(%s) OR holder = %s",
                    (names, to_us(now), list(replacing), replacing_holder),
                )
                reserved = dict.fromkeys(names, 0.0)
                for budget, amount in db.execute(
                    "SELECT budget, SUM(amount_usd) FROM leadtime_budget_reservations"
                    " WHERE budget = ANY(%s) GROUP BY budget",
                    (names,),
                ).fetchall():
                    reserved[str(budget)] = float(amount)
                recorded = totals.recorded(db, requests, now)
                grants: list[Grant] = []
                rows: list[tuple[str, str, float, int, int]] = []
                for i, request in enumerate(requests):
                    headroom = request.cap_usd - recorded[i] - sum(reserved[k] for k in request.keys)
                    if request.amount_usd > headroom:
                        grants.append(Grant(None, headroom))
                        continue
                    reserved[request.budget] += request.amount_usd
                    grants.append(Grant(len(rows), headroom))  # the row's place until the database numbers it
                    rows.append(
                        (request.budget, request.holder, request.amount_usd, to_us(now), to_us(now + request.ttl))
                    )
                if not rows:
                    return grants
                ids = sorted(  # numbered in insertion order: every insert holds the writer lock
                    int(r[0])
                    for r in db.execute(
                        "INSERT INTO leadtime_budget_reservations (budget, holder, amount_usd, created_us, expires_us)"
                        " SELECT r.budget, r.holder, r.amount_usd, r.created_us, r.expires_us"
                        " FROM unnest(%s::text[], %s::text[], %s::float8[], %s::bigint[], %s::bigint[])"
                        " WITH ORDINALITY AS r (budget, holder, amount_usd, created_us, expires_us, n) ORDER BY r.n"
                        " RETURNING id",
                        [list(column) for column in zip(*rows, strict=True)],
                    ).fetchall()
                )
                return [g if g.reservation_id is None else Grant(ids[g.reservation_id], g.headroom_usd) for g in grants]

        if not requests and replacing_holder is None:
            self.release(replacing)
            return []
        with self._lock:
            return self._run("reserve in", decide)

    def release(self, reservation_ids: Sequence[int]) -> None:
        if not reservation_ids:
            return
        with self._lock:
            self._run(
                "release in",
                lambda db: db.execute(
                    "DELETE FROM leadtime_budget_reservations WHERE id = ANY(%s)", (list(reservation_ids),)
                ),
            )

    def reserved(self, budget: str, now: datetime) -> float:
        rows = self._query(
            "SELECT COALESCE(SUM(amount_usd), 0.0) FROM leadtime_budget_reservations"
            " WHERE budget = %s AND expires_us > %s",
            (budget, to_us(now)),
        )
        return float(rows[0][0])

    # -- reading back, closing ----------------------------------------------------------------------------
    def load_shadow(self, name: str) -> str | None:
        """The saved shadow account of a dry-run daemon (``agent.daemon.shadow_book``), if there is one."""
        rows = self._query("SELECT body FROM leadtime_shadow_accounts WHERE name = %s", (name,))
        return str(rows[0][0]) if rows else None

    def save_shadow(self, name: str, body: str, now: datetime) -> None:
        """Replace the saved shadow account ``name``; one statement, so a crash keeps the old one or the new."""
        with self._lock:
            self._run(
                "write",
                lambda db: db.execute(
                    "INSERT INTO leadtime_shadow_accounts (name, body, saved_us) VALUES (%s, %s, %s)"
                    " ON CONFLICT (name) DO UPDATE SET body = EXCLUDED.body, saved_us = EXCLUDED.saved_us",
                    (name, body, to_us(now)),
                ),
            )

    def entries(self, pool_id: str | None = None) -> list[LedgerEntry]:
        where, args = ("WHERE pool_id = %s", (pool_id,)) if pool_id is not None else ("", ())
        rows = self._query(f"SELECT {COLUMNS} FROM leadtime_ledger_entries {where} ORDER BY start_us, pool_id", args)
        return [from_row(r) for r in rows]

    def schema_version(self) -> int:
        return int(self._query("SELECT max(version) FROM leadtime_schema_migrations", ())[0][0])

    def close(self) -> None:
        with self._lock:
            self._close()

    def __enter__(self) -> PostgresLedger:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------------------------
    def _connection(self) -> Connection:
        if self._db is None or self._db.closed or self._db.broken:
            if self._db is not None:
                self._db.close()
            self._db = None
            self._db = psycopg.connect(
                psycopg.conninfo.make_conninfo(self._url, **self._options),
                password=self._password,
                connect_timeout=self._connect_timeout,
                application_name="leadtime",
                autocommit=True,
            )
        return self._db

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _run(self, action: str, work: Callable[[Connection], T]) -> T:
        if self.read_only and action != "read":
            raise LedgerUnavailable(
                f"cannot {action} the PostgreSQL ledger at {self.where}: it was opened read-only (nothing is written)"
            )
        try:
            return work(self._connection())
        except psycopg.Error as exc:
            raise LedgerUnavailable(f"cannot {action} the PostgreSQL ledger at {self.where}: {_reason(exc)}") from None

    def _query(self, query: str, args: Sequence[object] | Mapping[str, object]) -> list[tuple[Any, ...]]:
        params = dict(args) if isinstance(args, Mapping) else tuple(args)
        with self._lock:
            return self._run("read", lambda db: db.execute(query, params).fetchall())

    def _readable_schema(self, db: Connection) -> int:
        """The schema version of a database a read-only ledger may read; refused, saying what to do, otherwise."""
        row = db.execute("SELECT to_regclass('leadtime_schema_migrations') IS NOT NULL").fetchone()
        if row is None or not row[0]:
            raise NoLedgerSchema(
                f"the PostgreSQL ledger at {self.where} holds no leadtime ledger yet (no leadtime_schema_migrations "
                "table): the daemon creates it when it first starts (or `leadtime ledger import-sqlite` does); a "
                "command that only reads the ledger does not"
            )
        current = self._schema_version(db)
        if current < READABLE_FROM:
            raise LedgerUnavailable(
                f"the PostgreSQL ledger at {self.where} has schema {current}, older than this release reads "
                f"({READABLE_FROM} to {SCHEMA_VERSION}), and a command that only reads the ledger does not upgrade "
                "it: upgrade the daemon that writes it first (it migrates the schema when it starts), or run the "
                "leadtime release that daemon runs"
            )
        return current

    def _schema_version(self, db: Connection) -> int:
        """The schema version the database holds; a newer one than this release knows is refused."""
        row = db.execute("SELECT COALESCE(max(version), 0) FROM leadtime_schema_migrations").fetchone()
        current = int(row[0]) if row is not None else 0
        if current > SCHEMA_VERSION:
            raise LedgerUnavailable(
                f"the PostgreSQL ledger at {self.where} has schema {current}, newer than this release knows "
                f"({SCHEMA_VERSION}): run a newer leadtime"
            )
        return current

    def _migrate(self, db: Connection) -> None:
        with db.transaction():
            db.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            db.execute(
                "CREATE TABLE IF NOT EXISTS leadtime_schema_migrations"
                " (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            current = self._schema_version(db)
            for version, statements in MIGRATIONS:
                if version > current:
                    for statement in statements:
                        db.execute(statement)
                    db.execute("INSERT INTO leadtime_schema_migrations (version) VALUES (%s)", (version,))


def _take_write_lock(db: Connection) -> None:
    db.execute("SELECT pg_advisory_xact_lock(%s)", (_WRITE_LOCK,))


def _write(db: Connection, entries: Sequence[LedgerEntry], newest: Mapping[str, LedgerEntry | None]) -> None:
    """Store ``entries`` as ``resolve`` says: first folded within the batch with ``resolve`` itself, then against
    what is stored. ``newest`` holds the newest stored entry of some pools, read in this transaction: an entry of
    one of them that starts after that one ends has no stored entry of its key (no stored entry ends before it
    starts), so those are copied in; the others go through one upsert whose condition is ``resolve``'s rule in
    SQL (a stored real entry is kept; a stored mark gives way to a real entry or to a mark with more units). The
    contract tests hold both to the same results as the other ledgers."""
    if not entries:
        return
    batch: dict[tuple[str, datetime], LedgerEntry] = {}
    for entry in entries:
        key = (entry.pool_id, entry.start)
        kept = resolve(batch.get(key), entry)
        if kept is not None:
            batch[key] = kept
    fresh: list[tuple[str, int, int, int, float]] = []
    known: list[tuple[str, int, int, int, float]] = []
    for entry in batch.values():
        read, last = entry.pool_id in newest, newest.get(entry.pool_id)
        (fresh if read and (last is None or entry.start > last.end) else known).append(to_row(entry))
    if fresh:
        with (
            db.cursor() as cursor,
            cursor.copy(f"COPY leadtime_ledger_entries ({COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy,
        ):
            copy.set_types(["text", "int8", "int8", "int4", "float8"])
            for row in fresh:
                copy.write_row(row)
    if known:
        db.execute(
            f"INSERT INTO leadtime_ledger_entries AS x ({COLUMNS})"
            " SELECT * FROM unnest(%b::text[], %b::bigint[], %b::bigint[], %b::integer[], %b::float8[])"
            " ON CONFLICT (pool_id, start_us) DO UPDATE SET end_us = EXCLUDED.end_us,"
            " units = EXCLUDED.units, cost_usd = EXCLUDED.cost_usd"
            " WHERE x.end_us = x.start_us AND (EXCLUDED.end_us > EXCLUDED.start_us OR EXCLUDED.units > x.units)",
            [list(column) for column in zip(*known, strict=True)],
        )


def _charged(db: Connection, newest: Mapping[str, LedgerEntry | None]) -> dict[str, LedgerEntry | None]:
    """The newest charged entry of each pool when it ends where the pool's newest entry does (``folding.fold``)."""
    charged = {pool: last for pool, last in newest.items() if last is None or not is_mark(last)}
    marked = [(pool, to_us(last.end)) for pool, last in newest.items() if last is not None and is_mark(last)]
    if marked:
        rows = db.execute(_CHARGED_ENDING, [list(column) for column in zip(*marked, strict=True)]).fetchall()
        charged.update({str(row[0]): from_row(row) for row in rows})
    return charged


# Rows of a table that end at or before the cutoff, but each pool's earliest; at most a batch of them.
_PRUNE = """DELETE FROM {table} AS x USING (
        SELECT o.pool_id, o.start_us FROM {table} AS o
        WHERE o.end_us <= %(cutoff)s AND o.start_us < %(cutoff)s
            AND o.start_us > (SELECT min(f.start_us) FROM {table} AS f WHERE f.pool_id = o.pool_id)
        LIMIT %(batch)s) AS d
    WHERE x.pool_id = d.pool_id AND x.start_us = d.start_us"""


def _prune(db: Connection, cutoff: datetime) -> int:
    """Remove up to a batch of entries and of billed costs that end at or before ``cutoff``, but each pool's
    earliest of each (``agent.ledger.retention``); the most rows removed from either table."""
    args = {"cutoff": to_us(cutoff), "batch": BATCH}
    return max(db.execute(_PRUNE.format(table=table), args).rowcount for table in (_ENTRIES, _BILLED))


def _extend(db: Connection, folded: Folded) -> None:
    """Extend the stored entries ``folded`` extends and remove the opening marks it folded over."""
    if folded.extended:
        rows = [
            (stored.pool_id, to_us(stored.start), to_us(stored.end), to_us(new.end), new.cost_usd)
            for stored, new in folded.extended
        ]
        db.execute(
            "UPDATE leadtime_ledger_entries AS x SET end_us = n.new_end_us, cost_usd = n.cost_usd"
            " FROM unnest(%b::text[], %b::bigint[], %b::bigint[], %b::bigint[], %b::float8[])"
            " AS n (pool_id, start_us, end_us, new_end_us, cost_usd)"
            " WHERE x.pool_id = n.pool_id AND x.start_us = n.start_us AND x.end_us = n.end_us",
            [list(column) for column in zip(*rows, strict=True)],
        )
    if folded.dropped:
        marks = [(pool, to_us(start)) for pool, start in folded.dropped]
        db.execute(
            "DELETE FROM leadtime_ledger_entries AS x USING unnest(%b::text[], %b::bigint[]) AS n (pool_id, start_us)"
            " WHERE x.pool_id = n.pool_id AND x.start_us = n.start_us AND x.end_us = x.start_us",
            [list(column) for column in zip(*marks, strict=True)],
        )


def _describe(url: str) -> str:
    """Host, port and database of the URL, for messages (never user or password)."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error:
        return "the configured url"
    return f"{info.get('host', '?')}:{info.get('port', 5432)}/{info.get('dbname', '?')}"


def _reason(exc: psycopg.Error) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else 'no detail'}"

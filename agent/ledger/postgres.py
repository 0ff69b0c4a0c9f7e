"""The PostgreSQL ledger: spend entries in a database that replicas, restarts and agents in other clusters share.

The same rules as the SQLite ledger: entries keyed by (pool, start), times as integer microseconds since the Unix
epoch (UTC), what a repeated key stores decided by ``accrual.resolve``. Every write is one transaction that first
takes a transaction-scoped advisory lock on the ledger, so writers (several agents, or replicas racing) take turns;
``update`` reads the pools' newest entries after taking it, so no other writer commits between that read and the
write (``agent.ledger.postgres_writes``). Readers never wait for the lock.

Budget reservations live beside the entries and are decided under the same writer lock
(``agent.ledger.postgres_reservations``). They read each pool's spend in the period from running totals that
triggers keep as entries and billed costs are written (``agent.ledger.postgres_totals``), not from the period's
entries; so do the meter's spend reads (``spent_in_periods``) and ``spent`` over a span that starts a period whose
totals are kept. A dry-run daemon's shadow account is kept beside them too, one row per account.

The schema is versioned and migrated at open (``agent.ledger.postgres_schema``); span columns the open could not add
are tried again before a reservation, at most every ``postgres_schema.SPANS_RETRY`` (``monotonic`` times it).

``read_only`` is how the commands that only read the ledger open it (``leadtime recommend``, ``leadtime ledger
budgets``): no migration and no advisory lock, every session's transactions read-only
(``default_transaction_read_only``), so the database refuses a write even if one were asked for, and a role that
may only SELECT can read. The schema is checked instead of upgraded: a newer release's dry run against a
production database must not move its schema past the daemon that writes it (which would then refuse to start).
A schema from ``postgres_schema.READABLE_FROM`` on is read as it is (before the running totals, spend is summed
from the entries and billed costs). The password never appears in the URL, the settings or any message: it is
passed to the driver separately. psycopg errors are translated into ``LedgerUnavailable`` here; after a lost
connection the next call connects again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, LiteralString, TypeVar

import psycopg

from agent.ledger import postgres_reservations as reservations
from agent.ledger import postgres_schema as schema
from agent.ledger import postgres_totals as totals
from agent.ledger import postgres_writes as writes
from agent.ledger.accrual import GRID
from agent.ledger.base import Newest
from agent.ledger.billed import BilledCost, Reconciliation, on_grid
from agent.ledger.folding import Folded, entries_on_grid, fold
from agent.ledger.period_spend import SpendAsk
from agent.ledger.postgres_writes import Connection
from agent.ledger.reservations import Choose, CountedTo, Grant, Holder, OthersRead, ReservationRequest
from agent.ledger.retention import Pruning
from agent.ledger.rows import COLUMNS, from_row, from_us, to_us
from models import LedgerEntry, LedgerUnavailable

T = TypeVar("T")

# Spend summed from the entries and billed costs, for a schema without running totals (read-only, see above).
_SPENT_SUMMED = f"""SELECT COALESCE(SUM({totals.spent_of("p.pool_id", "%(start)s", "%(end)s")}), 0.0)
    FROM unnest(%(pools)s::text[]) AS p (pool_id)"""

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
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pruning = Pruning(retention, "the database server's clock")
        self._url = url
        self._password = password
        self._connect_timeout = max(1, int(connect_timeout.total_seconds()))
        self._options = dict(options or {}) | _session_limits(statement_timeout, read_only)
        self._lock = threading.Lock()
        self._db: Connection | None = None
        self.where = _describe(url)
        self.read_only = read_only
        self.schema = schema.SCHEMA_VERSION  # what the open found (read-only) or left (migrated)
        self.spans = schema.SpanColumns(self.where, monotonic)
        with self._lock:
            try:
                if read_only:
                    self.schema = self._run("read", lambda db: schema.readable_schema(db, self.where))
                else:
                    self.spans.opened(self._run("migrate", lambda db: schema.migrate(db, self.where)))
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
                writes.take_write_lock(db)
                newest = writes.newest_of_each(db, pools)
                entries = derive(dict(newest))
                folded = fold(writes.charged(db, newest), entries) if folding else Folded(tuple(entries))
                writes.write(db, folded.entries, newest)
                writes.extend(db, folded)
                cutoff = self._pruning.due(folded.entries, lambda: writes.server_now(db)) if folding else None
                if cutoff is not None:
                    self._pruning.removed(cutoff, writes.prune(db, cutoff))

        with self._lock:
            self._run("write", write)

    def spent(self, pools: Sequence[str], start: datetime, end: datetime) -> float:
        """Billed cost where the pool's spend was billed (``agent.ledger.billed``), estimated spend elsewhere."""
        wanted = sorted(set(pools))
        if not wanted:
            return 0.0
        query = totals.SPENT if self.schema >= schema.TOTALS_FROM else _SPENT_SUMMED
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
                    lambda db: totals.so_far(db, inside, now, lock=writes.take_write_lock),
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
                writes.take_write_lock(db)
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

    def billed_intervals(self, pools: Sequence[str], start: datetime, end: datetime) -> list[BilledCost]:
        """Found by their ends (the index on pool and end): only the pieces ending after ``start`` are read."""
        wanted = sorted(set(pools))
        if not wanted:
            return []
        rows = self._query(
            "SELECT pool_id, start_us, end_us, cost_usd FROM leadtime_billed_costs"
            " WHERE pool_id = ANY(%s) AND end_us > %s AND start_us < %s ORDER BY pool_id, start_us",
            (wanted, to_us(start), to_us(end)),
        )
        return [BilledCost(str(p), from_us(int(lo)), from_us(int(hi)), float(c)) for p, lo, hi, c in rows]

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
        replacing_holder: Holder | None = None,
    ) -> list[Grant]:
        """Decide the requests in order, in one transaction (``agent.ledger.postgres_reservations.decide``)."""
        if not requests and replacing_holder is None:
            self.release(replacing)
            return []
        with self._lock:
            self._run("reserve in", self.spans.retry)  # before the writer lock, in a transaction of its own
            return self._run(
                "reserve in", lambda db: reservations.decide(db, requests, now, replacing, replacing_holder)
            )

    def claim(self, reads: Sequence[OthersRead], choose: Choose, now: datetime) -> tuple[list[float], list[Grant]]:
        """Read and reserve in one transaction under the writer lock (``agent.ledger.postgres_reservations.claim``)."""
        with self._lock:
            self._run("reserve in", self.spans.retry)  # before the writer lock, in a transaction of its own
            return self._run("reserve in", lambda db: reservations.claim(db, reads, choose, now))

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

    def reserved_by_others(
        self,
        budgets: Sequence[str],
        now: datetime,
        holder: Holder,
        mine: Sequence[int] = (),
        to: CountedTo | None = None,
    ) -> float:
        with self._lock:
            return self._run("read", lambda db: reservations.reserved_by_others(db, budgets, now, holder, mine, to))

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

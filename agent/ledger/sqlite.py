"""The SQLite ledger: spend entries in an embedded database file, so spend survives restarts.

Each ``record_many`` and ``update`` is one transaction, so a crash leaves either all of a reading's entries or
none; ``update`` reads the pools' newest entries inside its ``BEGIN IMMEDIATE`` transaction, so no other writer
commits between that read and the write. Times are stored as integer microseconds since the Unix epoch (UTC),
which keeps keys exact and ordering trivial. What a repeated (pool, start) stores is decided by
``accrual.resolve``, the same rule the in-memory ledger follows (``agent.ledger.sqlite_writes``); the file's schema
is ``agent.ledger.sqlite_schema``'s. sqlite3 errors are translated into ``LedgerUnavailable`` here.

Two guards against losing spend without a word (see ``agent.ledger.guard``): a zero-length file is refused
unless ``fresh_if_empty`` (it was a ledger whose contents are gone, or a file created by mistake: either way
month-to-date spend would silently restart at zero), and only one process at a time may open the file for
writing, enforced by an exclusive lock on ``<path>.lock``. Budget reservations are therefore kept in that
process (``agent.ledger.reservations.ReservationBook``), decided as the PostgreSQL ledger decides them.

``read_only`` opens an existing file through a ``mode=ro`` URI, without the writer lock: SQLite itself refuses
every write, and this ledger refuses reservations, so a reader never changes the file (a standby's view of the
file its leader writes, see ``agent.ledger.shared_file``).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from agent.ledger import sqlite_schema as schema
from agent.ledger import sqlite_totals as totals
from agent.ledger import sqlite_writes as writes
from agent.ledger.accrual import GRID
from agent.ledger.base import Newest
from agent.ledger.billed import BilledCost, Reconciliation, on_grid
from agent.ledger.folding import entries_on_grid, fold
from agent.ledger.guard import WriterLock, refuse_empty_file
from agent.ledger.period_spend import SpendAsk
from agent.ledger.reservations import Grant, Holder, InProcessReservations, ReservationBook, ReservationRequest
from agent.ledger.retention import Pruning, SteadyWall
from agent.ledger.rows import COLUMNS, from_row, from_us, to_us
from agent.ledger.sqlite_space import create_incremental, give_back
from models import LedgerEntry, LedgerUnavailable
from models.clock import Clock

# Each pool's earliest entry and billed cost: the smallest start in the pool's range of each primary key.
_EARLIEST = "(SELECT min(start_us) FROM {} WHERE pool_id = p.value)"
_SINCE = "SELECT p.value, {}, {} FROM (SELECT DISTINCT value FROM json_each(?)) AS p"
_SINCE_BILLED = _SINCE.format(_EARLIEST.format("entries"), _EARLIEST.format("billed"))
_SINCE_UNBILLED = _SINCE.format(_EARLIEST.format("entries"), "NULL")  # no billed costs stored (or no table yet)


class SqliteLedger(InProcessReservations):
    """A ledger in the SQLite file at ``path`` (created with its parent directory when missing).

    ``fresh_if_empty`` accepts a zero-length file as a new ledger (read-only: as one its writer is to start);
    without it a reader refuses such a file as the writer does. ``retention``: how long a history ``update`` keeps
    (``agent.ledger.retention``; ``None``: all of it), measured by ``clock``'s wall time carried on its monotonic
    clock (``SteadyWall``; by default the system's) where an entry just recorded ends later. ``exclusive=False``
    skips the writer lock; it is only for a process that reads, or for showing that the write transaction alone
    keeps two writers exact.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        fresh_if_empty: bool = False,
        exclusive: bool = True,
        read_only: bool = False,
        retention: timedelta | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self._pruning = Pruning(retention, "this process's wall time carried on its monotonic clock")
        self._steady = SteadyWall(clock) if retention is not None else None
        self._lock = threading.Lock()
        self._writer: WriterLock | None = None
        self._book = ReservationBook(self._period_spent)
        # Whether billed costs may be stored: a reader of a file its writer has not upgraded yet has none, and the
        # writer (the one process that can store them) knows whether it holds any, so spend reads cost nothing more
        # until a billing export is imported.
        self._has_billed = True
        self._has_totals = True  # whether the file keeps running totals (a reader of an older file: not yet)
        if read_only:
            self._db = self._open_read_only(fresh_if_empty)
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LedgerUnavailable(f"cannot open the ledger file {self.path}: {exc}") from None
        if exclusive:
            self._writer = WriterLock.acquire(self.path)
        try:
            refuse_empty_file(self.path, fresh_if_empty)
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error, LedgerUnavailable) as exc:
            self._release_writer()
            if isinstance(exc, LedgerUnavailable):
                raise
            raise LedgerUnavailable(f"cannot open the ledger file {self.path}: {exc}") from None
        try:
            self._prepare()
            if self._steady is not None:  # a writer opening the file with its clock ahead carries the file's time
                self._steady.hold_to(writes.newest_end(self._db))
        except sqlite3.Error as exc:
            self._db.close()
            self._release_writer()
            raise LedgerUnavailable(
                f"{self.path} is not a usable leadtime ledger ({exc}); point ledger.path at a new file"
            ) from None

    # -- Ledger -------------------------------------------------------------------------------------------
    def record(self, entry: LedgerEntry) -> None:
        self.record_many([entry])

    def reserve(self, request: ReservationRequest, now: datetime) -> Grant:
        return self.reserve_many([request], now)[0]

    def reserve_many(
        self,
        requests: Sequence[ReservationRequest],
        now: datetime,
        replacing: Sequence[int] = (),
        replacing_holder: Holder | None = None,
    ) -> list[Grant]:
        if self.read_only:
            raise LedgerUnavailable(self._refusal("reserve budget in"))
        return super().reserve_many(requests, now, replacing, replacing_holder)

    def record_many(self, entries: Sequence[LedgerEntry]) -> None:
        if not entries:
            return
        with self._transaction() as db:
            writes.write(db, entries_on_grid(entries))  # an entry across cells counts in each (see folding)

    def update(self, pools: Sequence[str], derive: Callable[[Newest], Sequence[LedgerEntry]]) -> None:
        """Charged intervals are folded into the pool's newest charged entry where they continue it
        (``agent.ledger.folding``)."""
        pruned = 0
        with self._transaction() as db:
            newest = {pool: writes.newest(db, pool) for pool in pools}
            charged = {pool: writes.charged(db, last) for pool, last in newest.items()}
            folded = fold(charged, derive(newest))
            writes.write(db, folded.entries)
            writes.extend(db, folded)
            cutoff = self._pruning.due(folded.entries, self._steady.now) if self._steady else None
            if cutoff is not None:
                pruned = writes.prune(db, cutoff)
                self._pruning.removed(cutoff, pruned)
        if pruned:
            with self._lock:  # after the commit: a VACUUM cannot run in a transaction (agent.ledger.sqlite_space)
                give_back(self._db, self.path)

    def spent(self, pools: Sequence[str], start: datetime, end: datetime) -> float:
        """Billed cost where the pool's spend was billed (``agent.ledger.billed``), estimated spend elsewhere; from
        the running totals of a period starting at ``start`` where they are kept (``agent.ledger.sqlite_totals``)."""
        wanted = sorted(set(pools))
        if not self._has_totals or not wanted:
            return self._summed(wanted, start, end)
        args = {"pools": json.dumps(wanted), "start": to_us(start), "end": to_us(end)}
        return float(self._query(totals.SPENT, args)[0][0])

    def spent_in_periods(self, asks: Sequence[SpendAsk], now: datetime) -> list[float]:
        """From the running totals of the asks' periods, which the writer adds when missing (and then drops those
        of ended periods); a reader sums from the entries where the writer has not added them yet."""
        if not self._has_totals:
            return [self._summed(sorted(set(a.pools)), a.period_start, a.until) for a in asks]
        found = [self._so_far(a) for a in asks]
        if not self.read_only and any(n < len(set(a.pools)) for a, (_, n) in zip(asks, found, strict=True)):
            self._add_totals([a for a in asks if a.within], now)
            found = [self._so_far(a) for a in asks]
        return [value for value, _ in found]

    def _period_spent(self, pools: Sequence[str], start: datetime, end: datetime) -> float:
        """The recorded spend a reservation is decided on: of the whole period [start, end), from its totals."""
        return self.spent_in_periods([SpendAsk(tuple(pools), start, end, end)], start)[0]

    def _so_far(self, ask: SpendAsk) -> tuple[float, int]:
        wanted = sorted(set(ask.pools))
        if not wanted:
            return 0.0, 0
        if not ask.within:
            return self._summed(wanted, ask.period_start, ask.until), len(wanted)
        args = {
            "pools": json.dumps(wanted),
            "start": to_us(ask.period_start),
            "end": to_us(ask.period_end),
            "until": to_us(ask.until),
        }
        value, n = self._query(totals.SO_FAR, args)[0]
        return float(value), int(n)

    def _add_totals(self, asks: Sequence[SpendAsk], now: datetime) -> None:
        with self._transaction() as db:
            for ask in asks:
                db.execute(
                    totals.ADD_MISSING,
                    {
                        "pools": json.dumps(sorted(set(ask.pools))),
                        "start": to_us(ask.period_start),
                        "end": to_us(ask.period_end),
                    },
                )
            ends = sorted({to_us(a.period_end) for a in asks})
            db.execute(totals.DROP_ENDED, {"now": to_us(now), "ends": json.dumps(ends)})

    def _summed(self, wanted: Sequence[str], start: datetime, end: datetime) -> float:
        """Spend summed from the entries and billed costs (a file without totals)."""
        if not self._has_billed or not wanted:
            return self.estimated(wanted, start, end)
        span = {"start": to_us(start), "end": to_us(end)}
        return sum(
            float(self._query(f"SELECT {totals.spent_of(':pool', ':start', ':end')}", {"pool": p, **span})[0][0])
            for p in wanted
        )

    # -- billed costs (agent.ledger.billed) ---------------------------------------------------------------
    def estimated(self, pools: Sequence[str], start: datetime, end: datetime) -> float:
        return self._sum("entries", pools, start, end)

    def billed(self, pools: Sequence[str], start: datetime, end: datetime) -> float:
        return self._sum("billed", pools, start, end) if self._has_billed else 0.0

    def record_billed(self, costs: Sequence[BilledCost]) -> None:
        """The billed pools' running totals are dropped first, in the same transaction, and computed once when next
        asked for: SQLite's triggers run per row, and would compute them again for each piece (a month of daily
        rows is 2,880 pieces a pool). A stored interval a piece overlaps starts less than the pool's longest stored
        interval before the piece does, which bounds the search for it to a range of the primary key."""
        if not costs:
            return
        wanted = sorted({c.pool_id for c in costs})
        pools = json.dumps(wanted)
        with self._transaction() as db:
            self._has_billed = True
            db.execute(totals.DROP_POOLS, {"pools": pools})
            longest = dict.fromkeys(wanted, GRID // timedelta(microseconds=1))  # no piece is longer
            for pool, length in db.execute(
                "SELECT pool_id, max(end_us - start_us) FROM billed"
                " WHERE pool_id IN (SELECT value FROM json_each(?)) GROUP BY pool_id",
                (pools,),
            ):
                longest[pool] = max(longest[pool], int(length))
            for cost in on_grid(costs):
                start, end = to_us(cost.start), to_us(cost.end)
                db.execute(
                    "DELETE FROM billed WHERE pool_id = ? AND start_us > ? AND start_us < ? AND end_us > ?",
                    (cost.pool_id, start - longest[cost.pool_id], end, start),
                )
                db.execute(
                    "INSERT INTO billed (pool_id, start_us, end_us, cost_usd) VALUES (?, ?, ?, ?)",
                    (cost.pool_id, start, end, cost.cost_usd),
                )

    def reconcile(self, pools: Sequence[str], start: datetime, end: datetime) -> list[Reconciliation]:
        wanted = sorted(set(pools))
        if not wanted:
            return []
        marks = ", ".join("?" for _ in wanted)
        rows = self._query(
            "SELECT b.pool_id, SUM(b.end_us - b.start_us) / 3.6e9, SUM((SELECT COALESCE(SUM(e.cost_usd), 0.0)"
            " FROM entries AS e"
            " WHERE e.pool_id = b.pool_id AND e.start_us >= b.start_us AND e.start_us < b.end_us)), SUM(b.cost_usd)"
            f" FROM billed AS b WHERE b.pool_id IN ({marks}) AND b.start_us >= ? AND b.start_us < ?"
            " GROUP BY b.pool_id ORDER BY b.pool_id",
            (*wanted, to_us(start), to_us(end)),
        )
        return [Reconciliation(str(p), float(h), float(e), float(b)) for p, h, e, b in rows]

    def billed_intervals(self, pools: Sequence[str], start: datetime, end: datetime) -> list[BilledCost]:
        """Found by their ends, as ``spent`` finds them: only the pieces ending after ``start`` are read."""
        wanted = sorted(set(pools))
        if not wanted or not self._has_billed:
            return []
        rows = self._query(
            "SELECT pool_id, start_us, end_us, cost_usd FROM billed INDEXED BY billed_by_end"
            " WHERE pool_id IN (SELECT value FROM json_each(?)) AND end_us > ? AND start_us < ?"
            " ORDER BY pool_id, start_us",
            (json.dumps(wanted), to_us(start), to_us(end)),
        )
        return [BilledCost(str(p), from_us(int(lo)), from_us(int(hi)), float(c)) for p, lo, hi, c in rows]

    def _sum(self, table: str, pools: Sequence[str], start: datetime, end: datetime) -> float:
        wanted = sorted(set(pools))
        if not wanted:
            return 0.0
        marks = ", ".join("?" for _ in wanted)
        row = self._query(
            f"SELECT COALESCE(SUM(e.cost_usd), 0.0) FROM {table} AS e WHERE e.pool_id IN ({marks})"
            " AND e.start_us >= ? AND e.start_us < ?",
            (*wanted, to_us(start), to_us(end)),
        )
        return float(row[0][0])

    def last_entry(self, pool_id: str) -> LedgerEntry | None:
        rows = self._query(writes.NEWEST, (pool_id,))
        return from_row(rows[0]) if rows else None

    @property
    def where(self) -> str:
        return str(self.path)

    def recorded_since(self, pools: Sequence[str]) -> dict[str, datetime]:
        """The earliest start of each pool's entries and billed costs: two probes of primary keys per pool."""
        query = _SINCE_BILLED if self._has_billed else _SINCE_UNBILLED
        rows = self._query(query, (json.dumps(sorted(set(pools))),))
        found = {str(pool): [int(us) for us in starts if us is not None] for pool, *starts in rows}
        return {pool: from_us(min(starts)) for pool, starts in found.items() if starts}

    # -- reading back, closing ----------------------------------------------------------------------------
    def entries(self, pool_id: str | None = None) -> list[LedgerEntry]:
        where, args = ("WHERE pool_id = ?", (pool_id,)) if pool_id is not None else ("", ())
        rows = self._query(f"SELECT {COLUMNS} FROM entries {where} ORDER BY start_us, pool_id", args)
        return [from_row(r) for r in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()
            self._release_writer()

    def __enter__(self) -> SqliteLedger:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------------------------
    def _open_read_only(self, fresh_if_empty: bool) -> sqlite3.Connection:
        """A connection SQLite itself keeps from writing, to a file that must already be a leadtime ledger.

        A zero-length file is refused as its writer refuses it (``refuse_empty_file``): the writer never turns it
        into a ledger unless told to start afresh, so a reader told to wait for one would wait for ever."""
        refuse_empty_file(self.path, fresh_if_empty)
        if not self.path.is_file() or self.path.stat().st_size == 0:
            raise LedgerUnavailable(f"no ledger in {self.path} to read yet: the replica that writes it creates it")
        try:
            db = sqlite3.connect(
                f"{self.path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise LedgerUnavailable(f"cannot open the ledger file {self.path} read-only: {exc}") from None
        try:
            schema.check(db)
            tables = {str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()}
            self._has_billed = "billed" in tables
            self._has_totals = self._has_billed and totals.TABLE in tables
        except sqlite3.Error as exc:
            db.close()
            raise LedgerUnavailable(f"{self.path} is not a readable leadtime ledger ({exc})") from None
        return db

    def _refusal(self, action: str) -> str:
        return f"cannot {action} the ledger {self.path}: it is open read-only here (only the writing replica writes it)"

    def _prepare(self) -> None:
        schema.check(self._db)
        create_incremental(self._db)  # a new file gives the space retention frees back (agent.ledger.sqlite_space)
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = FULL")
        with self._transaction() as db:
            schema.create(db)
            self._has_billed = db.execute("SELECT EXISTS (SELECT 1 FROM billed)").fetchone()[0] == 1

    def _release_writer(self) -> None:
        if self._writer is not None:
            self._writer.release()
            self._writer = None

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        if self.read_only:
            raise LedgerUnavailable(self._refusal("write"))
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise LedgerUnavailable(f"cannot write the ledger {self.path}: {exc}") from None

    def _query(self, sql: str, args: Sequence[object] | Mapping[str, object]) -> list[tuple[Any, ...]]:
        params = dict(args) if isinstance(args, Mapping) else tuple(args)
        with self._lock:
            try:
                return list(self._db.execute(sql, params).fetchall())
            except sqlite3.Error as exc:
                raise LedgerUnavailable(f"cannot read the ledger {self.path}: {exc}") from None

"""How the SQLite ledger stores spend entries: inside the caller's write transaction, as ``accrual.resolve`` says.

Here: the read of a pool's newest entry (``newest``) and of its newest charged one (``charged``), the store of new
entries (``write``), the extension of the entries folding continues (``extend``, ``agent.ledger.folding``) and the
removal of what retention lets go (``prune``, ``agent.ledger.retention``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime

from agent.ledger import sqlite_totals as totals
from agent.ledger.accrual import is_mark, resolve
from agent.ledger.folding import Folded
from agent.ledger.retention import BATCH
from agent.ledger.rows import COLUMNS, from_row, from_us, to_row, to_us
from models import LedgerEntry

_CHARGED = (
    f"SELECT {COLUMNS} FROM entries WHERE pool_id = ? AND end_us = ? AND start_us < end_us"
    " ORDER BY start_us DESC LIMIT 1"
)
# Rows of a table that end at or before :cutoff, but each pool's earliest; at most :batch of them. The pools are
# walked along the primary key (one probe each), and each pool's rows up to the cutoff by its range of it.
_OLD_KEYS = """WITH RECURSIVE pools (id) AS (
        SELECT min(pool_id) FROM {table}
        UNION ALL SELECT (SELECT min(pool_id) FROM {table} WHERE pool_id > pools.id) FROM pools WHERE id IS NOT NULL)
    SELECT x.pool_id, x.start_us FROM pools JOIN {table} AS x ON x.pool_id = pools.id
    WHERE x.start_us > (SELECT min(f.start_us) FROM {table} AS f WHERE f.pool_id = pools.id)
        AND x.start_us < :cutoff AND x.end_us <= :cutoff
    LIMIT :batch"""
_PRUNE = "DELETE FROM {table} WHERE (pool_id, start_us) IN (" + _OLD_KEYS + ")"
NEWEST = f"SELECT {COLUMNS} FROM entries WHERE pool_id = ? ORDER BY end_us DESC, start_us DESC LIMIT 1"
# Each pool's newest end, the pools walked along the index (one probe each).
_NEWEST_ENDS = """WITH RECURSIVE pools (id) AS (
        SELECT min(pool_id) FROM entries
        UNION ALL SELECT (SELECT min(pool_id) FROM entries WHERE pool_id > pools.id) FROM pools WHERE id IS NOT NULL)
    SELECT id, (SELECT max(e.end_us) FROM entries AS e WHERE e.pool_id = pools.id) FROM pools WHERE id IS NOT NULL"""


def newest(db: sqlite3.Connection, pool_id: str) -> LedgerEntry | None:
    """The pool's newest stored entry (``None``: it has none)."""
    row = db.execute(NEWEST, (pool_id,)).fetchone()
    return None if row is None else from_row(row)


def newest_end(db: sqlite3.Connection) -> datetime | None:
    """The newest end of any pool's entries (``None``: there are none)."""
    ends = [from_us(int(end)) for _, end in db.execute(_NEWEST_ENDS) if end is not None]
    return max(ends, default=None)


def prune(db: sqlite3.Connection, cutoff: datetime) -> int:
    """Remove up to a batch of entries and of billed costs that end at or before ``cutoff``, but each pool's
    earliest of each (``agent.ledger.retention``); the most rows removed from either table. The billed pools'
    running totals are dropped first, as an import drops them (their triggers would compute them per row)."""
    args = {"cutoff": to_us(cutoff), "batch": BATCH}
    gone = db.execute(_PRUNE.format(table="entries"), args).rowcount
    billed = db.execute(_OLD_KEYS.format(table="billed"), args).fetchall()
    if billed:
        db.execute(totals.DROP_POOLS, {"pools": json.dumps(sorted({str(pool) for pool, _ in billed}))})
        db.executemany("DELETE FROM billed WHERE pool_id = ? AND start_us = ?", billed)
    return max(gone, len(billed))


def charged(db: sqlite3.Connection, newest: LedgerEntry | None) -> LedgerEntry | None:
    """The pool's newest charged entry (not a mark) when it ends where its newest entry does."""
    if newest is None or not is_mark(newest):
        return newest
    row = db.execute(_CHARGED, (newest.pool_id, to_us(newest.end))).fetchone()
    return None if row is None else from_row(row)


def write(db: sqlite3.Connection, entries: Sequence[LedgerEntry]) -> None:
    """Store each entry as ``resolve`` says against what its key holds."""
    for entry in entries:
        row = db.execute(
            f"SELECT {COLUMNS} FROM entries WHERE pool_id = ? AND start_us = ?",
            (entry.pool_id, to_us(entry.start)),
        ).fetchone()
        stored = resolve(None if row is None else from_row(row), entry)
        if stored is not None:  # an upsert, not a replace, so the totals' update trigger sees the change
            db.execute(
                f"INSERT INTO entries ({COLUMNS}) VALUES (?, ?, ?, ?, ?) ON CONFLICT (pool_id, start_us) DO UPDATE"
                " SET end_us = excluded.end_us, units = excluded.units, cost_usd = excluded.cost_usd",
                to_row(stored),
            )


def extend(db: sqlite3.Connection, folded: Folded) -> None:
    """Extend the stored entries ``folded`` extends and remove the opening marks it folded over."""
    for stored, extended in folded.extended:
        db.execute(
            "UPDATE entries SET end_us = ?, cost_usd = ? WHERE pool_id = ? AND start_us = ? AND end_us = ?",
            (to_us(extended.end), extended.cost_usd, stored.pool_id, to_us(stored.start), to_us(stored.end)),
        )
    db.executemany(
        "DELETE FROM entries WHERE pool_id = ? AND start_us = ? AND end_us = start_us",
        [(pool, to_us(start)) for pool, start in folded.dropped],
    )

"""How the PostgreSQL ledger stores spend entries: under its writer lock, as ``accrual.resolve`` says.

Every write is one transaction that first takes a transaction-scoped advisory lock on the ledger
(``take_write_lock``), so writers (several agents, or replicas racing) take turns; an update reads the pools'
newest entries after taking it (``newest_of_each``), so no other writer commits between that read and the write.
Here: that read, the store of new entries (``write``), the extension of the entries folding continues
(``extend``, ``agent.ledger.folding``) and the removal of what retention lets go (``prune``,
``agent.ledger.retention``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, LiteralString

import psycopg

from agent.ledger.accrual import is_mark, resolve
from agent.ledger.folding import Folded
from agent.ledger.retention import BATCH
from agent.ledger.rows import COLUMNS, from_row, to_row, to_us
from models import LedgerEntry, LedgerUnavailable

# Advisory lock key (64-bit): "LDTGWRIT" serialises writers.
WRITE_LOCK = 0x4C44_5447_5752_4954
_ENTRIES: LiteralString = "leadtime_ledger_entries"
_BILLED: LiteralString = "leadtime_billed_costs"

Connection = psycopg.Connection[tuple[Any, ...]]

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


def take_write_lock(db: Connection) -> None:
    """Take the writer lock for the rest of the transaction ``db`` is in."""
    db.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))


def newest_of_each(db: Connection, pools: Sequence[str]) -> dict[str, LedgerEntry | None]:
    """The newest stored entry of each pool (``None``: it has none)."""
    newest: dict[str, LedgerEntry | None] = dict.fromkeys(pools)
    if pools:
        rows = db.execute(_NEWEST_OF_EACH, (list(pools),)).fetchall()
        newest.update({str(row[0]): from_row(row) for row in rows})
    return newest


def write(db: Connection, entries: Sequence[LedgerEntry], newest: Mapping[str, LedgerEntry | None]) -> None:
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


def charged(db: Connection, newest: Mapping[str, LedgerEntry | None]) -> dict[str, LedgerEntry | None]:
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


def server_now(db: Connection) -> datetime:
    """The database server's clock (its transaction's start): what the retention is measured by."""
    row = db.execute("SELECT now()").fetchone()
    if row is None or not isinstance(row[0], datetime):
        raise LedgerUnavailable(f"the PostgreSQL server answered {row!r} to SELECT now()")
    return row[0].astimezone(UTC)


def prune(db: Connection, cutoff: datetime) -> int:
    """Remove up to a batch of entries and of billed costs that end at or before ``cutoff``, but each pool's
    earliest of each (``agent.ledger.retention``); the most rows removed from either table."""
    args = {"cutoff": to_us(cutoff), "batch": BATCH}
    return max(db.execute(_PRUNE.format(table=table), args).rowcount for table in (_ENTRIES, _BILLED))


def extend(db: Connection, folded: Folded) -> None:
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

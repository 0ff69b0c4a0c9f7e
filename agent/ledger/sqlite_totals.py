"""Running spend totals of the SQLite ledger: what the spend reads and reservations take instead of summing a
period's entries (the same design as ``agent.ledger.postgres_totals``, in SQLite's terms).

- One row per (pool, period) asked about, holding that pool's spend in the period as ``spent`` counts it (billed
  cost where it was billed, the estimate elsewhere). The writer adds the rows a read asks for and lacks, computed
  from the entries and billed costs, and drops those of ended periods then; a missing row is only computed again.
- Triggers keep the rows equal to that sum whoever writes the file: each entry inserted, updated or deleted moves
  the rows of its pool whose period holds its start by its change in cost, unless a billed interval of its pool
  covers it (the bill stands in for it); each billed interval written or deleted computes its pool's rows again
  (the ledger's own import drops the pools' rows first instead, so that a bill cut into many pieces costs one
  computation of each row, when it is next asked for).
- Schema 3 adds the table and the triggers, empty: an existing file's totals are computed as they are first asked
  for. A reader of a file its writer has not upgraded yet (no totals table) sums the entries, as before.
"""

from __future__ import annotations

from typing import LiteralString

TABLE = "spend_totals"


def spent_of(pool: LiteralString, start: LiteralString, end: LiteralString) -> LiteralString:
    """SQL for one pool's spend in [start, end) (SQL expressions): the estimate of its entries starting in the span,
    adjusted by each billed interval overlapping it (found by its end): its bill when it starts in the span, less
    the estimate of its entries in the span."""
    return f"""((SELECT COALESCE(SUM(x.cost_usd), 0.0) FROM entries AS x
        WHERE x.pool_id = {pool} AND x.start_us >= {start} AND x.start_us < {end})
      + (SELECT COALESCE(SUM(CASE WHEN b.start_us >= {start} THEN b.cost_usd ELSE 0.0 END
            - (SELECT COALESCE(SUM(y.cost_usd), 0.0) FROM entries AS y WHERE y.pool_id = b.pool_id
               AND y.start_us >= max(b.start_us, {start}) AND y.start_us < min(b.end_us, {end}))), 0.0)
         FROM billed AS b INDEXED BY billed_by_end
         WHERE b.pool_id = {pool} AND b.end_us > {start} AND b.start_us < {end}))"""


def _unbilled(row: LiteralString) -> LiteralString:
    return (
        f"NOT EXISTS (SELECT 1 FROM billed AS b WHERE b.pool_id = {row}.pool_id"
        f" AND b.end_us > {row}.start_us AND b.start_us <= {row}.start_us)"
    )


def _move(row: LiteralString, sign: LiteralString) -> LiteralString:
    """SQL moving the totals of ``row``'s pool whose period holds its start by its cost (``sign``: + or -)."""
    return (
        f"UPDATE {TABLE} SET spent_usd = spent_usd {sign} {row}.cost_usd WHERE pool_id = {row}.pool_id"
        f" AND period_start_us <= {row}.start_us AND period_end_us > {row}.start_us AND {_unbilled(row)};"
    )


def _on_entries(name: LiteralString, event: LiteralString, row: LiteralString, sign: LiteralString) -> LiteralString:
    """A trigger moving the totals by an inserted or deleted entry's cost: none for a mark (it costs nothing)."""
    return (
        f"CREATE TRIGGER IF NOT EXISTS {name} AFTER {event} ON entries"
        f" WHEN {row}.cost_usd <> 0.0 BEGIN {_move(row, sign)} END"
    )


def _recompute(row: LiteralString) -> LiteralString:
    return (
        f"UPDATE {TABLE} SET spent_usd"
        f" = {spent_of(f'{TABLE}.pool_id', f'{TABLE}.period_start_us', f'{TABLE}.period_end_us')}"
        f" WHERE pool_id = {row}.pool_id;"
    )


# Statements of schema 3, each run on its own (trigger bodies hold semicolons); all are no-ops when present.
SCHEMA: tuple[LiteralString, ...] = (
    f"""CREATE TABLE IF NOT EXISTS {TABLE} (
        pool_id         TEXT    NOT NULL,
        period_start_us INTEGER NOT NULL,
        period_end_us   INTEGER NOT NULL CHECK (period_end_us > period_start_us),
        spent_usd       REAL    NOT NULL,
        PRIMARY KEY (pool_id, period_start_us, period_end_us)
    ) WITHOUT ROWID""",
    _on_entries("spend_totals_entry_inserted", "INSERT", "NEW", "+"),
    _on_entries("spend_totals_entry_deleted", "DELETE", "OLD", "-"),
    "CREATE TRIGGER IF NOT EXISTS spend_totals_entry_updated AFTER UPDATE ON entries"
    f" BEGIN {_move('OLD', '-')} {_move('NEW', '+')} END",
    f"CREATE TRIGGER IF NOT EXISTS spend_totals_billed_inserted AFTER INSERT ON billed BEGIN {_recompute('NEW')} END",
    f"CREATE TRIGGER IF NOT EXISTS spend_totals_billed_deleted AFTER DELETE ON billed BEGIN {_recompute('OLD')} END",
    "CREATE TRIGGER IF NOT EXISTS spend_totals_billed_updated AFTER UPDATE ON billed"
    f" BEGIN {_recompute('OLD')} {_recompute('NEW')} END",
)

# The totals of the pools (a JSON array, :pools) for the period [:start, :end) the table lacks.
ADD_MISSING = f"""INSERT INTO {TABLE} (pool_id, period_start_us, period_end_us, spent_usd)
    SELECT p.value, :start, :end, {spent_of("p.value", ":start", ":end")}
    FROM (SELECT DISTINCT value FROM json_each(:pools)) AS p
    WHERE NOT EXISTS (SELECT 1 FROM {TABLE} AS t WHERE t.pool_id = p.value
                      AND t.period_start_us = :start AND t.period_end_us = :end)"""

# The totals of the pools (a JSON array, :pools): what an import of billed costs drops rather than have the triggers
# compute them again for every row it writes.
DROP_POOLS = f"DELETE FROM {TABLE} WHERE pool_id IN (SELECT value FROM json_each(:pools))"

# The ended periods' totals, but those of the periods just asked about (a JSON array of ends, :ends).
DROP_ENDED = f"""DELETE FROM {TABLE} WHERE period_end_us <= :now
    AND period_end_us NOT IN (SELECT value FROM json_each(:ends))"""

# The spend of the pools (:pools) in [:start, :until) inside the period [:start, :end): each pool's total less its
# spend from :until to the period's end, summed from its entries where it has no total; and how many had one.
SO_FAR = f"""SELECT COALESCE(SUM(COALESCE(
        (SELECT t.spent_usd - {spent_of("p.value", ":until", ":end")} FROM {TABLE} AS t
         WHERE t.pool_id = p.value AND t.period_start_us = :start AND t.period_end_us = :end),
        {spent_of("p.value", ":start", ":until")})), 0.0),
    (SELECT count(*) FROM {TABLE} AS t WHERE t.pool_id IN (SELECT value FROM json_each(:pools))
     AND t.period_start_us = :start AND t.period_end_us = :end)
    FROM (SELECT DISTINCT value FROM json_each(:pools)) AS p"""

# The spend of the pools (:pools) in [:start, :end), each pool's from the total of a period that starts at :start
# and covers :end when one is kept and its rest after :end is the shorter span, else summed from its entries.
SPENT = f"""SELECT COALESCE(SUM(COALESCE(
        (SELECT t.spent_usd - {spent_of("p.value", ":end", "t.period_end_us")} FROM {TABLE} AS t
         WHERE t.pool_id = p.value AND t.period_start_us = :start AND t.period_end_us >= :end
           AND t.period_end_us - :end <= :end - :start
         ORDER BY t.period_end_us LIMIT 1),
        {spent_of("p.value", ":start", ":end")})), 0.0)
    FROM (SELECT DISTINCT value FROM json_each(:pools)) AS p"""

"""Running spend totals of the PostgreSQL ledger: what a reservation reads instead of summing a period's entries.

A budget's recorded spend in a period is the sum over its pools of each pool's spend in that period, billed cost
where it was billed and the estimate elsewhere (as ``spent`` counts it). Summing entries for that costs O(entries
in the period) per reservation, growing all month. Instead the ledger keeps one row per (pool, period) that a
reservation asked about, holding that pool's spend in the period, so a reservation reads O(pools) rows.

- A (pool, period) row is added by the first reservation that asks for it (one that finds fewer rows than its
  pools), computed from the entries and billed costs in the same transaction, under the writer lock; rows of
  periods that ended are dropped then. A row that
  is missing is only computed again, so dropping one is always safe.
- Triggers keep the rows equal to that sum whoever writes (this release, an older one still running during a
  rollout, an operator's SQL): each statement that inserts, updates or deletes entries adds the change in cost of
  the entries it touched to the rows of their pool whose period holds the entry's start, except for entries that
  lie in a billed interval of their pool (a billed interval's bill stands in for them, so their estimate changes
  nothing). Each statement that changes billed costs computes the rows of the pools it touched again.
- The migration that creates the rows' table (``MIGRATION``) leaves it empty: periods are the budgets' (a month
  from a day in a time zone, a clock hour), which the database does not know, so an existing ledger's totals are
  computed from its entries by the first reservation of each period.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, LiteralString

import psycopg

from agent.ledger.period_spend import SpendAsk
from agent.ledger.reservations import ReservationRequest
from agent.ledger.rows import to_us

Connection = psycopg.Connection[tuple[Any, ...]]

_TABLE = "leadtime_spend_totals"


def spent_of(pool: LiteralString, start: LiteralString, end: LiteralString) -> LiteralString:
    """SQL for one pool's spend in [start, end) (SQL expressions): the estimate of its entries starting in the span,
    adjusted by each billed interval overlapping it (found by its end): its bill when it starts in the span, less
    the estimate of its entries in the span."""
    return f"""((SELECT COALESCE(SUM(x.cost_usd), 0.0) FROM leadtime_ledger_entries AS x
        WHERE x.pool_id = {pool} AND x.start_us >= {start} AND x.start_us < {end})
      + COALESCE((SELECT SUM(CASE WHEN b.start_us >= {start} THEN b.cost_usd ELSE 0.0 END
            - (SELECT COALESCE(SUM(y.cost_usd), 0.0) FROM leadtime_ledger_entries AS y WHERE y.pool_id = b.pool_id
               AND y.start_us >= GREATEST(b.start_us, {start}) AND y.start_us < LEAST(b.end_us, {end})))
         FROM leadtime_billed_costs AS b
         WHERE b.pool_id = {pool} AND b.end_us > {start} AND b.start_us < {end}), 0.0))"""


def _add_changes(changes: LiteralString) -> LiteralString:
    """SQL adding ``changes`` (rows of pool_id, start_us, cost change) to the totals whose period holds the start,
    leaving out the entries a billed interval of their pool covers."""
    return f"""UPDATE {_TABLE} AS t SET spent_usd = t.spent_usd + s.change
        FROM (SELECT p.pool_id, p.period_start_us, p.period_end_us, SUM(c.change) AS change
              FROM ({changes}) AS c (pool_id, start_us, change)
              JOIN {_TABLE} AS p ON p.pool_id = c.pool_id
                   AND c.start_us >= p.period_start_us AND c.start_us < p.period_end_us
              WHERE c.change <> 0.0 AND NOT EXISTS (
                  SELECT 1 FROM leadtime_billed_costs AS b
                  WHERE b.pool_id = c.pool_id AND b.end_us > c.start_us AND b.start_us <= c.start_us)
              GROUP BY p.pool_id, p.period_start_us, p.period_end_us) AS s
        WHERE t.pool_id = s.pool_id AND t.period_start_us = s.period_start_us AND t.period_end_us = s.period_end_us;"""


def _recompute(pools: LiteralString) -> LiteralString:
    """SQL computing again the totals of the pools ``pools`` (a query of pool ids) yields."""
    return f"""UPDATE {_TABLE} AS t SET spent_usd = {spent_of("t.pool_id", "t.period_start_us", "t.period_end_us")}
        WHERE t.pool_id IN ({pools});"""


_NEW: LiteralString = "SELECT pool_id, start_us, cost_usd FROM new_rows"
_OLD: LiteralString = "SELECT pool_id, start_us, -cost_usd FROM old_rows"


def _function(name: LiteralString, body: LiteralString) -> LiteralString:
    return f"""CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $body$
        BEGIN
            {body}
            RETURN NULL;
        END
        $body$"""


def _trigger(table: LiteralString, event: LiteralString, function: LiteralString, rows: LiteralString) -> LiteralString:
    return (
        f"CREATE TRIGGER {function}_{event.lower()} AFTER {event} ON {table} REFERENCING {rows}"
        f" FOR EACH STATEMENT EXECUTE FUNCTION {function}()"
    )


_ENTRIES: LiteralString = "leadtime_ledger_entries"
_BILLED: LiteralString = "leadtime_billed_costs"

MIGRATION: tuple[LiteralString, ...] = (
    # The ledger copies in the entries that start after their pool's newest entry ends, which counts on every
    # entry ending no earlier than it starts (entries stored before are not checked again).
    f"ALTER TABLE {_ENTRIES} ADD CONSTRAINT leadtime_ledger_entries_ends_after_start"
    " CHECK (end_us >= start_us) NOT VALID",
    f"""CREATE TABLE {_TABLE} (
        pool_id         text             NOT NULL,
        period_start_us bigint           NOT NULL,
        period_end_us   bigint           NOT NULL CHECK (period_end_us > period_start_us),
        spent_usd       double precision NOT NULL,
        PRIMARY KEY (pool_id, period_start_us, period_end_us)
    ) WITH (fillfactor = 50)""",
    _function("leadtime_totals_entries_inserted", _add_changes(_NEW)),
    _function("leadtime_totals_entries_updated", _add_changes(f"{_NEW} UNION ALL {_OLD}")),
    _function("leadtime_totals_entries_deleted", _add_changes(_OLD)),
    _function("leadtime_totals_billed_inserted", _recompute("SELECT pool_id FROM new_rows")),
    _function(
        "leadtime_totals_billed_updated",
        _recompute("SELECT pool_id FROM new_rows UNION SELECT pool_id FROM old_rows"),
    ),
    _function("leadtime_totals_billed_deleted", _recompute("SELECT pool_id FROM old_rows")),
    _function("leadtime_totals_cleared", f"DELETE FROM {_TABLE};"),
    _trigger(_ENTRIES, "INSERT", "leadtime_totals_entries_inserted", "NEW TABLE AS new_rows"),
    _trigger(_ENTRIES, "UPDATE", "leadtime_totals_entries_updated", "OLD TABLE AS old_rows NEW TABLE AS new_rows"),
    _trigger(_ENTRIES, "DELETE", "leadtime_totals_entries_deleted", "OLD TABLE AS old_rows"),
    _trigger(_BILLED, "INSERT", "leadtime_totals_billed_inserted", "NEW TABLE AS new_rows"),
    _trigger(_BILLED, "UPDATE", "leadtime_totals_billed_updated", "OLD TABLE AS old_rows NEW TABLE AS new_rows"),
    _trigger(_BILLED, "DELETE", "leadtime_totals_billed_deleted", "OLD TABLE AS old_rows"),
    *(
        f"CREATE TRIGGER leadtime_totals_cleared_{name} AFTER TRUNCATE ON {table}"
        " FOR EACH STATEMENT EXECUTE FUNCTION leadtime_totals_cleared()"
        for name, table in (("entries", _ENTRIES), ("billed", _BILLED))
    ),
)

# The (pool, period) rows the requests need and the table lacks, computed from the entries and billed costs.
_ADD_MISSING = f"""INSERT INTO {_TABLE} (pool_id, period_start_us, period_end_us, spent_usd)
    SELECT q.pool_id, q.period_start, q.period_end, {spent_of("q.pool_id", "q.period_start", "q.period_end")}
    FROM (SELECT DISTINCT * FROM unnest(%b::text[], %b::bigint[], %b::bigint[]))
        AS q (pool_id, period_start, period_end)
    WHERE NOT EXISTS (SELECT 1 FROM {_TABLE} AS t WHERE t.pool_id = q.pool_id
                      AND t.period_start_us = q.period_start AND t.period_end_us = q.period_end)"""

# Per request (its place ``i``), the sum of its pools' totals and how many of them there are. The long arrays of
# these queries go as binary parameters, which psycopg encodes several times faster than text.
_READ = f"""SELECT q.i, SUM(t.spent_usd), count(*)
    FROM unnest(%b::integer[], %b::text[], %b::bigint[], %b::bigint[]) AS q (i, pool_id, period_start, period_end)
    JOIN {_TABLE} AS t ON t.pool_id = q.pool_id AND t.period_start_us = q.period_start
        AND t.period_end_us = q.period_end
    GROUP BY q.i"""


# Per ask (its place ``i``), the sum over its pools of the period's total less the spend from ``until`` to the
# period's end, and how many of its pools have a total.
_READ_SO_FAR = f"""SELECT q.i, SUM(t.spent_usd - {spent_of("q.pool_id", "q.until", "q.period_end")}), count(*)
    FROM unnest(%b::integer[], %b::text[], %b::bigint[], %b::bigint[], %b::bigint[])
        AS q (i, pool_id, period_start, period_end, until)
    JOIN {_TABLE} AS t ON t.pool_id = q.pool_id AND t.period_start_us = q.period_start
        AND t.period_end_us = q.period_end
    GROUP BY q.i"""

# Spend of the pools named in entries starting in [start, end), each pool's from the total of a period that starts
# at ``start`` and covers ``end`` when one is kept and its rest after ``end`` is the shorter span (less the spend of
# that rest), else summed from the entries.
SPENT = f"""SELECT COALESCE(SUM(COALESCE(
        (SELECT t.spent_usd - {spent_of("p.pool_id", "%(end)s", "t.period_end_us")} FROM {_TABLE} AS t
         WHERE t.pool_id = p.pool_id AND t.period_start_us = %(start)s AND t.period_end_us >= %(end)s
           AND t.period_end_us - %(end)s <= %(end)s - %(start)s
         ORDER BY t.period_end_us LIMIT 1),
        {spent_of("p.pool_id", "%(start)s", "%(end)s")})), 0.0)
    FROM unnest(%(pools)s::text[]) AS p (pool_id)"""


def _add_missing(db: Connection, columns: list[list[Any]], now: datetime) -> None:
    """Add the totals of the (pool, period start, period end) ``columns`` the table lacks, and drop those of the
    ended periods not among them: nothing asks for those again. Runs under the writer lock."""
    db.execute(_ADD_MISSING, columns)
    db.execute(
        f"DELETE FROM {_TABLE} WHERE period_end_us <= %s AND period_end_us <> ALL(%s::bigint[])",
        (to_us(now), sorted(set(columns[2]))),
    )


def so_far(
    db: Connection, asks: Sequence[SpendAsk], now: datetime, *, lock: Callable[[Connection], None]
) -> list[float]:
    """Each ask's spend in [period_start, until), from the totals of its period (``until`` must lie in it). Reads
    without a lock when every total is kept; otherwise adds the missing ones in a transaction that ``lock`` takes
    the writer lock in, and reads again there."""
    rows = [
        (i, pool, to_us(a.period_start), to_us(a.period_end), to_us(a.until))
        for i, a in enumerate(asks)
        for pool in sorted(set(a.pools))
    ]
    spent = [0.0] * len(asks)
    if not rows:
        return spent
    columns = [list(column) for column in zip(*rows, strict=True)]
    found = db.execute(_READ_SO_FAR, columns).fetchall()
    if sum(int(n) for _, _, n in found) < len(rows):  # a period first asked about: add its totals, read again
        with db.transaction():
            lock(db)
            _add_missing(db, columns[1:4], now)
            found = db.execute(_READ_SO_FAR, columns).fetchall()
    for i, value, _ in found:
        spent[int(i)] = float(value)
    return spent


def recorded(db: Connection, requests: Sequence[ReservationRequest], now: datetime) -> list[float]:
    """Recorded spend of each request's pools in its period, by the request's place: billed cost where it exists,
    as ``spent`` counts it. Runs in the caller's transaction, which holds the writer lock."""
    rows = [
        (i, pool, to_us(r.period_start), to_us(r.period_end))
        for i, r in enumerate(requests)
        for pool in sorted(set(r.pools))
    ]
    totals = [0.0] * len(requests)
    if not rows:
        return totals
    columns = [list(column) for column in zip(*rows, strict=True)]
    found = db.execute(_READ, columns).fetchall()
    if sum(int(n) for _, _, n in found) < len(rows):  # a period first asked about: add its totals, read again
        _add_missing(db, columns[1:], now)
        found = db.execute(_READ, columns).fetchall()
    for i, spent, _ in found:
        totals[int(i)] = float(spent)
    return totals

"""Budget reservations in the PostgreSQL ledger (``agent.ledger.reservations``), decided under its writer lock.

The reservations live beside the entries and are decided under the same writer lock
(``agent.ledger.postgres_writes``), so two agents racing for the last dollars of a cap take turns and only one can
get them. Each pool's spend in the period is read from the running totals that triggers keep
(``agent.ledger.postgres_totals``), not summed from the period's entries.

Each reservation is written with the span its amount pays for (``covers_from_us``, ``covers_until_us``: columns added
beside schema 5 without a new version, ``agent.ledger.postgres_schema.SPANS``); an earlier release writes its rows
without them (NULL), and they are read at their amount, as that release reads every row. A database whose table has
no such columns (read by a dry run before any agent of this release opened it, or by an agent that could not add
them: ``agent.ledger.postgres_schema.migrate``) is read the same way, and an agent writing to it writes its rows
without a span, as the release before does.

A claim (``claim``: what the others hold under some keys, and the reservations asked on those figures) reads and
writes in one transaction under the same writer lock, so two agents claiming at the same instant take turns, the
second reading what the first wrote; ``reserved_by_others`` alone takes no lock. It counts each reservation from
where its pools' recorded spend ends (``agent.ledger.reservation_spans``), read from the entries after the
reservations: an agent records its tick's spend before it replaces its reservation, so a reading between the two
counts the tick once.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from agent.ledger import postgres_totals as totals
from agent.ledger.postgres_schema import has_spans
from agent.ledger.postgres_writes import Connection, take_write_lock
from agent.ledger.reservation_spans import named_pools, recorded_to
from agent.ledger.reservations import (
    Choose,
    CountedTo,
    Grant,
    Holder,
    OthersRead,
    ReservationRequest,
    carried,
    holder_prefix,
    holds,
)
from agent.ledger.rows import from_us, to_us

_LIVE = (
    "SELECT holder, amount_usd, NULL::bigint, NULL::bigint FROM leadtime_budget_reservations"
    " WHERE budget = ANY(%s) AND expires_us > %s AND NOT id = ANY(%s)"
)
_LIVE_WITH_SPANS = (
    "SELECT holder, amount_usd, covers_from_us, covers_until_us FROM leadtime_budget_reservations"
    " WHERE budget = ANY(%s) AND expires_us > %s AND NOT id = ANY(%s)"
)

_ENDS = (
    "SELECT p.pool_id, (SELECT e.end_us FROM leadtime_ledger_entries AS e WHERE e.pool_id = p.pool_id"
    " ORDER BY e.end_us DESC LIMIT 1) FROM unnest(%s::text[]) AS p (pool_id)"
)

_INSERT_WITH_SPANS = (
    "INSERT INTO leadtime_budget_reservations"
    " (budget, holder, amount_usd, created_us, expires_us, covers_from_us, covers_until_us)"
    " SELECT r.budget, r.holder, r.amount_usd, r.created_us, r.expires_us, r.covers_from_us, r.covers_until_us"
    " FROM unnest(%s::text[], %s::text[], %s::float8[], %s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[])"
    " WITH ORDINALITY AS r (budget, holder, amount_usd, created_us, expires_us, covers_from_us, covers_until_us, n)"
    " ORDER BY r.n RETURNING id"
)
_INSERT = (  # a table without the span columns (``agent.ledger.postgres_schema.SPANS`` not added yet)
    "INSERT INTO leadtime_budget_reservations (budget, holder, amount_usd, created_us, expires_us)"
    " SELECT r.budget, r.holder, r.amount_usd, r.created_us, r.expires_us"
    " FROM unnest(%s::text[], %s::text[], %s::float8[], %s::bigint[], %s::bigint[])"
    " WITH ORDINALITY AS r (budget, holder, amount_usd, created_us, expires_us, n)"
    " ORDER BY r.n RETURNING id"
)


def decide(
    db: Connection,
    requests: Sequence[ReservationRequest],
    now: datetime,
    replacing: Sequence[int],
    replacing_holder: Holder | None,
) -> list[Grant]:
    """Decide the requests in order, in one transaction: each sees the grants before it; the reservations
    ``replacing`` names, and those ``replacing_holder`` holds (whichever session made them), are released in it
    first."""
    names = sorted({k for r in requests for k in r.keys})
    with db.transaction():
        take_write_lock(db)
        gone = [] if replacing_holder is None else held_by(db, replacing_holder)
        db.execute(
            "DELETE FROM leadtime_budget_reservations WHERE (budget = ANY(%s) AND expires_us <= %s)"
            " OR id = ANY(%s) OR holder = ANY(%s)",
            (names, to_us(now), list(replacing), gone),
        )
        reserved = dict.fromkeys(names, 0.0)
        for budget, amount in db.execute(
            "SELECT budget, SUM(amount_usd) FROM leadtime_budget_reservations WHERE budget = ANY(%s) GROUP BY budget",
            (names,),
        ).fetchall():
            reserved[str(budget)] = float(amount)
        recorded = totals.recorded(db, requests, now)
        grants: list[Grant] = []
        rows: list[tuple[str, str, float, int, int, int | None, int | None]] = []
        for i, request in enumerate(requests):
            headroom = request.cap_usd - recorded[i] - sum(reserved[k] for k in request.keys)
            if request.amount_usd > headroom:
                grants.append(Grant(None, headroom))
                continue
            reserved[request.budget] += request.amount_usd
            grants.append(Grant(len(rows), headroom))  # the row's place until the database numbers it
            span = (None, None) if request.covers is None else (to_us(request.covers[0]), to_us(request.covers[1]))
            rows.append(
                (request.budget, request.holder, request.amount_usd, to_us(now), to_us(now + request.ttl), *span)
            )
        if not rows:
            return grants
        spans = has_spans(db)
        ids = sorted(  # numbered in insertion order: every insert holds the writer lock
            int(r[0])
            for r in db.execute(
                _INSERT_WITH_SPANS if spans else _INSERT,
                [list(column) for column in zip(*(row if spans else row[:5] for row in rows), strict=True)],
            ).fetchall()
        )
        return [g if g.reservation_id is None else Grant(ids[g.reservation_id], g.headroom_usd) for g in grants]


def claim(
    db: Connection, reads: Sequence[OthersRead], choose: Choose, now: datetime
) -> tuple[list[float], list[Grant]]:
    """What the others hold under each of ``reads``, and the grants of the requests ``choose`` asks on those figures,
    in one transaction under the writer lock (``agent.ledger.reservations.Claims``): another agent's claim waits for
    this one to commit, and reads what it wrote."""
    with db.transaction():
        take_write_lock(db)
        figures = [reserved_by_others(db, r.budgets, now, r.holder, r.mine, r.to) for r in reads]
        requests = list(choose(figures))
        # decided in this transaction (a savepoint inside it), the writer lock still held
        return figures, decide(db, requests, now, (), None) if requests else []


def held_by(db: Connection, holder: Holder) -> list[str]:
    """The names ``holder``'s reservations are held under (``agent.ledger.reservations.holds``)."""
    prefix = holder_prefix(holder)
    rows = db.execute(
        "SELECT DISTINCT holder FROM leadtime_budget_reservations WHERE left(holder, %s) = %s",
        (len(prefix), prefix),
    ).fetchall()
    return sorted(name for (name,) in rows if holds(holder, str(name)))


def reserved_by_others(
    db: Connection,
    budgets: Sequence[str],
    now: datetime,
    holder: Holder,
    mine: Sequence[int],
    to: CountedTo | None = None,
) -> float:
    """The live reservations under ``budgets`` that ``holder`` does not hold and ``mine`` does not name; with
    ``to``, each carried to ``to.until`` over its own span (``agent.ledger.reservations.carried``)."""
    rows = [
        (str(name), float(amount), None if start is None else (from_us(int(start)), from_us(int(end))))
        for name, amount, start, end in db.execute(
            _LIVE_WITH_SPANS if has_spans(db) else _LIVE, (sorted(set(budgets)), to_us(now), list(mine))
        ).fetchall()
        if not holds(holder, str(name))
    ]
    pools = sorted({p for name, _, covers in rows if covers is not None for p in named_pools(name)})
    ends = recorded_ends(db, pools) if pools and to is not None else {}
    return sum(carried(amount, covers, now, to, recorded_to(named_pools(name), ends)) for name, amount, covers in rows)


def recorded_ends(db: Connection, pools: Sequence[str]) -> dict[str, datetime]:
    """Where each pool's recorded spend ends: its newest entry's end (one probe of the entries' end index per pool),
    read after the reservations, so never older than the spend they were made beside."""
    rows = db.execute(_ENDS, (sorted(set(pools)),)).fetchall()
    return {str(pool): from_us(int(end)) for pool, end in rows if end is not None}

"""Folding: a pool's consecutive charged intervals at the same units, inside one cell of the accrual grid, stored as
one entry, so the ledger grows by about one row per pool per grid cell (96 a day) instead of one per reading
(1,440 a day at a reading a minute).

Accrual (``agent.ledger.accrual``) charges each reading the interval since the pool's last one and leaves an
opening mark where it ends. When ``Ledger.update`` stores such an interval right after the pool's newest charged
entry, at the same units and in the same 15-minute cell of UTC (``accrual.GRID``), it extends that entry to the
interval's end and adds the interval's cost to it, and removes the opening mark the interval started from (the
entry now runs through it). The new opening mark is stored as before, so the newest entry of a pool, what accrual
and the meter resume from, is the same as without folding.

Every charged entry a ledger stores lies in one cell. The ledger counts an entry in a span by where it starts, so an
entry across a cell's edge would count wholly on the side where it starts: an hour's entry from 23:30 to 00:30 UTC
charged January for February's half hour. Accrual cuts its intervals on the grid, but an entry given to ``record``,
``record_many`` or by ``update``'s ``derive`` may span cells (copied from another ledger, or written by hand): the
ledgers cut each such entry on the grid first (``entries_on_grid``), each piece with its share of the cost for its
share of the time (the pieces add up to the entry's cost; held units cost the same every minute, as accrual
assumes), so each cell, hour and budget period is charged for its part of it. Opening marks are stored as given.

No spend figure changes by folding: every span the ledger is asked about starts and ends on the grid (budget periods
and hours in any time zone, billed pieces cut on the grid, each pool's first record for coverage). A folded entry
starts where its first interval did, in the cell all its intervals lie in, and costs their sum. Only a span that
starts or ends inside a cell sees a folded cell's spend all on the side where the entry starts: ``spent`` over
arbitrary minutes, and a billed row whose edges are off the grid (stored as pieces with those edges,
``agent.ledger.billed.on_grid``), which replaces the estimate of the entries that start in it: in the cell of such
an edge, the entry starts where the cell's first reading was, so the cell's estimate counts on that side of the edge
(before folding, each reading's interval counted on its own side). Billing exports bill hours or days, on the grid.

``record`` and ``record_many`` store entries cut on the grid but not folded: folding is part of charging spend, not
of storing it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from agent.ledger.accrual import GRID, is_mark, split
from models import LedgerEntry

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Folded:
    """What a ledger's ``update`` stores for the entries accrual derived: ``entries`` as ``accrual.resolve`` says,
    ``extended`` (a stored entry, what it becomes: same pool and start) in place, and the opening marks of
    ``dropped`` (pool, start) removed."""

    entries: tuple[LedgerEntry, ...]
    extended: tuple[tuple[LedgerEntry, LedgerEntry], ...] = ()
    dropped: tuple[tuple[str, datetime], ...] = ()


def fold(charged: Mapping[str, LedgerEntry | None], entries: Sequence[LedgerEntry], grid: timedelta = GRID) -> Folded:
    """``entries`` folded into the pools' newest stored charged entries (``charged``: the newest entry of each pool
    that is not a mark, when it ends where the pool's newest entry ends; ``None`` otherwise) and into each other.

    ``entries`` are cut on the grid first (``entries_on_grid``). An entry that starts inside a pool's newest charged
    entry was recorded already, folded into it, and is left out (as ``resolve`` leaves out an entry recorded
    twice)."""
    entries = entries_on_grid(entries, grid)
    out: list[LedgerEntry] = []
    # The newest charged entry of each pool: stored (None) or the place in ``out`` of one of this batch.
    last: dict[str, tuple[LedgerEntry, int | None]] = {p: (e, None) for p, e in charged.items() if e is not None}
    extended: dict[tuple[str, datetime], tuple[LedgerEntry, LedgerEntry]] = {}
    dropped: list[tuple[str, datetime]] = []
    for entry in entries:
        pool = entry.pool_id
        held = last.get(pool)
        if held is not None and held[0].start < entry.start < held[0].end:
            continue
        if held is not None and not is_mark(entry) and continues(held[0], entry, grid):
            before, at = held
            merged = LedgerEntry(pool, before.start, entry.end, before.units, before.cost_usd + entry.cost_usd)
            if at is None:
                key = (pool, before.start)
                extended[key] = (extended.get(key, (before, before))[0], merged)
            else:
                out[at] = merged
            last[pool] = (merged, at)
            dropped.append((pool, entry.start))
            continue
        if not is_mark(entry) and (held is None or entry.start >= held[0].end):
            last[pool] = (entry, len(out))
        out.append(entry)
    gone = set(dropped)
    kept = tuple(e for e in out if not (is_mark(e) and (e.pool_id, e.start) in gone))
    return Folded(kept, tuple(extended.values()), tuple(dropped))


def continues(before: LedgerEntry, entry: LedgerEntry, grid: timedelta = GRID) -> bool:
    """Whether ``entry`` can be folded into ``before``: it starts where ``before`` ends, at the same units, and
    both lie in one cell of the grid."""
    if is_mark(before) or is_mark(entry) or entry.start != before.end or entry.units != before.units:
        return False
    cell = _EPOCH + ((before.start - _EPOCH) // grid) * grid
    return entry.end <= cell + grid


def entries_on_grid(entries: Sequence[LedgerEntry], grid: timedelta = GRID) -> list[LedgerEntry]:
    """``entries`` cut at every multiple of ``grid`` since the Unix epoch, as accrual cuts its intervals, each piece
    at the entry's units with the share of its cost for its share of the time; an entry's pieces add up to its cost
    (the last takes the rounding). Entries within one cell, and opening marks, are kept as they are."""
    pieces: list[LedgerEntry] = []
    for entry in entries:
        spans = split(entry.start, entry.end, grid)
        if len(spans) < 2:
            pieces.append(entry)
            continue
        given = 0.0
        for i, (start, end) in enumerate(spans):
            last = i == len(spans) - 1
            share = entry.cost_usd - given if last else entry.cost_usd * ((end - start) / (entry.end - entry.start))
            given += share
            pieces.append(LedgerEntry(entry.pool_id, start, end, entry.units, share))
    return pieces

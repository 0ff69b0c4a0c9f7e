"""The Ledger interface: spend entries in, totals out. Implementations must not lose or double-count.

Entries are keyed by pool and start. Zero-length entries are opening marks (see ``agent.ledger.accrual``):
they cost nothing and say where accrual resumes; ``accrual.resolve`` decides what a repeated key stores.

``update`` is how spend is charged: the pools' newest entries are read inside the write transaction, so two
writers can never both extend the same entry (which would leave the interval between their readings uncharged).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from models import LedgerEntry

Newest = Mapping[str, LedgerEntry | None]
"""The newest recorded entry of each pool asked for (``None``: the pool has none)."""


class Ledger(Protocol):
    def record(self, entry: LedgerEntry) -> None:
        """Add spend for [entry.start, entry.end), cut on the accrual grid where it spans several cells, each piece
        with its share of the cost (``agent.ledger.folding.entries_on_grid``). Recording the same pool and start twice
        has no effect."""
        ...

    def record_many(self, entries: Sequence[LedgerEntry]) -> None:
        """Record several entries all together or not at all."""
        ...

    def update(self, pools: Sequence[str], derive: Callable[[Newest], Sequence[LedgerEntry]]) -> None:
        """Record the entries ``derive`` makes from the newest entries of ``pools``, read in the same write
        transaction as the entries are written in: no other writer's entries come between the read and the write.
        ``derive`` may be called again if the transaction is retried, so it must not act on anything else. An entry
        that continues the pool's newest charged one at the same units in the same grid cell is folded into it
        (``agent.ledger.folding``): spend over spans on the grid is the same."""
        ...

    def spent(self, pools: Sequence[str], start: datetime, end: datetime) -> float:
        """Spend of ``pools`` in entries that start in [start, end)."""
        ...

    def last_entry(self, pool_id: str) -> LedgerEntry | None:
        """The newest entry for the pool (latest end, then latest start): the state accrual resumes from."""
        ...


@runtime_checkable
class RecordedSince(Protocol):
    """A ledger that says since when it holds each pool's spend: the start of the pool's earliest record, an entry
    (an opening mark included: the agent's first observation of the pool) or a billed cost. Old entries and billed
    costs are removed (``agent.ledger.retention``), but never a pool's earliest of each, and an import replaces
    billed costs by others for the same time, so that instant only moves earlier
    (an import of billed costs for earlier time). A budget period that
    started before the earliest record of all its pools is recorded only in part: its spend so far misses the time
    before (see ``agent.ledger.coverage.LedgerCoverage``)."""

    @property
    def where(self) -> str:
        """Where the records are kept, for messages: a file, a database, or process memory."""
        ...

    def recorded_since(self, pools: Sequence[str]) -> dict[str, datetime]:
        """The start of the earliest record of each of ``pools`` that has one (one index probe per pool)."""
        ...

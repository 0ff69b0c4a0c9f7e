"""Budget reservations: how several agents that share one budget never spend the same last dollars twice.

Before a scale-up, an agent asks for the projected spend it adds (``ReservationRequest``). The ledger grants it
only if the budget's recorded spend in the period plus every live reservation plus the request stays within the
cap, deciding in one transaction that no other agent's request can interleave with. The agent releases the
reservation once the spend is recorded (or the scale-up abandoned); a reservation also expires at its
``expires_at``, so an agent that dies does not hold the budget for ever.

A request may also name other keys whose live reservations count against its cap (``counted_with``): the same period
reserved under another name, by agents of another release or, ahead of time, by requests made for it while it was
still the next period (``agent.budget_reserve``).

A reservation can also be replaced by its holder (``replacing_holder``): what a deployment keeps reserved for the
units it holds is named for the deployment, not for the replica that reserved it, so the replica that leads next
replaces its predecessor's reservations in the transaction that makes its own, instead of adding to them.

What the other agents sharing a budget keep reserved in its current period (``reserved_by_others``: the live
reservations under the period's keys that another holder made) is what their units go on costing to the period's
end; the planner adds it to its projection of the period (``agent.budget_watch``), which otherwise counts only its
own pools' units beside the spend recorded.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class ReservationRequest:
    budget: str
    pools: tuple[str, ...]  # the budget's pools: their recorded spend counts against the cap
    period_start: datetime
    period_end: datetime
    cap_usd: float
    amount_usd: float
    holder: str  # who asks (an agent's name), for operators reading the table
    ttl: timedelta
    counted_with: tuple[str, ...] = ()  # other keys whose live reservations count against this cap too

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key whose live reservations count against this cap: the request's own first."""
        return (self.budget, *(k for k in dict.fromkeys(self.counted_with) if k != self.budget))

    def __post_init__(self) -> None:
        if not self.amount_usd >= 0.0:
            raise ValueError(f"budget {self.budget!r}: a reservation must be a non-negative amount")
        if self.ttl <= timedelta(0):
            raise ValueError(f"budget {self.budget!r}: a reservation needs a positive time to live")
        if self.period_end <= self.period_start:
            raise ValueError(f"budget {self.budget!r}: the period must end after it starts")


@dataclass(frozen=True)
class Grant:
    """The answer to a request: the reservation when granted, and the headroom the cap had before it."""

    reservation_id: int | None
    headroom_usd: float

    @property
    def granted(self) -> bool:
        return self.reservation_id is not None


@runtime_checkable
class Reservations(Protocol):
    def reserve(self, request: ReservationRequest, now: datetime) -> Grant: ...

    def reserve_many(
        self,
        requests: Sequence[ReservationRequest],
        now: datetime,
        replacing: Sequence[int] = (),
        replacing_holder: str | None = None,
    ) -> list[Grant]:
        """Decide the requests in order, all in one transaction: each sees the grants before it. The reservations
        ``replacing`` names, and every reservation held by ``replacing_holder`` (whoever made it), are released in
        the same transaction, before the requests are decided."""
        ...

    def release(self, reservation_ids: Sequence[int]) -> None: ...

    def reserved(self, budget: str, now: datetime) -> float:
        """The amount of the budget's reservations still live at ``now``."""
        ...

    def reserved_by_others(self, budgets: Sequence[str], now: datetime, holder: str, mine: Sequence[int] = ()) -> float:
        """The amount of the reservations under any of ``budgets`` (keys) still live at ``now`` that ``holder`` does
        not hold and ``mine`` does not name: what other agents keep reserved there."""
        ...


Spent = Callable[[Sequence[str], datetime, datetime], float]


@dataclass(frozen=True)
class _Held:
    budget: str
    holder: str
    amount_usd: float
    expires_at: datetime


class ReservationBook:
    """Reservations kept in the process, for a ledger that one process alone writes (the in-memory ledger, and the
    SQLite one behind its writer lock): the same decisions as the PostgreSQL ledger's, made under a lock instead of
    a transaction. ``spent`` is the ledger's recorded spend; nothing else records while the lock is held, because
    this process is the only writer and its agent reserves before it records."""

    def __init__(self, spent: Spent) -> None:
        self._spent = spent
        self._lock = threading.Lock()
        self._held: dict[int, _Held] = {}
        self._ids = itertools.count(1)

    def reserve(self, request: ReservationRequest, now: datetime) -> Grant:
        return self.reserve_many([request], now)[0]

    def reserve_many(
        self,
        requests: Sequence[ReservationRequest],
        now: datetime,
        replacing: Sequence[int] = (),
        replacing_holder: str | None = None,
    ) -> list[Grant]:
        with self._lock:
            gone = set(replacing)
            self._held = {
                i: h
                for i, h in self._held.items()
                if h.expires_at > now and i not in gone and (replacing_holder is None or h.holder != replacing_holder)
            }
            reserved: dict[str, float] = {}
            for held in self._held.values():
                reserved[held.budget] = reserved.get(held.budget, 0.0) + held.amount_usd
            grants = []
            for request in requests:
                recorded = self._spent(request.pools, request.period_start, request.period_end)
                headroom = request.cap_usd - recorded - sum(reserved.get(k, 0.0) for k in request.keys)
                if request.amount_usd > headroom:
                    grants.append(Grant(None, headroom))
                    continue
                reservation_id = next(self._ids)
                self._held[reservation_id] = _Held(
                    request.budget, request.holder, request.amount_usd, now + request.ttl
                )
                reserved[request.budget] = reserved.get(request.budget, 0.0) + request.amount_usd
                grants.append(Grant(reservation_id, headroom))
            return grants

    def release(self, reservation_ids: Sequence[int]) -> None:
        with self._lock:
            for reservation_id in reservation_ids:
                self._held.pop(reservation_id, None)

    def reserved(self, budget: str, now: datetime) -> float:
        with self._lock:
            return sum(h.amount_usd for h in self._held.values() if h.budget == budget and h.expires_at > now)

    def reserved_by_others(self, budgets: Sequence[str], now: datetime, holder: str, mine: Sequence[int] = ()) -> float:
        keys, own = set(budgets), set(mine)
        with self._lock:
            return sum(
                h.amount_usd
                for i, h in self._held.items()
                if h.budget in keys and h.expires_at > now and h.holder != holder and i not in own
            )


class InProcessReservations:
    """Reservations kept by the one process allowed to write a ledger (the in-memory and SQLite ledgers), decided
    the same way as on PostgreSQL; the ledger sets ``_book`` to a ``ReservationBook`` over its own spend."""

    _book: ReservationBook

    def reserve(self, request: ReservationRequest, now: datetime) -> Grant:
        return self._book.reserve(request, now)

    def reserve_many(
        self,
        requests: Sequence[ReservationRequest],
        now: datetime,
        replacing: Sequence[int] = (),
        replacing_holder: str | None = None,
    ) -> list[Grant]:
        return self._book.reserve_many(requests, now, replacing, replacing_holder)

    def release(self, reservation_ids: Sequence[int]) -> None:
        self._book.release(reservation_ids)

    def reserved(self, budget: str, now: datetime) -> float:
        return self._book.reserved(budget, now)

    def reserved_by_others(self, budgets: Sequence[str], now: datetime, holder: str, mine: Sequence[int] = ()) -> float:
        return self._book.reserved_by_others(budgets, now, holder, mine)

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
replaces its predecessor's reservations in the transaction that makes its own, instead of adding to them. A
deployment's standing reservations (``StandingHolder``) are its own whatever list of pools their name gives, as long
as it names one of the deployment's pools (or an id one was known by): a deployment restarted with a pool added or
renamed replaces its predecessor's, and never counts them as another agent's.

What the other agents sharing a budget keep reserved in its current period (``reserved_by_others``: the live
reservations under the period's keys that another holder made) is what their units go on costing to the period's
end; the planner adds it to its projection of the period (``agent.budget_watch``), which otherwise counts only its
own pools' units beside the spend recorded.

Each reservation records the span of time its amount pays for (``ReservationRequest.covers``: from the request to
the period's end, or to the end of the commit horizon of the agent that made it), so that an agent reading what the
others hold over a span of its own (``reserved_by_others``'s ``to``: the period's end, or its own commit horizon)
counts each reservation at its own rate over that span, from where its pools' recorded spend ends
(``agent.ledger.reservation_spans``): a tick its agent recorded and has not yet replaced the reservation after is
counted once. A reservation without a span (made by an earlier release) is counted at its amount, as that release
reads it.

A decision that depends on what the others hold, and that they must see before they decide the same, reads and writes
in one step (``Claims.claim``: what the others hold under some keys, and the reservations asked on those figures, in
one transaction under the writer lock, as a grant is decided): two agents deciding at the same instant take turns,
the second reading what the first wrote. Readers never take the lock.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from agent.ledger.reservation_spans import named_pools, newest_ends, recorded_to


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
    covers: tuple[datetime, datetime] | None = None  # the span the amount pays for (``carried``); None: unknown

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
        if self.covers is not None and self.covers[1] < self.covers[0]:
            raise ValueError(f"budget {self.budget!r}: a reservation's span must end after it starts")


@dataclass(frozen=True)
class CountedTo:
    """How a reader counts the reservations of the other agents (``carried``): each to ``until``, at its own rate from
    its span's start; one without a span (an earlier release's) is taken to pay for the reader's own span, from the
    reading to ``own_end`` (as that release reads every reservation)."""

    until: datetime
    own_end: datetime


def carried(
    amount_usd: float,
    covers: tuple[datetime, datetime] | None,
    now: datetime,
    to: CountedTo | None,
    recorded_to: datetime | None = None,
) -> float:
    """What a reservation of ``amount_usd`` paying for the span ``covers`` comes to when its units are counted to
    ``to.until`` instead, at the same rate: carried past its end, or cut short of it. From its span's start, or from
    ``recorded_to`` (where its pools' recorded spend ends) if that is later: the spend before that is in the ledger
    already, and the spend since its start is not until its agent's next tick records it (and replaces the
    reservation with one from then). Without ``to``, its amount as it is."""
    if to is None:
        return amount_usd
    start, end = covers if covers is not None else (now, to.own_end)
    if end <= start:
        return amount_usd
    counted_from = start if covers is None or recorded_to is None else max(start, recorded_to)
    return amount_usd * max(timedelta(0), to.until - counted_from) / (end - start)


@dataclass(frozen=True)
class StandingHolder:
    """Who holds a deployment's standing reservations: its holder name (``name``: the Lease its replicas share, which
    deployments in different clusters may share too, every install naming it ``leadtime``) and its pools.

    They are made under ``label``, ``<name> (units held of <pool ids, sorted, comma-separated>)``, so that operators
    reading the table see whose units they are. A reservation is this deployment's (``holds``) when its holder is
    ``<name> (units held of <ids>)`` and ``<ids>`` names one of ``pools`` or of the ids they were known by before a
    rename (``previous_ids``): deployments sharing a ledger never share a pool id (the ledger keeps spend by pool
    id), so a predecessor made with another list of pools (a pool added, removed or renamed since) is still this
    deployment, and another deployment of the same name is not. A pool id holds no space, comma or parenthesis
    (``config.schema``), so the list reads back exactly whatever the name.

    A scale-up is reserved under ``scale_up_label``, ``<name> (scale-up of <pool id> to <units>)``, ``<units>`` being
    those its pool bills once it is carried out other than broken units and nodes being drained (which may be gone by
    the time a successor reads the pool while the units bought bill on: ``agent.budget_reserve.in_service``), until
    the standing reservations of its tick's commit take its units over. If the replica dies before that commit, the
    reservation is left: a successor's commit (``covered``: the units in service it reads in each pool, never more
    than it reserves for the pool) replaces it with its own standing ones where they cover it, that pool at no fewer
    units than the scale-up was to bring it to (``holds``), and leaves it to expire where they do not (the units asked
    for may still be coming)."""

    name: str
    pools: tuple[str, ...]
    previous_ids: tuple[str, ...] = ()
    covered: tuple[tuple[str, int], ...] = ()  # each pool's units in service a commit reserves (``holds``)

    def scale_up_label(self, pool_id: str, units: int) -> str:
        """The holder of a scale-up of ``pool_id`` to ``units`` in service."""
        return f"{self._scale_up_prefix}{pool_id} to {units})"

    @property
    def _scale_up_prefix(self) -> str:
        return f"{self.name} (scale-up of "

    @property
    def label(self) -> str:
        return f"{self.prefix}{', '.join(sorted(self.pools))})"

    @property
    def prefix(self) -> str:
        """What every label of this deployment begins with, whatever its pools."""
        return f"{self.name} (units held of "

    def holds(self, holder: str) -> bool:
        """Whether a reservation held by ``holder`` is one of this deployment's standing reservations, or a scale-up
        of one of its pools to no more units than ``covered`` reserves for it."""
        if not holder.endswith(")"):
            return False
        if holder.startswith(self._scale_up_prefix):
            pool_id, to, units = holder[len(self._scale_up_prefix) : -1].rpartition(" to ")
            covered = dict(self.covered)
            return bool(to) and units.isdigit() and pool_id in covered and int(units) <= covered[pool_id]
        if not holder.startswith(self.prefix):
            return False
        named = holder[len(self.prefix) : -1].split(", ")
        return not {*self.pools, *self.previous_ids}.isdisjoint(named)


Holder = str | StandingHolder  # one holder by its exact name, or a deployment's standing reservations


def holds(holder: Holder, name: str) -> bool:
    """Whether a reservation held by ``name`` is ``holder``'s."""
    return holder.holds(name) if isinstance(holder, StandingHolder) else name == holder


def holder_prefix(holder: Holder) -> str:
    """What the name of every reservation ``holder`` holds begins with (a database narrows its search by it)."""
    return f"{holder.name} (" if isinstance(holder, StandingHolder) else holder


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
        replacing_holder: Holder | None = None,
    ) -> list[Grant]:
        """Decide the requests in order, all in one transaction: each sees the grants before it. The reservations
        ``replacing`` names, and every reservation ``replacing_holder`` holds (whoever made it, ``holds``), are
        released in the same transaction, before the requests are decided."""
        ...

    def release(self, reservation_ids: Sequence[int]) -> None: ...

    def reserved(self, budget: str, now: datetime) -> float:
        """The amount of the budget's reservations still live at ``now``."""
        ...

    def reserved_by_others(
        self,
        budgets: Sequence[str],
        now: datetime,
        holder: Holder,
        mine: Sequence[int] = (),
        to: CountedTo | None = None,
    ) -> float:
        """The amount of the reservations under any of ``budgets`` (keys) still live at ``now`` that ``holder`` does
        not hold (``holds``) and ``mine`` does not name: what other agents keep reserved there. With ``to``, each is
        counted to ``to.until`` at its own rate over the span it pays for (``carried``)."""
        ...


@dataclass(frozen=True)
class OthersRead:
    """One reading of what the other agents hold (``Reservations.reserved_by_others``'s arguments)."""

    budgets: tuple[str, ...]
    holder: Holder
    mine: tuple[int, ...] = ()
    to: CountedTo | None = None


Choose = Callable[[Sequence[float]], Sequence[ReservationRequest]]  # the requests, on the figures each read gave


@runtime_checkable
class Claims(Protocol):
    def claim(self, reads: Sequence[OthersRead], choose: Choose, now: datetime) -> tuple[list[float], list[Grant]]:
        """What the others hold under each of ``reads`` (as ``reserved_by_others`` counts it), and the grants of the
        requests ``choose`` asks on those figures (decided as ``reserve_many`` decides them), in one transaction
        under the writer lock: no other agent's claim or reservation comes between the reading and the writing.
        ``choose`` may be called again if the transaction is retried: it must only compute."""
        ...


Spent = Callable[[Sequence[str], datetime, datetime], float]
Ends = Callable[[Sequence[str]], Mapping[str, datetime]]  # each pool's newest entry's end, of those recorded
Elsewhere = Callable[[Sequence[str], datetime], float]  # live reservations under keys that this book does not keep


@dataclass(frozen=True)
class _Held:
    budget: str
    holder: str
    amount_usd: float
    expires_at: datetime
    covers: tuple[datetime, datetime] | None = None


class ReservationBook:
    """Reservations kept in the process, for a ledger that one process alone writes (the in-memory ledger, and the
    SQLite one behind its writer lock): the same decisions as the PostgreSQL ledger's, made under a lock instead of
    a transaction. ``spent`` is the ledger's recorded spend; nothing else records while the lock is held, because
    this process is the only writer and its agent reserves before it records. ``elsewhere`` (a dry run's book over a
    ledger it only reads) counts the ledger's own live reservations under a request's keys against its cap too."""

    def __init__(self, spent: Spent, elsewhere: Elsewhere | None = None) -> None:
        self._spent = spent
        self._elsewhere = elsewhere
        self._lock = threading.RLock()  # a claim reads through its ledger (``claim``'s ``read``) under it
        self._held: dict[int, _Held] = {}
        self._ids = itertools.count(1)

    def reserve(self, request: ReservationRequest, now: datetime) -> Grant:
        return self.reserve_many([request], now)[0]

    def reserve_many(
        self,
        requests: Sequence[ReservationRequest],
        now: datetime,
        replacing: Sequence[int] = (),
        replacing_holder: Holder | None = None,
    ) -> list[Grant]:
        with self._lock:
            gone = set(replacing)
            self._held = {
                i: h
                for i, h in self._held.items()
                if h.expires_at > now
                and i not in gone
                and (replacing_holder is None or not holds(replacing_holder, h.holder))
            }
            reserved: dict[str, float] = {}
            for held in self._held.values():
                reserved[held.budget] = reserved.get(held.budget, 0.0) + held.amount_usd
            grants = []
            for request in requests:
                recorded = self._spent(request.pools, request.period_start, request.period_end)
                if self._elsewhere is not None:
                    recorded += self._elsewhere(request.keys, now)
                headroom = request.cap_usd - recorded - sum(reserved.get(k, 0.0) for k in request.keys)
                if request.amount_usd > headroom:
                    grants.append(Grant(None, headroom))
                    continue
                reservation_id = next(self._ids)
                self._held[reservation_id] = _Held(
                    request.budget, request.holder, request.amount_usd, now + request.ttl, request.covers
                )
                reserved[request.budget] = reserved.get(request.budget, 0.0) + request.amount_usd
                grants.append(Grant(reservation_id, headroom))
            return grants

    def claim(
        self,
        reads: Sequence[OthersRead],
        choose: Choose,
        now: datetime,
        read: Callable[[OthersRead], float] | None = None,
    ) -> tuple[list[float], list[Grant]]:
        """``Claims.claim`` under this book's lock: ``read`` counts what the others hold (the ledger's
        ``reserved_by_others``, a dry run's reading the ledger beside its book; ``None``: this book's)."""
        with self._lock:
            count = read or (lambda r: self.reserved_by_others(r.budgets, now, r.holder, r.mine, r.to))
            figures = [count(r) for r in reads]
            requests = list(choose(figures))
            return figures, self.reserve_many(requests, now) if requests else []

    def release(self, reservation_ids: Sequence[int]) -> None:
        with self._lock:
            for reservation_id in reservation_ids:
                self._held.pop(reservation_id, None)

    def reserved(self, budget: str, now: datetime) -> float:
        with self._lock:
            return sum(h.amount_usd for h in self._held.values() if h.budget == budget and h.expires_at > now)

    def reserved_by_others(
        self,
        budgets: Sequence[str],
        now: datetime,
        holder: Holder,
        mine: Sequence[int] = (),
        to: CountedTo | None = None,
        ends: Ends | None = None,
    ) -> float:
        """``ReservationBook``'s reservations that others hold, each counted from where ``ends`` says its pools'
        recorded spend ends (``agent.ledger.reservation_spans``; ``None``: from its span's start)."""
        keys, own = set(budgets), set(mine)
        with self._lock:
            held = [
                h
                for i, h in self._held.items()
                if h.budget in keys and h.expires_at > now and not holds(holder, h.holder) and i not in own
            ]
            pools = sorted({p for h in held if h.covers is not None for p in named_pools(h.holder)})
            recorded = {} if ends is None or to is None or not pools else ends(pools)
            return sum(
                carried(h.amount_usd, h.covers, now, to, recorded_to(named_pools(h.holder), recorded)) for h in held
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
        replacing_holder: Holder | None = None,
    ) -> list[Grant]:
        return self._book.reserve_many(requests, now, replacing, replacing_holder)

    def claim(self, reads: Sequence[OthersRead], choose: Choose, now: datetime) -> tuple[list[float], list[Grant]]:
        """``Claims.claim``, decided under the book's lock: this process is the only one writing the ledger."""
        return self._book.claim(
            reads, choose, now, lambda r: self.reserved_by_others(r.budgets, now, r.holder, r.mine, r.to)
        )

    def release(self, reservation_ids: Sequence[int]) -> None:
        self._book.release(reservation_ids)

    def reserved(self, budget: str, now: datetime) -> float:
        return self._book.reserved(budget, now)

    def reserved_by_others(
        self,
        budgets: Sequence[str],
        now: datetime,
        holder: Holder,
        mine: Sequence[int] = (),
        to: CountedTo | None = None,
    ) -> float:
        return self._book.reserved_by_others(budgets, now, holder, mine, to, lambda pools: newest_ends(self, pools))

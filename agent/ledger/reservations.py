"""Budget reservations: how several agents that share one budget never spend the same last dollars twice.

Before a scale-up, an agent asks for the projected spend it adds (``ReservationRequest``). The ledger grants it
only if the budget's recorded spend in the period plus every live reservation plus the request stays within the
cap, deciding in one transaction that no other agent's request can interleave with. The agent releases the
reservation once the spend is recorded (or the scale-up abandoned); a reservation also expires at its
``expires_at``, so an agent that dies does not hold the budget for ever.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol


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


class Reservations(Protocol):
    def reserve(self, request: ReservationRequest, now: datetime) -> Grant: ...

    def release(self, reservation_ids: Sequence[int]) -> None: ...

    def reserved(self, budget: str, now: datetime) -> float:
        """The amount of the budget's reservations still live at ``now``."""
        ...

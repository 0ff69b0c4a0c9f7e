"""Whether a call that changes a pool may still be sent, and the time limit it is sent with.

A replica acts only while it leads, up to its renew deadline; a standby takes over no earlier than
``lease_duration`` after the leader's last renewal. A resize reads the cloud first (GKE's node pool, each zone's
instance group, an Auto Scaling group's activities) and writes last, so a check made when the resize starts says
nothing about the moment its write is sent: the reads may have taken longer than the leader had left.

The leader-only guard (``agent.daemon.guard``) opens a window around each resize and drain it lets through. The
adapters ask it right before each write (``write_timeout``), after their reads: the write is sent only when the
leadership left covers its whole time limit, and with that limit (a Google client's ``timeout=`` and ``retry=None``,
an AWS client of one attempt bounded by it), so it has ended, answered or given up, before the renew deadline.
Otherwise it is refused with a TransientActuatorError and not sent (its ``maybe_applied`` false, unless an earlier write
of the same change was sent: ``writes_sent``): the next tick, led by whichever replica leads
then, plans again from what it reads. A request the cloud received but applies after the client gave up is the
cloud's: it still lands before any standby can take over if the cloud applies it within ``lease_duration -
renew_deadline`` of the time limit. Outside a window (an adapter used on its own) every write still gets
``DEFAULT_WRITE_TIMEOUT``.

A change may take several writes (a shrink deleting instances zone by zone, an Auto Scaling group's desired capacity
lowered and then instances terminated): one refused after an earlier one was sent leaves that one carried out. The
executor counts the writes each change asks for (``writes_sent``): a TransientActuatorError after the first may
leave part of the change applied, whatever it says of its own request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta

from models import TransientActuatorError

# The time limit of a write outside a window; the daemon's is ``LeaderElectionSettings.write_limit`` (5s by default).
DEFAULT_WRITE_TIMEOUT = timedelta(seconds=5)


@dataclass(frozen=True)
class WriteWindow:
    """``limit``: the time limit of one write. ``lead_left``: seconds of leadership left on the replica's monotonic
    clock, read at each write (None: leadership does not lapse, a sole replica)."""

    limit: timedelta
    lead_left: Callable[[], float | None]

    def timeout(self, pool_id: str, sent_before: bool = False) -> float:
        """The time limit of the next write; refused when the leadership left does not cover it. ``sent_before``:
        an earlier write of the same change was sent, which the refusal leaves applied (``maybe_applied``)."""
        limit = self.limit.total_seconds()
        left = self.lead_left()
        if left is not None and left < limit:
            raise TransientActuatorError(
                pool_id,
                f"this replica leads for {max(left, 0.0):.1f}s more, less than the {limit:g}s a write may take: "
                "the write is not sent, the next tick plans again",
                maybe_applied=sent_before,
            )
        return limit


_current: ContextVar[WriteWindow | None] = ContextVar("write_window", default=None)
_sent: ContextVar[list[str] | None] = ContextVar("writes_sent", default=None)


@contextmanager
def write_window(window: WriteWindow) -> Iterator[None]:
    """Every write of the adapters called inside asks ``window`` first."""
    token = _current.set(window)
    try:
        yield
    finally:
        _current.reset(token)


@contextmanager
def writes_sent() -> Iterator[list[str]]:
    """The pools of the writes the adapters called inside send (one entry a write let through ``write_timeout``)."""
    sent: list[str] = []
    token = _sent.set(sent)
    try:
        yield sent
    finally:
        _sent.reset(token)


def write_timeout(pool_id: str) -> float:
    """Seconds the next write of ``pool_id`` may take; raises TransientActuatorError when it may not be sent."""
    window, sent = _current.get(), _sent.get()
    limit = DEFAULT_WRITE_TIMEOUT.total_seconds() if window is None else window.timeout(pool_id, bool(sent))
    if sent is not None:
        sent.append(pool_id)
    return limit

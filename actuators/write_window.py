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
of the same change was accepted: ``writes_sent``): the next tick, led by whichever replica leads
then, plans again from what it reads. A request the cloud received but applies after the client gave up is the
cloud's: it still lands before any standby can take over if the cloud applies it within ``lease_duration -
renew_deadline`` of the time limit. Outside a window (an adapter used on its own) every write still gets
``DEFAULT_WRITE_TIMEOUT``.

A change may take several writes (a shrink deleting instances zone by zone, an Auto Scaling group's desired capacity
lowered and then instances terminated), and reads after them (the GKE operation a write started, looked at once). A
write is accepted once its call returned (``write_returned``; ``vendor_errors.call_google`` says so of every call it
makes, an adapter calling a client itself says so after the call; a write asked after another one that never said
counts the other as returned: the change went on past it). The executor and the drains count the writes of each change
(``writes_sent``): an error raised after one was accepted, of whatever kind (a later write refused, the look at the
operation rate limited or refused), leaves the change under way (``Writes.maybe_applied``); the error of the write call
itself says for its own request (``TransientActuatorError.maybe_applied``). So does an error read from the operation a
write started (done at once with an error: GKE's 409 aborted or 429 too many operations, a Compute resize whose
operation lists errors): it is the cloud's answer to that write, which is then no longer counted accepted
(``write_refused``); only a look at the operation that fails leaves the write accepted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta

from models import ActuatorError, TransientActuatorError

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
        an earlier write of the same change was accepted, which the refusal leaves applied (``maybe_applied``)."""
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


@dataclass
class Writes:
    """The writes of one change (``writes_sent``): ``asked``, the pool of each write let through ``write_timeout``;
    ``accepted``, of those whose call returned (the cloud took the request) and whose operation was not read done
    with an error (``write_refused``). ``pending``: the write asked last, whose call has not said yet whether it
    returned (``write_returned``) or raised (``write_raised``)."""

    asked: list[str] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)
    pending: str | None = None

    def maybe_applied(self, exc: ActuatorError) -> bool:
        """Whether the change, failing with ``exc``, may have been carried out, at least in part: a write of it was
        accepted before ``exc`` was raised, whatever ``exc`` is, or ``exc`` says its own request may have reached the
        cloud (``TransientActuatorError.maybe_applied``)."""
        return bool(self.accepted) or (isinstance(exc, TransientActuatorError) and exc.maybe_applied)


_current: ContextVar[WriteWindow | None] = ContextVar("write_window", default=None)
_sent: ContextVar[Writes | None] = ContextVar("writes_sent", default=None)


@contextmanager
def write_window(window: WriteWindow) -> Iterator[None]:
    """Every write of the adapters called inside asks ``window`` first."""
    token = _current.set(window)
    try:
        yield
    finally:
        _current.reset(token)


@contextmanager
def writes_sent() -> Iterator[Writes]:
    """The writes the adapters called inside ask for and have accepted."""
    sent = Writes()
    token = _sent.set(sent)
    try:
        yield sent
    finally:
        _sent.reset(token)


def write_timeout(pool_id: str) -> float:
    """Seconds the next write of ``pool_id`` may take; raises TransientActuatorError when it may not be sent. A write
    asked before still pending returned: the change went on past it."""
    window, sent = _current.get(), _sent.get()
    if sent is not None and sent.pending is not None:
        write_returned()
    before = sent is not None and bool(sent.accepted)
    limit = DEFAULT_WRITE_TIMEOUT.total_seconds() if window is None else window.timeout(pool_id, before)
    if sent is not None:
        sent.asked.append(pool_id)
        sent.pending = pool_id
    return limit


def write_returned() -> None:
    """The call of the write asked last (``write_timeout``) returned: the cloud accepted it. Nothing when no write
    is pending (a read's call)."""
    sent = _sent.get()
    if sent is not None and sent.pending is not None:
        sent.accepted.append(sent.pending)
        sent.pending = None


def write_refused() -> None:
    """The write accepted last was refused all the same: the operation it started was read done with an error, the
    cloud's answer to it. It is no longer counted accepted (nor is a write still pending, the one asked last): the
    error read says for it, as its call's own would have (``TransientActuatorError.maybe_applied``)."""
    sent = _sent.get()
    if sent is None:
        return
    if sent.pending is not None:
        sent.pending = None
    elif sent.accepted:
        sent.accepted.pop()


def write_raised() -> None:
    """The call of the write asked last raised: its error says for its own request, it is not counted accepted."""
    sent = _sent.get()
    if sent is not None:
        sent.pending = None

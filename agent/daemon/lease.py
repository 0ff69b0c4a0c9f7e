"""Leader election on a coordination.k8s.io Lease: our own small loop over the kubernetes client.

The client's ``leaderelection`` module is not used: when the connection itself fails its leader thread dies
without ever reporting that it stopped leading, so a second replica takes over while the first still acts.

The rules, all measured on this replica's own monotonic clock, as client-go does: a wall clock stepped back or
forward (NTP, a VM resumed) changes neither deadline. The daemon injects its clock's (``SystemClock.monotonic``:
``models.clock.steady_seconds``, ``CLOCK_BOOTTIME`` on Linux), which counts the time the machine was suspended, so
a leader whose VM was suspended past its renew deadline stops acting when it resumes; ``time.monotonic``, which
stands still while suspended, is only the default for an elector built without one. The wall time (``now``, always
passed in) is only written into the Lease (renew and acquire times) and reported as last contact.

* The leader acts only while its monotonic clock is before the last successful renewal + renew_deadline. A
  renewal counts from the moment it was *sent*, so a slow or lost answer only shortens the window.
* A standby takes the lease only after it has seen the same holder record, unchanged, for the record's lease
  duration, measured from when *it* first saw that record, that is when the answer that showed it *arrived* (as
  client-go's ``setObservedRecord`` after ``Get``): a renewal written while a slow read was in flight is dated
  no earlier than it can have been sent. Never from the timestamp written in the record, so clock skew between
  nodes does not matter.
* A Lease that is gone (deleted by hand or by a prune) is created at once only by a replica that never saw it held
  by another, or that held it itself less than a lease duration ago (nobody can have taken it since); one that saw
  another holder waits that record's lease duration first, as if the Lease were still there, since its holder may
  still be acting, and one whose own record is older (its rounds stalled: a frozen process, a paused VM) waits a
  lease duration from when it found the Lease gone, since another may have taken it meanwhile and still act.
* A term is the time one replica holds the Lease without another holder in between. A replica that led when its
  rounds stopped (a frozen process, a paused VM) and finds the Lease held by another or by nobody when they resume
  has missed its term's end: that round reports the loss, and the lease is taken, if free, at a later round, which
  reports a new leader (so the daemon reloads what the other leader saved before its next leader tick). A renewal
  of a record still its own continues the term, however late: nobody else led meanwhile. A term this replica takes
  from a record that does not name it (another holder's, or one a release emptied), or by creating the Lease unless
  its own record was seen less than a lease duration ago (nobody can have taken it since), is a new term after which
  another replica may have led: it is counted (``terms``) before this replica acts in it, so the daemon's first
  leader tick of the term, even one that starts before the round that took it ends, forgets what only the leader of
  the term before could know to be current (its drains: another leader may have carried them on and settled them).
  A take whose answer is lost (a read timeout after the API server applied it) is counted by the round that finds
  the record naming this replica and renews it. A round that finds another holder instead counts nothing (the take
  did not land, or another replica took the lease since, before this one led in it): this replica leads again only
  through a take of that holder's record, or a create, which counts its term once whatever was noted before.
* Every write carries the resourceVersion that was read: of two replicas racing for the lease, the API server
  accepts one and answers 409 to the other.

Because ``renew_deadline < lease_duration`` and a standby sees a renewal no earlier than it was sent, the old
leader has stopped acting before any standby can take over. Stopping to act is not enough for a write already on
its way: the leader sends a cloud write only while the leadership it has left (``lead_left``) covers the write's
whole time limit, so the write has ended before the renew deadline (``actuators.write_window``). A release (the
holder emptied on shutdown) skips the standby's wait, so it is made only once the leader has stopped acting; a
leader stopped with a tick still running lets its lease lapse instead.

The Lease is written as the API server reads it: ``leaseDurationSeconds`` is whole seconds, rounded up (a
standby waits at least the configured duration); ``renewTime``/``acquireTime`` are MicroTime, always with six
fractional digits (the API server's layout ``2006-01-02T15:04:05.000000Z07:00`` refuses whole seconds). A renewal
keeps what it read besides the fields it owns: the holder's ``acquireTime``, and labels, annotations and owners.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from kube.api import Leases
from kube.models import V1Lease, V1LeaseSpec, V1ObjectMeta
from models.errors import KubernetesApiError, KubernetesConflict, KubernetesNotFound

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseRecord:
    """What the Lease says: who holds it, for how long, and the version that was read."""

    holder: str
    duration: timedelta
    transitions: int
    resource_version: str | None
    acquired: datetime | None = None  # when the holder took it (kept on renewal)


@dataclass(frozen=True)
class ElectionStep:
    """The outcome of one attempt: whether this replica leads afterwards, and what changed."""

    leading: bool
    became_leader: bool = False
    lost_leadership: bool = False
    holder: str = ""
    error: str | None = None
    new_term: bool = False  # this round took the lease as a new term: another replica may have led since (``terms``)


class LeaseElector:
    """One replica's side of the election. Not thread-safe for ``step``; call it from one job at a time."""

    def __init__(
        self,
        leases: Leases,
        *,
        name: str,
        namespace: str,
        identity: str,
        lease_duration: timedelta,
        renew_deadline: timedelta,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if renew_deadline >= lease_duration:
            raise ValueError("renew_deadline must be shorter than lease_duration")
        self._leases = leases
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self._lease_duration = lease_duration
        self._renew_deadline = renew_deadline
        self._monotonic = monotonic
        self._renewed_at: float | None = None  # monotonic seconds when the last successful renewal was sent
        self._observed: LeaseRecord | None = None
        self._read: V1Lease | None = None  # the Lease as last read, whose metadata a write keeps
        self._observed_at: float | None = None  # monotonic seconds when this record was first seen
        self._gone_at: float | None = None  # monotonic seconds when the Lease was found gone after a stale own record
        self._was_leading = False
        self._terms = 0  # the new terms taken (``terms``)
        # A take of the lease as a new term was sent and its answer not had (a read timeout after the API server
        # applied it): the next round that finds the record naming this replica counts the term; any write answered
        # clears it, counted once with it (``_took``)
        self._take_sent = False
        self.last_error: str | None = None
        self.last_contact: datetime | None = None

    # -- queries ------------------------------------------------------------------------------------------
    def is_leader(self, now: datetime | None = None) -> bool:
        """True only while the last successful renewal is younger than the renew deadline on the monotonic
        clock. ``now`` (wall time) is accepted for the callers' ``Leadership`` protocol and never compared."""
        return self._renewed_at is not None and self._monotonic() < self._deadline(self._renewed_at)

    def holds_lease(self, now: datetime | None = None) -> bool:
        """True while the last successful renewal is younger than the lease duration on the monotonic clock: no
        other replica can have taken the lease meanwhile (a standby takes it only once it has seen the same record
        unchanged for a lease duration), though past the renew deadline this replica no longer acts. What sends
        the one daily report: a renewal late by a few seconds at the report time must not cost the day its report.
        ``now`` as for ``is_leader``."""
        return (
            self._renewed_at is not None and self._monotonic() < self._renewed_at + self._lease_duration.total_seconds()
        )

    def lead_left(self) -> float:
        """Seconds of leadership left without another renewal, on the monotonic clock (0 when not leading): a
        write must end within them (``actuators.write_window``)."""
        if self._renewed_at is None:
            return 0.0
        return max(0.0, self._deadline(self._renewed_at) - self._monotonic())

    def leading_until(self, now: datetime) -> datetime | None:
        """When leadership lapses without another renewal, as a wall time seen from ``now`` (for display)."""
        if self._renewed_at is None:
            return None
        return now + timedelta(seconds=self._deadline(self._renewed_at) - self._monotonic())

    @property
    def holder(self) -> str:
        return self._observed.holder if self._observed else ""

    @property
    def terms(self) -> int:
        """How many new terms this replica has taken, after each of which another replica may have led since it last
        did: the Lease taken from a record naming another holder or none (a release), or created, unless this
        replica's own record was seen less than a lease duration before (nobody can have taken it since). Counted
        before the replica leads in the term (``is_leader``); a renewal of its own record, however late, is none."""
        return self._terms

    # -- the loop body ------------------------------------------------------------------------------------
    def step(self, now: datetime) -> ElectionStep:
        """Read the Lease; renew it if ours, take it if free or expired; otherwise watch it. Never raises for
        an API or connection failure: that is reported in the result and simply means no renewal this round.
        ``now`` is the wall time written into the Lease."""
        error: str | None = None
        terms = self._terms
        try:
            self._attempt(now, self._monotonic())
        except KubernetesApiError as exc:
            error = str(exc)
        else:
            self.last_contact = now
        if error and error != self.last_error:  # once per outage, not every retry period
            log.warning("leader election: %s (lease %s/%s)", error, self.namespace, self.name)
        elif self.last_error and not error:
            log.info("leader election: the Kubernetes API answers again")
        self.last_error = error
        leading = self.is_leader()
        step = ElectionStep(
            leading=leading,
            became_leader=leading and not self._was_leading,
            lost_leadership=self._was_leading and not leading,
            holder=self.holder,
            error=error,
            new_term=self._terms != terms,
        )
        self._was_leading = leading
        if step.became_leader:
            log.info("leader election: %s now leads (lease %s/%s)", self.identity, self.namespace, self.name)
        if step.lost_leadership:
            log.warning("leader election: %s stopped leading (last renewal too old)", self.identity)
        return step

    def release(self, now: datetime) -> bool:
        """Give the lease up on shutdown so a standby takes over at once. Only when this replica still leads, and
        only once it has stopped acting (no tick running, so no cloud write on its way): a standby takes an empty
        holder at once, without waiting any duration, so the invariant above rests on the caller
        (``DaemonRuntime.stop`` lets the lease lapse instead when a tick outlives the shutdown wait)."""
        if not self.is_leader() or self._observed is None:
            return False
        body = self._lease(
            LeaseRecord("", timedelta(seconds=1), self._observed.transitions, self._observed.resource_version), now
        )
        self._renewed_at = None
        self._was_leading = False
        try:
            self._leases.replace(self.name, self.namespace, body)
        except KubernetesApiError as exc:
            log.warning("leader election: could not release lease %s/%s: %s", self.namespace, self.name, exc)
            return False
        log.info("leader election: %s released lease %s/%s", self.identity, self.namespace, self.name)
        return True

    # -- internals ----------------------------------------------------------------------------------------
    def _attempt(self, now: datetime, sent: float) -> None:
        """One round; ``sent`` is the monotonic time before the first request, from which a renewal counts."""
        try:
            current = self._leases.read(self.name, self.namespace)
        except KubernetesNotFound:
            if self._may_create(sent):
                self._create(now, sent, new_term=not self._own_seen_lately(sent))
            return
        self._gone_at = None
        record = _record_of(current)
        if record != self._observed:  # dated when the answer arrived, not when it was asked for
            self._observed, self._observed_at = record, self._monotonic()
        self._read = current
        if record.holder == self.identity:
            self._write(record, now, sent, transitions=record.transitions)
            return
        # Someone else holds it (we may have been replaced while cut off): whatever our clock says, stop now.
        self._renewed_at = None
        # A replica that led when its last round ended missed its term's end: this round reports the loss, and a
        # later one takes the lease as a new term.
        if not self._was_leading and self._may_take(record, sent):
            self._write(record, now, sent, transitions=record.transitions + 1)

    def _may_take(self, record: LeaseRecord, sent: float) -> bool:
        if not record.holder:
            return True
        assert self._observed_at is not None  # set just before in _attempt
        return sent - self._observed_at >= record.duration.total_seconds()

    def _may_create(self, sent: float) -> bool:
        """Whether to create a Lease that is not there. A Lease someone else held may have been deleted (by hand,
        by a prune) while its holder still acts, up to its renew deadline: wait its duration from when its record
        was last seen, as for a lease still held. Never seen one, seen held by nobody, or ours when last seen less
        than its duration ago: create it at once. Ours but last seen longer ago (this replica's rounds stalled, and
        another may have taken it since and still act): wait its duration from when it was found gone."""
        seen = self._observed
        if seen is None or not seen.holder:
            return True
        assert self._observed_at is not None  # set with _observed
        duration = seen.duration.total_seconds()
        if seen.holder != self.identity:
            return sent - self._observed_at >= duration
        if self._own_seen_lately(sent):  # ours, seen too recently for another to have taken it since
            return True
        # Ours, but seen so long ago (this replica's rounds stalled) that another may have taken the lease since and
        # still act: wait a lease duration from when the Lease was found gone.
        if self._gone_at is None:
            self._gone_at = sent
        return sent - self._gone_at >= duration

    def _own_seen_lately(self, sent: float) -> bool:
        """Whether the record last seen is this replica's own, seen less than its lease duration before ``sent``:
        no other replica can have taken the lease since."""
        seen = self._observed
        if seen is None or seen.holder != self.identity or self._observed_at is None:
            return False
        return sent - self._observed_at < seen.duration.total_seconds()

    def _deadline(self, renewed_at: float) -> float:
        return renewed_at + self._renew_deadline.total_seconds()

    def _create(self, now: datetime, sent: float, new_term: bool) -> None:
        record = LeaseRecord(self.identity, self._lease_duration, 0, None)
        self._take_sent = self._take_sent or new_term  # counted at the round that finds it written if unanswered
        try:
            created = self._leases.create(self.namespace, self._lease(record, now, acquired=True))
        except KubernetesConflict:
            # Another replica created it first: it leads, whatever our clock says.
            self._renewed_at = None
            raise
        self._took(created, sent, new_term)

    def _write(self, seen: LeaseRecord, now: datetime, sent: float, transitions: int) -> None:
        taking = seen.holder != self.identity
        acquired = None if taking else seen.acquired
        record = LeaseRecord(self.identity, self._lease_duration, transitions, seen.resource_version, acquired)
        self._take_sent = self._take_sent or taking  # counted at the round that finds it written if unanswered
        try:
            written = self._leases.replace(self.name, self.namespace, self._lease(record, now, acquired=taking))
        except KubernetesConflict:
            # Someone else wrote the lease since we read it: whatever our clock says, we no longer lead.
            self._renewed_at = None
            raise
        self._took(written, sent, new_term=taking)

    def _took(self, lease: V1Lease, sent: float, new_term: bool) -> None:
        """The lease written (``new_term``: taken as a new term). A renewal of a record naming this replica after
        a take whose answer was lost (``_take_sent``: the API server applied it) is that take's term, counted here."""
        if new_term or self._take_sent:  # counted before ``is_leader`` says so: a tick that starts as leader finds it
            self._terms += 1
        self._take_sent = False
        self._renewed_at = sent
        self._observed, self._observed_at, self._gone_at = _record_of(lease), sent, None

    def _lease(self, record: LeaseRecord, now: datetime, acquired: bool = False) -> V1Lease:
        spec = V1LeaseSpec(
            holder_identity=record.holder or None,
            lease_duration_seconds=max(1, math.ceil(record.duration.total_seconds() - 1e-9)),
            renew_time=micro_time(now),
            lease_transitions=record.transitions,
        )
        if acquired:
            spec.acquire_time = micro_time(now)
        elif record.acquired is not None and record.holder:
            spec.acquire_time = micro_time(record.acquired)
        read = self._read.metadata if self._read is not None and self._read.metadata is not None else None
        meta = V1ObjectMeta(
            name=self.name,
            namespace=self.namespace,
            resource_version=record.resource_version,
            labels=read.labels if read is not None else None,
            annotations=read.annotations if read is not None else None,
            owner_references=read.owner_references if read is not None else None,
        )
        return V1Lease(api_version="coordination.k8s.io/v1", kind="Lease", metadata=meta, spec=spec)


def micro_time(at: datetime) -> str:
    """A Kubernetes MicroTime: UTC, always six fractional digits (``isoformat`` drops them at a whole second, and
    the API server refuses that)."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _record_of(lease: V1Lease) -> LeaseRecord:
    spec = lease.spec
    seconds = spec.lease_duration_seconds if spec is not None and spec.lease_duration_seconds else 0
    return LeaseRecord(
        holder=(spec.holder_identity or "") if spec is not None else "",
        duration=timedelta(seconds=seconds),
        transitions=(spec.lease_transitions or 0) if spec is not None else 0,
        resource_version=lease.metadata.resource_version if lease.metadata is not None else None,
        acquired=spec.acquire_time if spec is not None else None,
    )

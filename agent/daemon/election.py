"""What the daemon elects a leader with: the ``Elector`` interface (``agent.daemon.lease.LeaseElector`` is the one on a
Kubernetes Lease), ``CountsTerms`` for an elector after whose terms another replica may have led,
``SoleReplicaElector`` for a replica that leads alone (election switched off), and the ``Probe`` a standby runs to
check that it could read its demand as leader.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable

from agent.daemon.lease import ElectionStep


class Elector(Protocol):
    identity: str
    last_error: str | None
    last_contact: datetime | None

    def step(self, now: datetime) -> ElectionStep: ...

    def is_leader(self, now: datetime) -> bool: ...

    def holds_lease(self, now: datetime) -> bool: ...

    def release(self, now: datetime) -> bool: ...


@runtime_checkable
class CountsTerms(Protocol):
    """An elector whose replica may lead again after another replica led (``LeaseElector``): how many such new terms
    it has taken, each counted before the replica leads in it. A change of the count between two of the daemon's
    resumes says another replica may have led in between; a sole replica's elector counts none."""

    @property
    def terms(self) -> int: ...


@runtime_checkable
class Probe(Protocol):
    """What a standby checks it could read as leader: ``probe`` raises, saying why, when it cannot
    (``PrometheusSource.probe``: one instant query of ``vector(1)`` without retries)."""

    def probe(self) -> None: ...


class SoleReplicaElector:
    """Election switched off: one replica, always the leader. For single-replica and local runs."""

    def __init__(self, identity: str) -> None:
        self.identity = identity
        self.last_error: str | None = None
        self.last_contact: datetime | None = None
        self._started = False

    def step(self, now: datetime) -> ElectionStep:
        self.last_contact = now
        became = not self._started
        self._started = True
        return ElectionStep(leading=True, became_leader=became, holder=self.identity)

    def is_leader(self, now: datetime) -> bool:
        return True

    def holds_lease(self, now: datetime) -> bool:
        return True

    def release(self, now: datetime) -> bool:
        return False

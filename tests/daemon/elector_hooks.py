"""What a test does to one replica's elector from outside it (``ElectorHooks``, given to ``elector_for``): writes of
the Lease the API server applies whose answers are lost (a read timeout), and something run inside an election round
once the round has taken the answer of its write in, before the round returns (the tick thread starting a tick then).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from kubernetes import client as k8s

from kube import Leases
from kube.models import V1Lease
from models.clock import SimulatedClock
from models.errors import KubernetesUnavailable


class ElectorHooks:
    """``answers_lost``: how many of the next writes of the Lease (a renewal, a take, a create) land and have their
    answers lost. ``in_round``: run once, inside the round whose write of the Lease was next answered, at the
    elector's first reading of its monotonic clock afterwards (``LeaseElector.step``'s ``is_leader``: the write taken
    in, the round not returned yet)."""

    def __init__(self, clock: SimulatedClock) -> None:
        self._clock = clock
        self.answers_lost = 0
        self.in_round: Callable[[], None] | None = None
        self._armed: Callable[[], None] | None = None

    def monotonic(self) -> float:
        """The elector's monotonic clock: the simulated clock's, running ``in_round`` first once it is armed."""
        run, self._armed = self._armed, None
        if run is not None:
            run()
        return self._clock.monotonic()

    def leases(self, api_client: k8s.ApiClient, request_timeout: timedelta) -> Leases:
        return _HookedLeases(api_client, request_timeout, self)

    def answered(self, written: V1Lease) -> V1Lease:
        """A write of the Lease answered with ``written``: its answer lost (``answers_lost``), or ``in_round`` armed."""
        if self.answers_lost:
            self.answers_lost -= 1
            raise KubernetesUnavailable(None, "read timed out (the API server applied the write)")
        self._armed, self.in_round = self.in_round, None
        return written


class _HookedLeases(Leases):
    def __init__(self, api_client: k8s.ApiClient, request_timeout: timedelta, hooks: ElectorHooks) -> None:
        super().__init__(api_client, request_timeout)
        self._hooks = hooks

    def create(self, namespace: str, body: V1Lease) -> V1Lease:
        return self._hooks.answered(super().create(namespace, body))

    def replace(self, name: str, namespace: str, body: V1Lease) -> V1Lease:
        return self._hooks.answered(super().replace(name, namespace, body))

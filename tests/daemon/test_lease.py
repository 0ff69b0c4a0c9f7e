"""Leader election on a Lease held in the fake Kubernetes API, two replicas, simulated time.

Each round advances the shared simulated clock by the retry period and lets every live replica take one election
step; the API calls are real HTTP through the kubernetes client.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from agent.daemon.lease import LeaseElector
from kube import Leases
from models.clock import SimulatedClock
from tests.daemon.conftest import DEADLINE, LEASE, LEASE_NAME, NAMESPACE, RETRY
from tests.daemon.links import CuttableLink
from tests.fakes.kube_api import FakeKubeApi

Make = Callable[[str], tuple[LeaseElector, CuttableLink]]


def _rounds(clock: SimulatedClock, electors: Sequence[LeaseElector], count: int) -> list[tuple[bool, ...]]:
    """Step every elector ``count`` times; who leads at each instant. Fails on any instant with two leaders."""
    leading = []
    for _ in range(count):
        clock.advance(RETRY)
        for elector in electors:
            elector.step(clock.now())
        now = clock.now()
        state = tuple(e.is_leader(now) for e in electors)
        assert sum(state) <= 1, f"two leaders at {now}"
        leading.append(state)
    return leading


def test_exactly_one_of_two_replicas_leads_and_keeps_leading(
    kube_api: FakeKubeApi, clock: SimulatedClock, elector_for: Make
) -> None:
    a, _ = elector_for("replica-a")
    b, _ = elector_for("replica-b")
    first = a.step(clock.now())
    second = b.step(clock.now())
    assert first.became_leader
    assert first.leading
    assert not second.leading
    assert second.holder == "replica-a"

    history = _rounds(clock, [a, b], 30)  # a minute of renewals
    assert all(state == (True, False) for state in history)
    lease = kube_api.get("leases", LEASE_NAME, NAMESPACE, group="coordination.k8s.io")
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "replica-a"
    assert lease["spec"]["leaseDurationSeconds"] == 15
    assert lease["spec"]["leaseTransitions"] == 0


def test_a_killed_leader_is_replaced_after_the_lease_expires_and_not_before(
    clock: SimulatedClock, elector_for: Make
) -> None:
    a, _ = elector_for("replica-a")
    b, _ = elector_for("replica-b")
    _rounds(clock, [a, b], 3)
    assert a.is_leader(clock.now())
    last_renewal = clock.now()

    # replica-a dies: it takes no more steps (and never releases the lease)
    took_over_at = None
    for _ in range(20):
        clock.advance(RETRY)
        step = b.step(clock.now())
        if step.became_leader:
            took_over_at = clock.now()
            break
    assert took_over_at is not None
    waited = took_over_at - last_renewal
    assert LEASE <= waited <= LEASE + RETRY
    assert b.holder == "replica-b"


def test_a_leader_cut_off_from_the_api_stops_acting_before_the_standby_starts(
    kube_api: FakeKubeApi, clock: SimulatedClock, elector_for: Make
) -> None:
    a, link_a = elector_for("replica-a")
    b, _ = elector_for("replica-b")
    _rounds(clock, [a, b], 3)
    link_a.cut()

    stopped_at = started_at = None
    for _ in range(20):
        clock.advance(RETRY)
        step_a = a.step(clock.now())
        step_b = b.step(clock.now())
        assert step_a.error is not None
        assert "unreachable" in step_a.error
        now = clock.now()
        assert not (a.is_leader(now) and b.is_leader(now))
        if step_a.lost_leadership:
            stopped_at = now
        if step_b.became_leader:
            started_at = now
            break
    assert stopped_at is not None
    assert started_at is not None
    assert stopped_at < started_at
    # the old leader's window closed a whole (lease - deadline) before the new one opened
    a_until, b_until = a.leading_until(started_at), b.leading_until(started_at)
    assert a_until is not None
    assert b_until is not None
    assert started_at - a_until >= LEASE - DEADLINE - RETRY

    link_a.restore()  # back online: it sees the new holder and stays a standby
    history = _rounds(clock, [a, b], 10)
    assert all(state == (False, True) for state in history)
    lease = kube_api.get("leases", LEASE_NAME, NAMESPACE, group="coordination.k8s.io")
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "replica-b"
    assert lease["spec"]["leaseTransitions"] == 1


def test_a_hung_connection_times_out_and_the_leader_still_stops_in_time(
    clock: SimulatedClock, elector_for: Make
) -> None:
    a, link_a = elector_for("replica-a")
    b, _ = elector_for("replica-b")
    _rounds(clock, [a, b], 2)
    link_a.hang()
    clock.advance(RETRY)
    step = a.step(clock.now())  # returns after the 0.3 s request timeout instead of blocking the loop
    assert step.error is not None
    clock.advance(DEADLINE)
    assert not a.is_leader(clock.now())


def test_a_leader_that_comes_back_before_anyone_took_over_renews_its_own_lease(
    clock: SimulatedClock, elector_for: Make
) -> None:
    a, link_a = elector_for("replica-a")
    _rounds(clock, [a], 2)
    link_a.cut()
    _rounds(clock, [a], 6)  # 12 s without renewal: past the deadline, not acting
    assert not a.is_leader(clock.now())
    link_a.restore()
    clock.advance(RETRY)
    step = a.step(clock.now())
    assert step.became_leader


def test_racing_candidates_for_a_free_lease_get_one_winner(clock: SimulatedClock, elector_for: Make) -> None:
    a, _ = elector_for("replica-a")
    b, _ = elector_for("replica-b")
    a.step(clock.now())
    assert a.release(clock.now())  # the lease exists, held by nobody
    # both read the free lease before either writes: the second write carries a stale resourceVersion
    a_seen = a._leases.read(LEASE_NAME, NAMESPACE)
    b_seen = b._leases.read(LEASE_NAME, NAMESPACE)
    assert a_seen.metadata.resource_version == b_seen.metadata.resource_version
    clock.advance(RETRY)
    results = [a.step(clock.now()), b.step(clock.now())]
    assert [r.leading for r in results] == [True, False]
    assert results[1].holder == "replica-a"


def test_a_leader_that_finds_another_holder_stops_at_once(
    kube_api: FakeKubeApi, clock: SimulatedClock, elector_for: Make
) -> None:
    a, _ = elector_for("replica-a")
    a.step(clock.now())
    lease = kube_api.get("leases", LEASE_NAME, NAMESPACE, group="coordination.k8s.io")
    assert lease is not None
    lease["spec"]["holderIdentity"] = "someone-else"
    kube_api.put("leases", lease, group="coordination.k8s.io")  # written behind replica-a's back
    clock.advance(RETRY)
    step = a.step(clock.now())
    assert not step.leading
    assert step.lost_leadership
    assert step.holder == "someone-else"


def test_a_conflict_on_renewal_ends_leadership_at_once(
    kube_api: FakeKubeApi, clock: SimulatedClock, elector_for: Make
) -> None:
    a, _ = elector_for("replica-a")
    a.step(clock.now())
    kube_api.fail_next(1, 409, verb="update", resource="leases")
    clock.advance(RETRY)
    step = a.step(clock.now())
    assert step.error is not None
    assert "409" in step.error
    assert not step.leading
    assert step.lost_leadership
    clock.advance(RETRY)
    assert a.step(clock.now()).became_leader  # still the holder on record: the next renewal succeeds


def _delete_lease(kube_api: FakeKubeApi) -> None:
    kube_api.delete("leases", LEASE_NAME, NAMESPACE, group="coordination.k8s.io")


def test_a_deleted_lease_is_not_taken_while_its_cut_off_holder_may_still_act(
    kube_api: FakeKubeApi, clock: SimulatedClock, elector_for: Make
) -> None:
    a, link_a = elector_for("replica-a")
    b, _ = elector_for("replica-b")
    _rounds(clock, [a, b], 3)
    last_renewal = clock.now()
    _delete_lease(kube_api)  # kubectl delete, or a prune, while replica-a leads and cannot reach the API
    link_a.cut()

    took_over_at = None
    for _ in range(20):
        clock.advance(RETRY)
        a.step(clock.now())
        step = b.step(clock.now())
        now = clock.now()
        assert not (a.is_leader(now) and b.is_leader(now)), f"two leaders at {now}"
        if step.became_leader:
            took_over_at = now
            break
    assert took_over_at is not None
    assert LEASE <= took_over_at - last_renewal <= LEASE + RETRY


def test_a_leader_that_finds_its_lease_deleted_creates_it_again_and_keeps_leading(
    kube_api: FakeKubeApi, clock: SimulatedClock, elector_for: Make
) -> None:
    a, _ = elector_for("replica-a")
    b, _ = elector_for("replica-b")
    _rounds(clock, [a, b], 3)
    _delete_lease(kube_api)
    history = _rounds(clock, [b, a], 15)  # the standby sees it gone first
    assert all(state == (False, True) for state in history)
    lease = kube_api.get("leases", LEASE_NAME, NAMESPACE, group="coordination.k8s.io")
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "replica-a"


def test_release_hands_the_lease_to_the_standby_at_its_next_step(clock: SimulatedClock, elector_for: Make) -> None:
    a, _ = elector_for("replica-a")
    b, _ = elector_for("replica-b")
    _rounds(clock, [a, b], 2)
    assert a.release(clock.now())
    assert not a.is_leader(clock.now())
    clock.advance(RETRY)
    assert b.step(clock.now()).became_leader


def _overlap(
    clock: SimulatedClock, a: LeaseElector, b: LeaseElector, wall_a: timedelta, wall_b: timedelta, rounds: int
) -> tuple[timedelta, datetime | None, datetime | None]:
    """Step both replicas every retry period, each with its own wall clock (true time + its offset), and sample
    who leads every 0.1 s of true time. Returns the time both led, when ``a`` stopped and ``b`` started leading
    (true time)."""
    both = timedelta(0)
    stopped_at = started_at = None
    sample = timedelta(seconds=0.1)
    for _ in range(rounds):
        now = clock.now()
        if a.step(now + wall_a).lost_leadership and stopped_at is None:
            stopped_at = now
        if b.step(now + wall_b).became_leader and started_at is None:
            started_at = now
        for _ in range(round(RETRY / sample)):
            now = clock.now()
            a_leads = a.is_leader(now + wall_a)
            if stopped_at is None and not a_leads:
                stopped_at = now
            if a_leads and b.is_leader(now + wall_b):
                both += sample
            clock.advance(sample)
    return both, stopped_at, started_at


def test_a_cut_off_leader_whose_wall_clock_steps_back_stops_by_its_renew_deadline(
    clock: SimulatedClock, elector_for: Make
) -> None:
    a, link_a = elector_for("replica-a")
    b, _ = elector_for("replica-b")
    _rounds(clock, [a, b], 3)
    a.step(clock.now())  # a renewal just sent: the renew deadline runs from here
    last_renewal = clock.now()
    assert a.is_leader(clock.now())
    link_a.cut()
    both, stopped_at, started_at = _overlap(clock, a, b, -timedelta(seconds=10), timedelta(0), rounds=15)
    assert both == timedelta(0)
    assert stopped_at is not None
    assert stopped_at <= last_renewal + DEADLINE
    assert started_at is not None
    assert started_at >= last_renewal + LEASE


def test_a_standby_whose_wall_clock_jumps_forward_does_not_take_over_early(
    clock: SimulatedClock, elector_for: Make
) -> None:
    a, link_a = elector_for("replica-a")
    b, _ = elector_for("replica-b")
    _rounds(clock, [a, b], 3)
    a.step(clock.now())
    b.step(clock.now())  # b has seen a's latest renewal
    seen_at = clock.now()
    link_a.cut()
    clock.advance(RETRY)
    both, _, started_at = _overlap(clock, a, b, timedelta(0), timedelta(minutes=5), rounds=15)
    assert both == timedelta(0)
    assert started_at is not None
    assert started_at >= seen_at + LEASE


class _SlowRead:
    """A replica's Lease calls, where one read is answered late: while it is in flight the clock moves on and
    ``meanwhile`` runs (the leader renews), so the answer shows a renewal younger than the request."""

    def __init__(self, leases: Any, clock: SimulatedClock) -> None:
        self._leases, self._clock = leases, clock
        self.meanwhile: Callable[[], None] | None = None

    def read(self, name: str, namespace: str) -> Any:
        if self.meanwhile is not None:
            self._clock.advance(timedelta(seconds=9))
            self.meanwhile()
            self.meanwhile = None
            answer = self._leases.read(name, namespace)
            self._clock.advance(timedelta(seconds=1))  # answered ten seconds after it was sent
            return answer
        return self._leases.read(name, namespace)

    def create(self, namespace: str, body: Any) -> Any:
        return self._leases.create(namespace, body)

    def replace(self, name: str, namespace: str, body: Any) -> Any:
        return self._leases.replace(name, namespace, body)


def test_a_renewal_seen_through_a_slow_read_is_dated_when_the_answer_came(
    clock: SimulatedClock, elector_for: Make
) -> None:
    """client-go dates an observed record after Get returns. Dated when the read was sent, a renewal written while
    the read was in flight looked ten seconds older than it was, and the standby took over while the old leader,
    cut off right after that renewal, still led."""
    a, link_a = elector_for("replica-a")
    b, _ = elector_for("replica-b")
    _rounds(clock, [a, b], 3)
    slow = _SlowRead(b._leases, clock)
    b._leases = slow  # type: ignore[assignment]

    def renew_then_cut() -> None:
        a.step(clock.now())
        link_a.cut()

    slow.meanwhile = renew_then_cut  # a renews while b's read is in flight, then is cut off
    clock.advance(RETRY)
    b.step(clock.now())
    _rounds(clock, [a, b], 15)  # fails on any instant with two leaders
    assert b.is_leader(clock.now())


def test_the_lease_is_written_as_the_api_server_reads_it(
    kube_api: FakeKubeApi, clock: SimulatedClock, elector_for: Make
) -> None:
    a, _ = elector_for("replica-a")
    a.step(clock.now())  # created at a whole second
    lease = kube_api.get("leases", LEASE_NAME, NAMESPACE, group="coordination.k8s.io")
    assert lease is not None
    assert lease["spec"]["renewTime"] == "2026-03-02T09:00:00.000000Z"  # MicroTime keeps its six digits
    acquired = lease["spec"]["acquireTime"]
    lease["metadata"]["labels"] = {"app.kubernetes.io/name": "leadtime"}
    kube_api.put("leases", lease, group="coordination.k8s.io")
    _rounds(clock, [a], 2)  # renewals keep what they do not own
    renewed = kube_api.get("leases", LEASE_NAME, NAMESPACE, group="coordination.k8s.io")
    assert renewed is not None
    assert renewed["spec"]["acquireTime"] == acquired
    assert renewed["spec"]["renewTime"] == "2026-03-02T09:00:04.000000Z"
    assert renewed["metadata"]["labels"] == {"app.kubernetes.io/name": "leadtime"}


def test_a_fractional_lease_duration_is_written_rounded_up(
    kube_api: FakeKubeApi, clock: SimulatedClock, api_client_for: Callable[[str], Any]
) -> None:
    """The field is whole seconds: rounded down, a standby could take over before the leader's renew deadline."""
    elector = LeaseElector(
        Leases(api_client_for(kube_api.url), timedelta(seconds=0.3)),
        name=LEASE_NAME,
        namespace=NAMESPACE,
        identity="replica-a",
        lease_duration=timedelta(seconds=2.5),
        renew_deadline=timedelta(seconds=2.4),
        monotonic=clock.monotonic,
    )
    elector.step(clock.now())
    lease = kube_api.get("leases", LEASE_NAME, NAMESPACE, group="coordination.k8s.io")
    assert lease is not None
    assert lease["spec"]["leaseDurationSeconds"] == 3

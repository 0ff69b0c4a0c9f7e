"""A replica whose election rounds stall (its process frozen, its VM paused) for longer than its lease, while another
replica takes the lease over and leads, then runs its rounds again. The last record it saw is its own, so what it
finds afterwards must not be read as the continuation of its own term:

* a lease the other replica released (an empty holder) is taken as a new term: the round that finds it reports the
  loss of the term it missed, and the one that takes it reports a new leader (before, the round took it at once and
  reported nothing: the daemon never reloaded what the other leader saved);
* a Lease deleted while the other replica leads is not created again at once (the other replica may still act, and
  re-creates it at its next round); one deleted after the other replica died is created a lease duration after it
  was found gone, as a new term.

Two electors on the fake Kubernetes API through the real kubernetes client, one simulated clock (no sleeps).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta

from agent.daemon.lease import ElectionStep, LeaseElector
from models.clock import SimulatedClock
from tests.daemon.conftest import LEASE, LEASE_NAME, NAMESPACE, RETRY
from tests.daemon.links import CuttableLink
from tests.fakes.kube_api import FakeKubeApi

Make = Callable[[str], tuple[LeaseElector, CuttableLink]]


def _rounds(clock: SimulatedClock, electors: Sequence[LeaseElector], count: int) -> None:
    """Step every elector ``count`` times, one retry period apart; never two leaders at once."""
    for _ in range(count):
        clock.advance(RETRY)
        for elector in electors:
            elector.step(clock.now())
        now = clock.now()
        assert sum(e.is_leader(now) for e in electors) <= 1, f"two leaders at {now}"


def _stall_a_while_b_leads(clock: SimulatedClock, a: LeaseElector, b: LeaseElector) -> None:
    """``a`` leads, then takes no step for a minute: ``b`` takes the lease over once its duration has passed and
    leads for the rest of the minute."""
    _rounds(clock, [a, b], 3)
    assert a.is_leader(clock.now())
    _rounds(clock, [b], 30)
    assert b.is_leader(clock.now())
    assert not a.is_leader(clock.now())  # its renew deadline passed long ago


def _until_leading(clock: SimulatedClock, a: LeaseElector, others: Sequence[LeaseElector]) -> list[ElectionStep]:
    """Steps of ``a`` (each after ``others``' steps) until it leads, for at most twice the lease duration."""
    steps: list[ElectionStep] = []
    for _ in range(2 * int(LEASE / RETRY)):
        clock.advance(RETRY)
        for other in others:
            other.step(clock.now())
        steps.append(a.step(clock.now()))
        now = clock.now()
        assert not (a.is_leader(now) and any(o.is_leader(now) for o in others)), f"two leaders at {now}"
        if steps[-1].leading:
            return steps
    raise AssertionError(f"replica-a never led again: {steps}")


def _lease(kube_api: FakeKubeApi) -> dict[str, object]:
    lease = kube_api.get("leases", LEASE_NAME, NAMESPACE, group="coordination.k8s.io")
    assert lease is not None
    spec = lease["spec"]
    assert isinstance(spec, dict)
    return spec


def test_a_stalled_replica_takes_a_released_lease_as_a_new_term(
    kube_api: FakeKubeApi, clock: SimulatedClock, elector_for: Make
) -> None:
    a, _ = elector_for("replica-a")
    b, _ = elector_for("replica-b")
    _stall_a_while_b_leads(clock, a, b)
    assert b.release(clock.now())  # a rolling update: replica-b hands the lease over

    steps = _until_leading(clock, a, [])
    assert steps[0].lost_leadership and not steps[0].leading  # the term it missed the end of is over
    assert steps[0].holder == ""
    assert steps[-1].became_leader  # a new term: the daemon reloads what replica-b saved
    assert len(steps) == 2  # one retry period later than at once
    assert [s.lost_leadership for s in steps] == [True, False]
    spec = _lease(kube_api)
    assert spec["holderIdentity"] == "replica-a"
    assert spec["leaseTransitions"] == 2  # a -> b -> a


def test_a_stalled_replica_whose_own_lease_was_released_by_hand_takes_it_as_a_new_term(
    kube_api: FakeKubeApi, clock: SimulatedClock, elector_for: Make
) -> None:
    """No other replica: the holder emptied behind a leader's back ends its term as well."""
    a, _ = elector_for("replica-a")
    _rounds(clock, [a], 3)
    lease = kube_api.get("leases", LEASE_NAME, NAMESPACE, group="coordination.k8s.io")
    assert lease is not None
    lease["spec"]["holderIdentity"] = None
    kube_api.put("leases", lease, group="coordination.k8s.io")

    steps = _until_leading(clock, a, [])
    assert [(s.leading, s.lost_leadership, s.became_leader) for s in steps] == [
        (False, True, False),
        (True, False, True),
    ]


def test_a_lease_deleted_while_the_other_replica_leads_is_not_created_by_the_stalled_one(
    kube_api: FakeKubeApi, clock: SimulatedClock, elector_for: Make
) -> None:
    a, _ = elector_for("replica-a")
    b, _ = elector_for("replica-b")
    _stall_a_while_b_leads(clock, a, b)
    kube_api.delete("leases", LEASE_NAME, NAMESPACE, group="coordination.k8s.io")  # a prune, kubectl delete

    # replica-a runs its rounds again before replica-b's next one: the Lease is gone, and the last record it saw
    # is its own, but from before replica-b's term
    clock.advance(RETRY)
    step = a.step(clock.now())
    assert not step.leading and step.lost_leadership
    assert b.is_leader(clock.now())  # replica-b still acts until its renew deadline
    assert kube_api.get("leases", LEASE_NAME, NAMESPACE, group="coordination.k8s.io") is None
    b.step(clock.now())  # and creates its Lease again at its next round (the last record it saw is its own)
    _rounds(clock, [a, b], 2 * int(LEASE / RETRY))
    assert b.is_leader(clock.now()) and not a.is_leader(clock.now())
    assert _lease(kube_api)["holderIdentity"] == "replica-b"


def test_a_lease_deleted_after_the_other_replica_died_is_created_a_lease_duration_after_it_was_found_gone(
    kube_api: FakeKubeApi, clock: SimulatedClock, elector_for: Make
) -> None:
    a, _ = elector_for("replica-a")
    b, _ = elector_for("replica-b")
    _stall_a_while_b_leads(clock, a, b)
    kube_api.delete("leases", LEASE_NAME, NAMESPACE, group="coordination.k8s.io")  # and replica-b dies

    steps = _until_leading(clock, a, [])  # the first one finds it gone
    assert steps[0].lost_leadership
    assert steps[-1].became_leader
    assert LEASE <= RETRY * (len(steps) - 1) <= LEASE + RETRY  # created a lease duration after it was found gone
    assert _lease(kube_api)["holderIdentity"] == "replica-a"


def test_a_replica_that_finds_its_own_lease_deleted_soon_after_renewing_creates_it_again_at_once(
    kube_api: FakeKubeApi, clock: SimulatedClock, elector_for: Make
) -> None:
    """The control: a record of its own seen less than a lease duration ago, nobody can have taken the lease since;
    its term goes on (no loss, no new leader reported)."""
    a, _ = elector_for("replica-a")
    _rounds(clock, [a], 3)
    kube_api.delete("leases", LEASE_NAME, NAMESPACE, group="coordination.k8s.io")
    clock.advance(LEASE - timedelta(seconds=1) - RETRY)  # its rounds stalled for less than a lease duration in all
    step = a.step(clock.now())
    assert step.leading and not step.became_leader and not step.lost_leadership
    assert _lease(kube_api)["holderIdentity"] == "replica-a"

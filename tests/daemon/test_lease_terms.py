"""The elector counts the new terms it takes, after each of which another replica may have led (``LeaseElector.terms``,
``ElectionStep.new_term``): the Lease taken from another holder's record or an emptied one, or created, unless this
replica's own record was seen less than a lease duration before. A renewal of its own record, however late, is none.
Two electors on the fake Kubernetes API through the real kubernetes client, one simulated clock."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent.daemon.lease import ElectionStep, LeaseElector
from models.clock import SimulatedClock
from tests.daemon.conftest import DEADLINE, LEASE, LEASE_NAME, NAMESPACE, RETRY, MakeElector
from tests.daemon.elector_hooks import ElectorHooks
from tests.daemon.links import CuttableLink
from tests.fakes.kube_api import FakeKubeApi

Make = Callable[[str], tuple[LeaseElector, CuttableLink]]


def _until_leading(clock: SimulatedClock, elector: LeaseElector) -> ElectionStep:
    for _ in range(2 * int(LEASE / RETRY)):
        clock.advance(RETRY)
        step = elector.step(clock.now())
        if step.leading:
            return step
    raise AssertionError(f"{elector.identity} never led")


def _delete_lease(kube_api: FakeKubeApi) -> None:
    kube_api.delete("leases", LEASE_NAME, NAMESPACE, group="coordination.k8s.io")


def test_the_lease_created_first_is_a_new_term_and_renewals_are_none(clock: SimulatedClock, elector_for: Make) -> None:
    a, _ = elector_for("replica-a")
    first = a.step(clock.now())
    assert first.became_leader and first.new_term and a.terms == 1
    for _ in range(3):
        clock.advance(RETRY)
        assert not a.step(clock.now()).new_term
    clock.advance(LEASE + DEADLINE)  # its renewals did not get through, past the lease duration: nobody took it
    assert not a.is_leader(clock.now())
    late = a.step(clock.now())
    assert late.leading and not late.new_term and a.terms == 1


def test_a_lease_taken_from_another_holder_or_a_released_one_is_a_new_term(
    clock: SimulatedClock, elector_for: Make
) -> None:
    a, link_a = elector_for("replica-a")
    b, _ = elector_for("replica-b")
    a.step(clock.now())
    b.step(clock.now())
    link_a.cut()  # a's renewals do not get through; b takes the lease after its duration
    taken = _until_leading(clock, b)
    assert taken.new_term and b.terms == 1
    link_a.restore()
    clock.advance(RETRY)
    assert a.step(clock.now()).lost_leadership and a.terms == 1
    assert b.release(clock.now())  # b hands the lease back
    back = _until_leading(clock, a)
    assert back.became_leader and back.new_term and a.terms == 2


def test_a_lease_created_again_by_its_holder_soon_after_renewing_is_the_same_term(
    kube_api: FakeKubeApi, clock: SimulatedClock, elector_for: Make
) -> None:
    a, _ = elector_for("replica-a")
    a.step(clock.now())
    _delete_lease(kube_api)
    clock.advance(RETRY)
    again = a.step(clock.now())  # nobody can have taken it since its own record was seen
    assert again.leading and not again.new_term and a.terms == 1


def test_a_lease_created_again_after_the_holders_rounds_stalled_is_a_new_term(
    kube_api: FakeKubeApi, clock: SimulatedClock, elector_for: Make
) -> None:
    a, _ = elector_for("replica-a")
    a.step(clock.now())
    clock.advance(2 * LEASE)  # its rounds stalled; the Lease is gone when they run again
    _delete_lease(kube_api)
    created = _until_leading(clock, a)  # after a lease duration from when it found it gone: another may have led
    assert created.new_term and a.terms == 2


@pytest.mark.parametrize("created", [False, True], ids=["taken-from-a-release", "created"])
def test_a_take_whose_answer_was_lost_is_counted_at_the_round_that_finds_it_written(
    clock: SimulatedClock, elector_for: MakeElector, created: bool
) -> None:
    """The API server applies the take (or the create) and its answer is lost (a read timeout): the next round reads
    a record naming this replica and renews it, and that is the new term the take began."""
    hooks = ElectorHooks(clock)
    a, _ = elector_for("replica-a", hooks)
    if not created:  # else a's first round creates the Lease
        b, _ = elector_for("replica-b")
        b.step(clock.now())
        a.step(clock.now())
        assert b.release(clock.now())
        clock.advance(RETRY)
    hooks.answers_lost = 1
    lost = a.step(clock.now())
    assert lost.error is not None and not lost.leading and a.terms == 0
    clock.advance(RETRY)
    renewed = a.step(clock.now())
    assert renewed.became_leader and renewed.new_term and a.terms == 1  # was a renewal: no new term
    clock.advance(RETRY)
    assert not a.step(clock.now()).new_term and a.terms == 1


def test_a_take_whose_answer_was_lost_then_taken_by_another_counts_one_term_once_taken_back(
    clock: SimulatedClock, elector_for: MakeElector
) -> None:
    """A's take of a released record lands and its answer is lost; A's renewals then stop getting through and B takes
    the lease from A after its duration, before A led in the term its take began. A's round that finds B's record
    counts nothing, and taking the lease back from B later is one new term (not two: the take noted as unanswered
    is not counted beside it), a renewal after it none."""
    hooks = ElectorHooks(clock)
    a, link_a = elector_for("replica-a", hooks)
    b, _ = elector_for("replica-b")
    b.step(clock.now())
    a.step(clock.now())
    assert b.release(clock.now())
    clock.advance(RETRY)
    hooks.answers_lost = 1
    lost = a.step(clock.now())  # the take lands, its answer lost
    assert lost.error is not None and not lost.leading and a.terms == 0
    link_a.cut()
    assert _until_leading(clock, b).new_term  # B sees A's record unchanged for the lease duration
    link_a.restore()
    clock.advance(RETRY)
    found = a.step(clock.now())
    assert not found.leading and not found.new_term and found.holder == "replica-b" and a.terms == 0
    taken = _until_leading(clock, a)
    assert taken.new_term and a.terms == 1
    clock.advance(RETRY)
    assert not a.step(clock.now()).new_term and a.terms == 1

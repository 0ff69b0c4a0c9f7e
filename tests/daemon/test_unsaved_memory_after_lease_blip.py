"""A leader whose last save of the planner memory failed (the ConfigMap update answered 409), and whose lease then
lapsed and came back to it with nobody leading in between, keeps what it learned since its last good save. Whole
daemons (real agent loop, election on the Lease, the planner memory in a ConfigMap on the fake Kubernetes API through
the real kubernetes client, a shared simulated cluster and clock): a pool the cloud refuses for good (403) is blocked
by the tick whose save fails; after the blip the leader sends it no write (it sent one more before: the stored copy,
from before the block, replaced its own at its first load) and keeps the open condition it raised about it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from kubernetes import client as k8s

from agent.daemon.lease import LeaseElector
from models import ActionResult, AlertKind, PermanentActuatorError
from models.clock import SimulatedClock
from tests.daemon.conftest import RETRY
from tests.daemon.links import CuttableLink
from tests.daemon.test_failover_open_conditions import POOL, _pair
from tests.daemon.test_leader_term_resume import UnansweredLeases
from tests.fakes.kube_api import FakeKubeApi


@pytest.mark.parametrize("save_fails", [False, True], ids=["last-save-written", "last-save-refused-409"])
def test_a_block_learned_after_the_last_good_save_survives_a_lease_blip(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    link_to: Callable[[], CuttableLink],
    api_client_for: Callable[[str], k8s.ApiClient],
    save_fails: bool,
) -> None:
    pair = _pair(clock, kube_api, link_to, api_client_for, shared=True)
    pair.play(timedelta(minutes=1), pair.replicas)  # a leader, its memory saved
    leader = pair.leader()
    other = next(r for r in pair.replicas if r is not leader)
    elector = leader.assembled.elector
    assert isinstance(elector, LeaseElector)
    # From now on the cloud refuses the pool's changes for good: the agent's service account lost the right.
    refused: list[int] = []
    resize = leader.deps.resize

    def refusing(pool_id: str, to_units: int, key: str) -> ActionResult:
        if pool_id == POOL:
            refused.append(to_units)
            raise PermanentActuatorError(POOL, "403 Forbidden: compute.instanceGroupManagers.update denied")
        return resize(pool_id, to_units, key)

    leader.deps.resize = refusing  # type: ignore[method-assign]
    leader.deps.actuator._cluster.resize(POOL, 0, "test-empty")  # type: ignore[attr-defined]  # the plan scales it up
    if save_fails:  # the ConfigMap update of the tick that meets the refusal answers 409 Conflict
        kube_api.fail_next(1, 409, verb="update", resource="configmaps")
    pair.play(timedelta(minutes=1), pair.replicas)
    assert pair.leader() is leader
    memory = leader.assembled.loop.agent.memory
    assert POOL in memory.blocked and len(refused) == 1
    assert (AlertKind.ACTUATOR_FAILURE, POOL) in memory.open_conditions
    assert leader.assembled.loop.keeper.failures == (1 if save_fails else 0)

    # The Lease API does not answer the leader for 12 s: it stops leading at its renew deadline (10 s); nobody else
    # may take the lease before its duration (15 s) has passed, so the leader takes it back when the API answers.
    cut = UnansweredLeases(elector._leases)
    elector._leases = cut
    for _ in range(6):
        clock.advance(RETRY)
        other.assembled.daemon.elect()
        leader.assembled.daemon.elect()
    assert not elector.is_leader(clock.now())
    cut.down = False
    clock.advance(RETRY)
    other.assembled.daemon.elect()
    assert leader.assembled.daemon.elect().became_leader
    leader.assembled.daemon.tick()  # a new leader ticks at once
    pair.play(timedelta(minutes=2), pair.replicas)

    assert pair.leader() is leader
    after = leader.assembled.loop.agent.memory
    assert POOL in after.blocked
    assert refused == [refused[0]]  # no write to the blocked pool after the blip (one more before)
    assert (AlertKind.ACTUATOR_FAILURE, POOL) in after.open_conditions  # still open, its end still to be told
    assert not pair.events(leader, AlertKind.ACTUATOR_FAILURE, resolved=True)

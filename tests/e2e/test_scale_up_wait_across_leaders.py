"""A scale-up whose units never arrive is still told stalled after a restart or a Lease handover: whole live daemons
(Lease election, the real agent loop, the fake GKE, Kubernetes and Prometheus APIs, a simulated clock), the first
stopped after asking for three spot nodes that never join, and a new one (a new pod, a new loop) started on the same
servers, ledger file and state ConfigMap.

The new leader, whose plan already equals the pool's target, asks for nothing: it waits for the scale-ups its
predecessor saved in the planner memory, from when they were asked, so its "Scale-up not ready" alert and
``LeadtimeScaleUpStuck`` (read through ``leadtime_pool_scale_up_waiting_since_seconds``) tell the stall an allowance
after the ask, as the first leader would have (before they were saved, an allowance after the new leader's first read;
see also ``test_scale_up_wait_saved_in_memory``). A dry-run agent does not take cluster-autoscaler's scale-ups for its
own, and units that arrive within their lead time after a handover raise nothing."""

from __future__ import annotations

from datetime import timedelta

from agent.notify import RecordingNotifier
from tests.e2e import scale_up_wait_rig
from tests.e2e.rig import CLASS, NODE_POOLS, SPOT, Rig
from tests.e2e.scale_up_wait_rig import (
    ALLOWANCE,
    MINUTE,
    Replicas,
    _first_leader_asks_for_three_spot_nodes,
    _handover,
    _spot_target,
    _stalled,
    _waiting,
)

replicas = scale_up_wait_rig.replicas  # agent processes started one after another on the same servers
WATCHED = ALLOWANCE + 5 * MINUTE  # how long a replica that should wait for nothing is watched


def test_a_scale_up_stalled_across_a_handover_is_told_an_allowance_after_it_was_asked(
    rig: Rig, replicas: Replicas
) -> None:
    first, first_told, asked = _first_leader_asks_for_three_spot_nodes(rig, replicas)
    assert _spot_target(rig) == 3 and _waiting(first) == {SPOT: asked.timestamp()}
    while rig.clock.now() < asked + 5 * MINUTE:
        replicas.tick(first)
    assert _stalled(first_told) == []

    second, told = _handover(replicas, first)
    replicas.tick(second)
    assert _spot_target(rig) == 3  # it plans what the pool was asked for: it asks nothing
    assert _waiting(second) == {SPOT: asked.timestamp()}  # waited for from the ask, not from its first read
    while not _stalled(told):
        assert rig.clock.now() < asked + timedelta(hours=1), "the new leader never called the scale-up stalled"
        replicas.tick(second)

    (event,) = _stalled(told)
    assert event.at == asked + ALLOWANCE  # the wait did not start again at the handover
    assert event.summary.startswith(f"Scale-up of {SPOT} to 3 units, asked at {asked:%Y-%m-%d %H:%M} UTC, ")
    assert event.details == {"ready units": "0", "asked": "0 -> 3 units"}

    rig.settle()  # the nodes join at last
    replicas.tick(second)
    assert _waiting(second) == {}


def test_a_dry_run_agent_does_not_wait_for_cluster_autoscaler_s_scale_ups(rig: Rig, replicas: Replicas) -> None:
    rig.add_pools()
    rig.prometheus.set_demand(CLASS, 24)
    rig.gke.autoscale(NODE_POOLS[SPOT], 3)  # cluster-autoscaler grew the pool; its nodes never join
    shadow, told = replicas.start("leadtime-0", mode="dry-run")
    started = rig.clock.now()
    while rig.clock.now() < started + WATCHED:  # past an allowance from its first read: a wait would be told stalled
        replicas.tick(shadow)
        assert _waiting(shadow) == {}
    assert _stalled(told) == []

    second, told_after = _handover(replicas, shadow, mode="dry-run")
    handed_over = rig.clock.now()
    while rig.clock.now() < handed_over + WATCHED:  # and from the new one's
        replicas.tick(second)
        assert _waiting(second) == {}
    assert _stalled(told_after) == []


def test_units_that_arrive_within_their_lead_time_after_a_handover_raise_nothing(rig: Rig, replicas: Replicas) -> None:
    rig.add_pools()
    rig.prometheus.set_demand(CLASS, 8)
    first, first_told = replicas.start("leadtime-0")
    ramp_started = rig.clock.now()
    told: list[RecordingNotifier] = [first_told]
    current, waited = first, dict[str, float]()
    for step in range(1, 5):  # a steady ramp: a node's worth more every lead time, each arriving in its lead time
        rig.prometheus.set_demand(CLASS, 8 * step)
        for _ in range(10):
            replicas.tick(current)
            if current is not first and not waited:  # the new leader's first read: the second node in flight
                waited = _waiting(current)
            if step == 2 and rig.clock.now() == ramp_started + timedelta(minutes=15):
                current, notifier = _handover(replicas, current)  # halfway through the second node's lead time
                told.append(notifier)
        rig.settle()
    assert waited == {SPOT: (ramp_started + timedelta(minutes=11)).timestamp()}  # from its ask, saved
    assert _spot_target(rig) == 4
    for _ in range(ALLOWANCE // MINUTE):  # an allowance past the ramp: any of its scale-ups still waited for is told
        replicas.tick(current)
    assert _waiting(current) == {}
    assert [_stalled(n) for n in told] == [[], []]

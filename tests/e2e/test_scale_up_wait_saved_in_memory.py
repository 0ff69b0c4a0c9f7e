"""The scale-ups a leader waits for travel in the planner memory it saves (the state ConfigMap), so a new leader waits
for exactly those, from when they were asked: whole live daemons (Lease election, the real agent loop, the fake GKE,
Kubernetes and Prometheus APIs, a simulated clock), the first stopped and a new one started on the same servers, ledger
file and state ConfigMap.

Before, a new leader took every unit in flight it read (target above ready) for a scale-up waited for from its first
read: a node GKE was repairing during the handover was told a stalled scale-up nobody asked for, and a real stall was
told a whole allowance after the handover instead of an allowance after the ask. A saved scale-up whose pool has since
been asked for less is dropped (the units then in flight are waited for from the new leader's first read), and a memory
saved by an earlier release (no scale-ups in it) falls back to the adoption of the units in flight for that one
handover, whose leader then saves what it adopted."""

from __future__ import annotations

import json
from datetime import timedelta

from agent.state.configmap import KEY
from tests.e2e import scale_up_wait_rig
from tests.e2e.rig import CLASS, NODE_POOLS, SPOT, Rig
from tests.e2e.scale_up_wait_rig import (
    ALLOWANCE,
    MINUTE,
    STATE,
    Replicas,
    _first_leader_asks_for_three_spot_nodes,
    _handover,
    _saved,
    _spot_target,
    _stalled,
    _tick_until,
    _waiting,
)

replicas = scale_up_wait_rig.replicas  # agent processes started one after another on the same servers


def test_a_handover_while_a_node_is_repaired_raises_no_stall(rig: Rig, replicas: Replicas) -> None:
    rig.add_pools(spot_nodes=3)
    rig.prometheus.set_demand(CLASS, 24)  # the three spot nodes are what the demand needs: nothing is asked
    first, first_told = replicas.start("leadtime-0")
    _tick_until(replicas, first, 3)
    repaired = rig.gke.pools[NODE_POOLS[SPOT]].migs[0].instances[0]
    repaired.action = "RECREATING"  # GKE auto-repair recreates the node: the target stays, the node is gone a while
    rig.mirror.sync()
    _tick_until(replicas, first, 5)

    second, told = _handover(replicas, first)
    _tick_until(replicas, second, ALLOWANCE // MINUTE + 5)  # past an allowance from its first read: a long repair
    assert _spot_target(rig) == 3  # nobody asked for anything: the unit in flight is the repair
    assert _stalled(first_told) == [] and _stalled(told) == []
    assert _waiting(second) == {}
    assert second.loop.agent.budget_watch.pending == ()
    assert _saved(rig).scale_ups_waited == ()  # the leaders asked for nothing, and say so

    repaired.action = "NONE"
    rig.mirror.sync()
    _tick_until(replicas, second, 2)
    assert _stalled(told) == []


def test_a_stall_asked_by_the_old_leader_is_told_by_the_new_one_from_when_it_was_asked_and_saved_so(
    rig: Rig, replicas: Replicas
) -> None:
    first, _, asked = _first_leader_asks_for_three_spot_nodes(rig, replicas)
    _tick_until(replicas, first, 5)

    second, told = _handover(replicas, first)
    replicas.tick(second)
    assert _waiting(second) == {SPOT: asked.timestamp()}  # from the ask, not from its first read
    _tick_until(replicas, second, 20)
    (event,) = _stalled(told)
    assert event.at == asked + ALLOWANCE
    (saved,) = _saved(rig).scale_ups_waited or ()  # saved by both leaders as it was asked
    assert (saved.pool_id, saved.requested_at, saved.from_units, saved.to_units) == (SPOT, asked, 0, 3)
    assert not saved.inherited

    rig.settle()  # the nodes join at last
    replicas.tick(second)
    assert _saved(rig).scale_ups_waited == ()


def test_a_saved_scale_up_whose_pool_was_resized_down_since_is_dropped(rig: Rig, replicas: Replicas) -> None:
    first, _, asked = _first_leader_asks_for_three_spot_nodes(rig, replicas)
    assert _spot_target(rig) == 3
    replicas.stop(first)  # its memory, saved with the 0 -> 3, is stale from here on
    rig.prometheus.set_demand(CLASS, 16)
    rig.gke.autoscale(NODE_POOLS[SPOT], 2)  # someone resizes the pool down by hand; no node joins

    rig.clock.advance(MINUTE)
    second, told = replicas.start("leadtime-1")
    replicas.tick(second)
    first_read = rig.clock.now()
    assert _spot_target(rig) == 2  # the plan is what the pool holds: nothing asked
    # 0 -> 3 is no longer asked; the 2 in flight nobody asked are waited for from this first read, not from the ask
    (found,) = second.loop.agent.budget_watch.pending
    assert (found.requested_at, found.from_units, found.to_units, found.inherited) == (first_read, 0, 2, True)
    assert _waiting(second) == {SPOT: first_read.timestamp()}
    _tick_until(replicas, second, 25)
    (event,) = _stalled(told)
    assert event.at == first_read + ALLOWANCE and event.at > asked + ALLOWANCE  # late at worst, never early
    assert event.summary.startswith(f"Scale-up of {SPOT} to 2 units, found in flight at a leader's first read at ")
    (saved,) = _saved(rig).scale_ups_waited or ()
    assert (saved.requested_at, saved.to_units) == (first_read, 2)


def test_a_saved_scale_up_asked_again_after_a_resize_down_waits_from_the_new_ask(rig: Rig, replicas: Replicas) -> None:
    first, _, asked = _first_leader_asks_for_three_spot_nodes(rig, replicas)
    _tick_until(replicas, first, 5)
    replicas.stop(first)
    rig.gke.finish_operations()
    rig.gke.autoscale(NODE_POOLS[SPOT], 0)  # resized down by hand, below the saved scale-up's 3
    for mig in rig.gke.pools[NODE_POOLS[SPOT]].migs:  # the instances it removes are deleted
        mig.instances = [i for i in mig.instances if i.action != "DELETING"]

    rig.clock.advance(MINUTE)
    second, told = replicas.start("leadtime-1")
    replicas.tick(second)
    while _spot_target(rig) != 3:  # the new leader asks for the three again once the pool may change
        assert rig.clock.now() < asked + timedelta(hours=1), "the new leader never asked for the nodes again"
        replicas.tick(second)
    asked_again = rig.clock.now()
    # from its own ask: the saved one was dropped on the pool as read before it acted, not judged on the new target
    assert _waiting(second) == {SPOT: asked_again.timestamp()}
    _tick_until(replicas, second, 25)
    (event,) = _stalled(told)
    assert event.at == asked_again + ALLOWANCE and event.at > asked + ALLOWANCE


def test_a_memory_saved_by_an_earlier_release_falls_back_to_the_units_in_flight_for_one_handover(
    rig: Rig, replicas: Replicas
) -> None:
    first, _, asked = _first_leader_asks_for_three_spot_nodes(rig, replicas)
    _tick_until(replicas, first, 3)
    replicas.stop(first)
    config_map = rig.kube.get(*STATE)
    assert config_map is not None
    document = json.loads(config_map["data"][KEY])
    document.pop("scale_ups_waited", None)  # as the release before saves it: every other key, this one unknown to it
    rig.kube.put("configmaps", {**config_map, "data": {KEY: json.dumps(document)}})

    rig.clock.advance(MINUTE)
    second, told = replicas.start("leadtime-1")
    replicas.tick(second)
    first_read = rig.clock.now()
    assert _waiting(second) == {SPOT: first_read.timestamp()}  # the units in flight, from its first read
    _tick_until(replicas, second, 5)

    third, told_after = _handover(replicas, second)  # the next handover goes on from that first read
    replicas.tick(third)
    assert _waiting(third) == {SPOT: first_read.timestamp()}
    (adopted,) = _saved(rig).scale_ups_waited or ()  # what the second leader adopted, saved as found in flight
    assert (adopted.requested_at, adopted.from_units, adopted.to_units, adopted.inherited) == (first_read, 0, 3, True)
    while not _stalled(told_after):
        assert rig.clock.now() < first_read + timedelta(hours=1), "the third leader never called it stalled"
        replicas.tick(third)
    (event,) = _stalled(told_after)
    assert event.at == first_read + ALLOWANCE and event.at > asked + ALLOWANCE  # late at worst, never early
    assert event.summary.startswith(f"Scale-up of {SPOT} to 3 units, found in flight at a leader's first read at ")
    assert _stalled(told) == []

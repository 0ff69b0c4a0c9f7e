"""A node GKE repairs while the leader's own scale-up of its pool waits never holds that wait open: whole live daemons
(Lease election, the real agent loop, the fake GKE, Kubernetes and Prometheus APIs, a simulated clock).

A scale-up was waited for while its pool's ready units were below its asked size, with no account of the units the pool
reports being recreated (a repair): three spot nodes, a fourth asked, the asked node joins while an old node is
RECREATING, and 20 minutes later the scale-up was told 'still not ready', naming the ask that had arrived. A recreated
unit now counts as arrived for the wait; a scale-up whose own units do not come is told as before."""

from __future__ import annotations

from tests.e2e import scale_up_wait_rig
from tests.e2e.rig import CLASS, NODE_POOLS, SPOT, Rig
from tests.e2e.scale_up_wait_rig import ALLOWANCE, Replicas, _saved, _spot_target, _stalled, _tick_until, _waiting
from tests.fakes.gke_api.resources import Instance

replicas = scale_up_wait_rig.replicas  # agent processes started one after another on the same servers


def _repair(rig: Rig, replicas: Replicas, minutes: int, repaired: Instance) -> None:
    """``minutes`` ticks while GKE auto-repair recreates ``repaired`` (the target stays, the node is gone a while)."""
    for _ in range(minutes):
        repaired.action = "RECREATING"
        rig.mirror.sync()
        _tick_until(replicas, replicas.started[0], 1)


def test_a_repair_while_the_leader_s_own_scale_up_waits_is_not_told_as_its_stall(rig: Rig, replicas: Replicas) -> None:
    rig.add_pools(spot_nodes=3)
    rig.prometheus.set_demand(CLASS, 24)
    leader, told = replicas.start("leadtime-0")
    _tick_until(replicas, leader, 3)
    rig.prometheus.set_demand(CLASS, 32)  # one spot node more
    _tick_until(replicas, leader, 1)
    assert _spot_target(rig) == 4
    repaired = rig.gke.pools[NODE_POOLS[SPOT]].migs[0].instances[0]
    rig.settle()  # the asked node comes up and joins
    _repair(rig, replicas, 30, repaired)  # meanwhile an old node is recreated, past the allowance
    assert _stalled(told) == []  # before: 'still not ready after 20m' for the 3 -> 4 that had come
    assert _waiting(leader) == {}
    assert leader.loop.agent.budget_watch.pending == ()
    assert _saved(rig).scale_ups_waited == ()


def test_a_scale_up_whose_own_unit_does_not_come_during_a_repair_is_still_told(rig: Rig, replicas: Replicas) -> None:
    rig.add_pools(spot_nodes=3)
    rig.prometheus.set_demand(CLASS, 24)
    leader, told = replicas.start("leadtime-0")
    _tick_until(replicas, leader, 3)
    rig.prometheus.set_demand(CLASS, 32)
    _tick_until(replicas, leader, 1)
    asked = rig.clock.now()
    assert _spot_target(rig) == 4  # its instance is created, its node never joins
    _repair(rig, replicas, 25, rig.gke.pools[NODE_POOLS[SPOT]].migs[0].instances[0])
    (event,) = _stalled(told)
    assert event.at == asked + ALLOWANCE
    assert event.summary.startswith(f"Scale-up of {SPOT} to 4 units, asked at ")

"""What a steady stall costs the state ConfigMap: whole live daemons (Lease election, the real agent loop, the fake GKE,
Kubernetes and Prometheus APIs, a simulated clock). A leader renews the judgement of each scale-up it waits for at every
tick (so that a new leader trusts it only across an unbroken watch) and writes the planner memory once a tick while one
waits: never more often, however long the stall lasts, and the store always holds the last tick's judgement."""

from __future__ import annotations

from tests.e2e import scale_up_wait_rig
from tests.e2e.rig import CLASS, Rig
from tests.e2e.scale_up_wait_rig import STATE, Replicas, _saved, _stalled, _tick_until

TICKS = 30


replicas = scale_up_wait_rig.replicas  # agent processes started one after another on the same servers


def test_a_steady_stall_writes_the_state_config_map_at_most_once_a_tick(rig: Rig, replicas: Replicas) -> None:
    rig.add_pools()
    rig.prometheus.set_demand(CLASS, 24)  # three spot nodes; their instances are created, no node joins
    leader, told = replicas.start("leadtime-0")
    _tick_until(replicas, leader, 6)
    assert rig.kube.get(*STATE) is not None
    before = rig.kube.calls("update", "configmaps")
    for _ in range(TICKS):  # through the stall's opening at the allowance and on
        replicas.tick(leader)
        (saved,) = _saved(rig).scale_ups_waited or ()
        assert saved.judged_at == rig.clock.now()
    assert rig.kube.calls("update", "configmaps") - before <= TICKS
    assert len(_stalled(told)) >= 1  # a stall that lasted: it was told

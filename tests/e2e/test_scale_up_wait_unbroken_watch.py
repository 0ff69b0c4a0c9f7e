"""A saved scale-up is trusted only across an unbroken watch: whole live daemons (Lease election, the real agent loop,
the fake GKE, Kubernetes and Prometheus APIs, a simulated clock) on the same servers, ledger file and state ConfigMap.

The leader renews each saved scale-up's judgement at every tick that reads its pool, and a new leader trusts one judged
within the lease duration, two ticks and the misfire grace of its first tick. A pool resized down and up again while no
agent ran is then waited for from the new leader's first read, not from the old ask; before, a judgement saved every
quarter of the stall allowance was trusted for that quarter more (7 to 17 minutes, not an unbroken watch), and the
stall was told 13 minutes after the resize that applies, naming the old ask."""

from __future__ import annotations

from tests.e2e import scale_up_wait_rig
from tests.e2e.rig import NODE_POOLS, SPOT, Rig
from tests.e2e.scale_up_wait_rig import (
    ALLOWANCE,
    MINUTE,
    Replicas,
    _first_leader_asks_for_three_spot_nodes,
    _saved,
    _stalled,
    _tick_until,
    _waiting,
)

replicas = scale_up_wait_rig.replicas  # agent processes started one after another on the same servers


def test_a_pool_resized_down_and_up_while_no_agent_ran_is_waited_for_from_the_new_leader_s_first_read(
    rig: Rig, replicas: Replicas
) -> None:
    first, _, asked = _first_leader_asks_for_three_spot_nodes(rig, replicas)
    _tick_until(replicas, first, 5)
    (saved,) = _saved(rig).scale_ups_waited or ()
    assert (saved.requested_at, saved.judged_at) == (asked, rig.clock.now())  # judged at its last tick
    replicas.stop(first)  # the agent's pod is gone (evicted, out of memory): nobody watches the pool

    rig.clock.advance(MINUTE)
    rig.gke.finish_operations()
    rig.gke.autoscale(NODE_POOLS[SPOT], 0)  # an operator empties the pool ...
    for mig in rig.gke.pools[NODE_POOLS[SPOT]].migs:
        mig.instances = [i for i in mig.instances if i.action != "DELETING"]
    rig.clock.advance(MINUTE)
    rig.gke.finish_operations()
    rig.gke.autoscale(NODE_POOLS[SPOT], 3)  # ... and asks for three again by hand
    rig.clock.advance(4 * MINUTE)

    second, told = replicas.start("leadtime-1")
    replicas.tick(second)
    first_read = rig.clock.now()
    assert _waiting(second) == {SPOT: first_read.timestamp()}  # not the 09:01 ask: nobody watched since
    _tick_until(replicas, second, 25)
    (event,) = _stalled(told)
    assert event.at == first_read + ALLOWANCE
    assert event.summary.startswith(f"Scale-up of {SPOT} to 3 units, found in flight at a leader's first read at ")

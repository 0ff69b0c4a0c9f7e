"""``leadtime_is_leader`` of a leader whose election rounds stopped running (its scheduler held them: a wall clock
stepped back before the runtime kept them on the monotonic clock) while its ticks go on: its lease lapses, the other
replica takes it over, and the gauge follows the lease at each tick, so the two replicas never both say they lead
(``LeadtimeTwoLeaders`` would page someone to scale to one replica)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from actuators import SimulatedCluster
from agent.daemon.lease import LeaseElector
from models.clock import SimulatedClock
from tests.daemon.conftest import LEASE, RETRY
from tests.daemon.links import CuttableLink
from tests.daemon.replicas import POOL, TICK, Fleet, Replica, make_replica


def _leads(replica: Replica) -> float | None:
    return replica.metrics.registry.get_sample_value("leadtime_is_leader")


def test_a_leader_whose_elections_stopped_says_it_no_longer_leads_at_its_next_tick(
    clock: SimulatedClock, elector_for: Callable[[str], tuple[LeaseElector, CuttableLink]]
) -> None:
    cluster = SimulatedCluster([POOL], clock, initial_units={POOL.pool_id: 1})
    fleet = Fleet(clock, cluster)
    for name in ("replica-a", "replica-b"):
        elector, link = elector_for(name)
        fleet.replicas.append(make_replica(name, elector, link, clock, cluster))
    a, b = fleet.replicas
    fleet.run(timedelta(minutes=1))
    assert (_leads(a), _leads(b)) == (1, 0)
    for round_ in range(1, int((LEASE + 2 * TICK) / RETRY) + 1):  # a's election job no longer runs, b's does
        clock.advance(RETRY)
        b.daemon.elect()
        if round_ * RETRY % TICK == timedelta(0):
            a.daemon.tick()
            b.daemon.tick()
    now = clock.now()
    assert not a.elector.is_leader(now) and b.elector.is_leader(now)
    assert (_leads(a), _leads(b)) == (0, 1)  # a said 1 until this change, beside b's 1

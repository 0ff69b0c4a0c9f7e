"""A scale-up whose ask never reached the saved planner memory is still told stalled by the next leader: whole live
daemons (Lease election, the real agent loop, the fake GKE, Kubernetes and Prometheus APIs, a simulated clock) on the
same servers, ledger file and state ConfigMap, the first stopped after asking for three spot nodes that never join.

The old leader may die after its tick asked and before the save, or the ConfigMap writes may fail (HTTP 500) for a
while and a handover come before one succeeds: the memory then says that nothing is waited for. The units in flight no
saved scale-up explains are waited for from the new leader's first read of the pool (late at worst, never lost);
before, the new leader trusted the saved list and never told the stall."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.e2e import scale_up_wait_rig
from tests.e2e.rig import CLASS, SPOT, Rig
from tests.e2e.scale_up_wait_rig import (
    ALLOWANCE,
    Replicas,
    _handover,
    _saved,
    _spot_target,
    _stalled,
    _tick_until,
    _waiting,
)

replicas = scale_up_wait_rig.replicas  # agent processes started one after another on the same servers


@pytest.mark.parametrize("failed_saves", [1, 6], ids=["died-before-its-save", "saves-failing-a-while"])
def test_a_stall_whose_ask_was_never_saved_is_told_from_the_new_leader_s_first_read(
    rig: Rig, replicas: Replicas, failed_saves: int
) -> None:
    rig.add_pools()
    rig.prometheus.set_demand(CLASS, 0)
    first, first_told = replicas.start("leadtime-0")
    _tick_until(replicas, first, 3)
    assert _saved(rig).scale_ups_waited == ()  # nothing asked yet, and saved so
    rig.kube.fail_next(failed_saves, 500, verb="update", resource="configmaps")  # the ConfigMap writes fail
    rig.prometheus.set_demand(CLASS, 24)  # three spot nodes; their instances are created, no node joins
    replicas.tick(first)
    asked = rig.clock.now()
    assert _spot_target(rig) == 3
    _tick_until(replicas, first, failed_saves - 1)  # each failed write is retried at the next tick, and fails again
    assert _saved(rig).scale_ups_waited == ()  # the ask never reached the memory

    second, told = _handover(replicas, first)
    replicas.tick(second)
    first_read = rig.clock.now()
    assert _waiting(second) == {SPOT: first_read.timestamp()}  # the units in flight, from its first read
    (saved,) = _saved(rig).scale_ups_waited or ()  # and saved so, for the next handover
    assert (saved.requested_at, saved.from_units, saved.to_units, saved.inherited) == (first_read, 0, 3, True)
    while not _stalled(told):
        assert rig.clock.now() < first_read + timedelta(hours=1), "the new leader never called the scale-up stalled"
        replicas.tick(second)
    (event,) = _stalled(told)
    assert event.at == first_read + ALLOWANCE and event.at > asked + ALLOWANCE  # late, not lost
    assert event.summary.startswith(f"Scale-up of {SPOT} to 3 units, found in flight at a leader's first read at ")
    assert _stalled(first_told) == []

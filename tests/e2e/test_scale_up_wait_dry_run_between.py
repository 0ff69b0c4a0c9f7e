"""Switching to dry-run and back keeps the scale-ups the enforcing leader saved: whole live daemons (Lease election, the
real agent loop, the fake GKE, Kubernetes and Prometheus APIs, a simulated clock) on the same servers, ledger file and
state ConfigMap: an enforcing leader asks for three spot nodes that never join, a dry-run one takes over, then an
enforcing one again.

A dry-run agent waits for no scale-up (the units in flight are whatever scales the pools'), and carries the saved record
through untouched; before, it dropped each saved entry at its first read of the pool and saved none (an empty list,
which says that nothing is waited for), and the next enforcing leader trusted that."""

from __future__ import annotations

from datetime import timedelta

from tests.e2e import scale_up_wait_rig
from tests.e2e.rig import SPOT, Rig
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


def test_a_dry_run_term_between_two_enforcing_leaders_keeps_the_saved_scale_up(rig: Rig, replicas: Replicas) -> None:
    first, _, asked = _first_leader_asks_for_three_spot_nodes(rig, replicas)
    _tick_until(replicas, first, 3)
    (saved,) = _saved(rig).scale_ups_waited or ()
    assert (saved.requested_at, saved.to_units) == (asked, 3)
    replicas.stop(first)

    rig.clock.advance(MINUTE)  # the team switches to dry-run for a while
    shadow, shadow_told = replicas.start("leadtime-1", mode="dry-run")
    _tick_until(replicas, shadow, 3)
    assert _waiting(shadow) == {}  # it waits for nothing itself
    assert _saved(rig).scale_ups_waited == (saved,)  # and keeps what was saved, as it was saved
    replicas.stop(shadow)

    rig.clock.advance(MINUTE)  # and back to enforce
    third, told = replicas.start("leadtime-2")
    replicas.tick(third)
    first_read = rig.clock.now()
    # nobody judged the scale-up during the dry run: the units in flight are waited for from this first read
    assert _waiting(third) == {SPOT: first_read.timestamp()}
    while not _stalled(told):
        assert rig.clock.now() < first_read + timedelta(hours=1), "the enforcing leader never called it stalled"
        replicas.tick(third)
    (event,) = _stalled(told)
    assert event.at == first_read + ALLOWANCE
    assert _stalled(shadow_told) == []

"""A saved scale-up judged by a replica whose clock ran ahead is not trusted: whole live daemons (Lease election, the
real agent loop, the fake GKE, Kubernetes and Prometheus APIs, a simulated clock) on the same servers, ledger file and
state ConfigMap.

A new leader trusts a saved scale-up judged within an unbroken watch of its first tick. A judgement stamped after that
tick (the replica that saved it had a clock an hour ahead) passed the check however long nobody watched, since the
difference was negative: a pool emptied and asked for three again by hand during a 27-minute outage was told stalled at
the new leader's first read, naming the old ask. It is now waited for from that read, and a warning names the saved
time."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import timedelta

import pytest

from agent.state.codec import encode
from agent.state.configmap import KEY
from tests.e2e import scale_up_wait_rig
from tests.e2e.rig import NODE_POOLS, SPOT, Rig
from tests.e2e.scale_up_wait_rig import (
    ALLOWANCE,
    MINUTE,
    STATE,
    Replicas,
    _first_leader_asks_for_three_spot_nodes,
    _saved,
    _stalled,
    _tick_until,
    _waiting,
)

replicas = scale_up_wait_rig.replicas  # agent processes started one after another on the same servers


def test_a_saved_judgement_stamped_by_a_clock_ahead_is_not_trusted(
    rig: Rig, replicas: Replicas, caplog: pytest.LogCaptureFixture
) -> None:
    first, _, _ = _first_leader_asks_for_three_spot_nodes(rig, replicas)
    _tick_until(replicas, first, 5)
    replicas.stop(first)
    # the last leader's clock ran an hour ahead: its judgement of the scale-up is saved an hour late
    ahead = rig.clock.now() + timedelta(hours=1)
    memory = _saved(rig)
    (saved,) = memory.scale_ups_waited or ()
    cm = rig.kube.get(*STATE)
    assert cm is not None
    cm["data"][KEY] = encode(replace(memory, scale_ups_waited=(replace(saved, judged_at=ahead),)), ahead, "leadtime-2")
    rig.kube.put("configmaps", cm)

    rig.clock.advance(MINUTE)  # nobody watches the pool for 27 minutes
    rig.gke.finish_operations()
    rig.gke.autoscale(NODE_POOLS[SPOT], 0)  # an operator empties the pool ...
    for mig in rig.gke.pools[NODE_POOLS[SPOT]].migs:
        mig.instances = [i for i in mig.instances if i.action != "DELETING"]
    rig.clock.advance(20 * MINUTE)
    rig.gke.finish_operations()
    rig.gke.autoscale(NODE_POOLS[SPOT], 3)  # ... and asks for three again by hand
    rig.clock.advance(6 * MINUTE)

    second, told = replicas.start("leadtime-1")
    with caplog.at_level(logging.WARNING, logger="agent.scale_up_memory"):
        replicas.tick(second)
    first_read = rig.clock.now()
    assert _waiting(second) == {SPOT: first_read.timestamp()}  # not the old ask: nobody watched since
    assert _stalled(told) == []  # before: told at this first read, 'asked at' the old ask
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "agent.scale_up_memory"]
    assert ahead.isoformat() in warning and f"pool={SPOT}" in warning
    _tick_until(replicas, second, 25)
    (event,) = _stalled(told)
    assert event.at == first_read + ALLOWANCE
    assert event.summary.startswith(f"Scale-up of {SPOT} to 3 units, found in flight at a leader's first read at ")

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
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta

import pytest
from kubernetes import client as k8s

from agent.state.codec import encode
from agent.state.configmap import KEY
from tests.e2e.rig import CLASS, NODE_POOLS, SPOT, Rig
from tests.e2e.test_scale_up_wait_across_leaders import ALLOWANCE, MINUTE, Replicas, _stalled, _waiting
from tests.e2e.test_scale_up_wait_saved_in_memory import STATE, _saved, _tick_until


@pytest.fixture
def replicas(rig: Rig, kube_client: k8s.ApiClient) -> Iterator[Replicas]:
    started = Replicas(rig, kube_client)
    yield started
    for daemon in list(started.started):
        started.stop(daemon)


def test_a_saved_judgement_stamped_by_a_clock_ahead_is_not_trusted(
    rig: Rig, replicas: Replicas, caplog: pytest.LogCaptureFixture
) -> None:
    rig.add_pools()
    rig.prometheus.set_demand(CLASS, 24)  # three spot nodes; their instances are created, no node joins
    first, _ = replicas.start("leadtime-0")
    replicas.tick(first)
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

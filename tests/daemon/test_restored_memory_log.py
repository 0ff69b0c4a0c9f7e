"""The line a daemon logs when it first reads the stored planner memory counts what it keeps of it: a whole daemon
(real agent loop and planner, the memory kept in a ConfigMap through the real kubernetes client on the fake API
server, a simulated cluster and clock) whose stored memory names a pool the configuration no longer has counts that
pool in none of its recent changes, back-offs or blocked pools, as the agent drops what the memory held for it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

import pytest
from kubernetes import client as k8s

from actuators import SimulatedCluster
from agent.planning import PlannerMemory
from agent.state.configmap import KubernetesStateStore
from kube import ConfigMaps
from models.clock import SimulatedClock
from tests.daemon.conftest import T0
from tests.daemon.scenario import helios_settings, scenario_replica
from tests.fakes.kube_api import FakeKubeApi

REMOVED = "a100-spot"  # a pool of helios-hybrid, not of helios-earth
KEPT = "a100-on-demand"  # a pool of both


def _store(kube_api: FakeKubeApi, api_client_for: Callable[[str], k8s.ApiClient]) -> KubernetesStateStore:
    config_maps = ConfigMaps(api_client_for(kube_api.url), timedelta(seconds=0.3))
    return KubernetesStateStore(config_maps, name="leadtime-state", namespace="leadtime", identity="leadtime-a")


def test_the_restored_memory_line_counts_only_the_configured_pools(
    kube_api: FakeKubeApi, api_client_for: Callable[[str], k8s.ApiClient], caplog: pytest.LogCaptureFixture
) -> None:
    clock = SimulatedClock(T0 + timedelta(days=1))
    earlier = T0 + timedelta(hours=20)
    _store(kube_api, api_client_for).save(
        PlannerMemory(
            last_change={REMOVED: (earlier, 1), KEPT: (earlier, -1)},
            backoff_until={REMOVED: clock.now() + timedelta(hours=2)},
            blocked={REMOVED: "404 node pool not found", KEPT: "403 Forbidden: permission denied"},
        ),
        earlier,
    )
    settings = helios_settings(None)  # helios-earth: a100-on-demand only
    assert {p.pool_id for p in settings.pool_specs()} == {KEPT}
    cluster = SimulatedCluster(settings.pool_specs(), clock)
    state = _store(kube_api, api_client_for)
    replica = scenario_replica("leadtime-a", settings, clock, cluster, "enforce", None, state=state, trace_start=T0)
    replica.assembled.daemon.refit()
    with caplog.at_level(logging.INFO, logger="agent.state.keeper"):
        clock.advance(timedelta(seconds=60))
        replica.assembled.daemon.tick()

    (restored,) = [r for r in caplog.records if r.getMessage().startswith("planner memory restored")]
    assert restored.getMessage() == "planner memory restored: 1 recent changes, 0 back-offs, 1 blocked pools"
    assert (restored.__dict__["blocked"], restored.__dict__["backoff"]) == ([KEPT], [])
    memory = replica.assembled.loop.agent.memory  # what the agent kept, which the line counts
    assert (set(memory.last_change), set(memory.backoff_until), set(memory.blocked)) == ({KEPT}, set(), {KEPT})

"""A pool removed from the configuration while the stored planner memory still blocks it, with whole daemons (real
agent loop and planner, the memory kept in a ConfigMap through the real kubernetes client on the fake API server,
a simulated cluster and clock): what the memory held for that pool is dropped at the first tick and logged once,
naming it; it raises no blocked-pool alert and has no ``leadtime_pool_blocked`` series, the next save leaves it out
of the ConfigMap, and a pool added again later under the same id is not blocked. What the memory holds for the
configured pools is kept."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import timedelta

import pytest
from kubernetes import client as k8s
from prometheus_client.parser import text_string_to_metric_families

from actuators import SimulatedCluster
from agent.planning import PlannerMemory
from agent.state.configmap import KEY, KubernetesStateStore
from config import Settings, load_settings
from kube import ConfigMaps
from models import AlertKind
from models.clock import SimulatedClock
from tests.daemon import scenario
from tests.daemon.conftest import T0
from tests.daemon.scenario import ScenarioReplica, helios_settings, scenario_replica
from tests.fakes.kube_api import FakeKubeApi

REMOVED = "a100-spot"  # a pool of helios-hybrid, not of helios-earth
KEPT = "a100-on-demand"  # a pool of both
NAME, NAMESPACE = "leadtime-state", "leadtime"
TICK = timedelta(seconds=60)


def _store(kube_api: FakeKubeApi, api_client_for: Callable[[str], k8s.ApiClient]) -> KubernetesStateStore:
    config_maps = ConfigMaps(api_client_for(kube_api.url), timedelta(seconds=0.3))
    return KubernetesStateStore(config_maps, name=NAME, namespace=NAMESPACE, identity="leadtime-a")


def _stored_document(kube_api: FakeKubeApi) -> dict[str, object]:
    found = kube_api.get("configmaps", NAME, NAMESPACE)
    assert found is not None
    return dict(json.loads(found["data"][KEY]))


def _blocked_series(replica: ScenarioReplica) -> dict[str, float]:
    text = replica.assembled.metrics.exposition().decode()
    (family,) = [f for f in text_string_to_metric_families(text) if f.name == "leadtime_pool_blocked"]
    return {sample.labels["pool"]: sample.value for sample in family.samples}


def _blocked_alerts(replica: ScenarioReplica, pool: str) -> int:
    return sum(
        1
        for e in replica.notifier.delivered
        if e.kind is AlertKind.ACTUATOR_FAILURE and e.subject == pool and "unblocked" in e.summary
    )


def _hybrid_settings() -> Settings:
    base = load_settings(scenario.ROOT / "config/examples/helios-hybrid.yaml")
    reference = helios_settings(None)
    return base.model_copy(update={"daemon": reference.daemon, "loop": reference.loop, "forecast": reference.forecast})


def _run(replica: ScenarioReplica, clock: SimulatedClock, ticks: int) -> None:
    for _ in range(ticks):
        clock.advance(TICK)
        replica.assembled.daemon.tick()


def test_a_removed_pool_blocked_in_the_stored_memory_is_dropped_and_not_inherited_when_added_again(
    kube_api: FakeKubeApi, api_client_for: Callable[[str], k8s.ApiClient], caplog: pytest.LogCaptureFixture
) -> None:
    clock = SimulatedClock(T0 + timedelta(days=1))
    earlier = T0 + timedelta(hours=20)
    # What a release of the configuration with both pools left: the removed pool blocked after a 404, backed off
    # and recently changed; the kept pool blocked after a refused permission.
    _store(kube_api, api_client_for).save(
        PlannerMemory(
            last_change={REMOVED: (earlier, 1)},
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
    with caplog.at_level(logging.WARNING, logger="agent.loop"):
        _run(replica, clock, 30)

    dropped = [r for r in caplog.records if "pools not in the configuration" in r.getMessage()]
    assert len(dropped) == 1
    assert REMOVED in dropped[0].getMessage()
    assert _blocked_alerts(replica, REMOVED) == 0
    assert _blocked_alerts(replica, KEPT) >= 1  # a configured pool's block is still told
    assert _blocked_series(replica) == {KEPT: 1.0}
    memory = replica.assembled.loop.agent.memory
    assert REMOVED not in memory.pools()
    assert memory.blocked == {KEPT: "403 Forbidden: permission denied"}
    document = _stored_document(kube_api)
    assert REMOVED not in json.dumps(document)
    assert document["blocked"] == {KEPT: "403 Forbidden: permission denied"}

    # The pool is added again under the same id: it starts afresh, not blocked
    hybrid = _hybrid_settings()
    assert REMOVED in {p.pool_id for p in hybrid.pool_specs()}
    hybrid_cluster = SimulatedCluster(hybrid.pool_specs(), clock)
    again = scenario_replica(
        "leadtime-b",
        hybrid,
        clock,
        hybrid_cluster,
        "enforce",
        None,
        state=_store(kube_api, api_client_for),
        trace_start=T0,
    )
    again.assembled.daemon.refit()
    _run(again, clock, 3)
    memory = again.assembled.loop.agent.memory
    assert REMOVED not in memory.blocked and not memory.in_backoff(REMOVED, clock.now())
    assert KEPT in memory.blocked
    assert _blocked_alerts(again, REMOVED) == 0
    assert _blocked_series(again) == {KEPT: 1.0}

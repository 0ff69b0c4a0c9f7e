"""The whole daemon (the real agent loop) survives each dependency going down: Prometheus, the cloud API, the
chat service. The pools are held, an alert goes out when the notifier is reachable, and the agent recovers on
its own when the dependency returns. (The Kubernetes API going down is in test_service and test_lease.)"""

from __future__ import annotations

from datetime import timedelta

import pytest

from actuators import SimulatedCluster
from models import AlertKind
from models.clock import SimulatedClock
from tests.daemon.scenario import ScenarioReplica, helios_settings, scenario_replica

TICK = timedelta(seconds=60)


@pytest.fixture
def replica(clock: SimulatedClock) -> tuple[ScenarioReplica, SimulatedCluster]:
    settings = helios_settings(kube_url=None)  # a single replica: election off
    cluster = SimulatedCluster(settings.pool_specs(), clock)
    # The pools are read through the router a live daemon reads them through: a cloud that is down has its pools
    # left out and reported unread, and the read does not fail.
    return scenario_replica("leadtime-a", settings, clock, cluster, "enforce", kube=None, routed=True), cluster


def _ticks(replica: ScenarioReplica, clock: SimulatedClock, count: int) -> None:
    for _ in range(count):
        clock.advance(TICK)
        replica.assembled.daemon.tick()


def _metric(replica: ScenarioReplica, name: str, labels: dict[str, str]) -> float:
    return replica.assembled.metrics.registry.get_sample_value(name, labels) or 0.0


def test_prometheus_down_holds_the_pools_alerts_and_recovers(
    replica: tuple[ScenarioReplica, SimulatedCluster], clock: SimulatedClock
) -> None:
    r, cluster = replica
    _ticks(r, clock, 3)
    held = cluster.paid_units()
    assert sum(held.values()) > 0  # it scaled up for the replayed demand
    r.deps.metrics_down = True
    _ticks(r, clock, 15)  # longer than a lead time: nothing is released on missing data
    assert cluster.paid_units() == held
    assert any(e.kind is AlertKind.MISSING_DATA for e in r.notifier.delivered)
    assert _metric(r, "leadtime_errors_total", {"error": "MetricsUnavailable"}) >= 15 * 16
    assert _metric(r, "leadtime_ticks_total", {"role": "leader", "outcome": "blind"}) == 15
    readiness = r.assembled.health.readiness(clock.now())
    assert not readiness.ready  # 15 minutes without a class's demand, past the 3-minute readiness bound
    assert "no demand class has data" in readiness.detail
    r.deps.metrics_down = False
    before = len(r.notifier.delivered)
    _ticks(r, clock, 3)
    assert r.assembled.health.readiness(clock.now()).ready
    assert all(e.kind is not AlertKind.MISSING_DATA for e in r.notifier.delivered[before:])


def test_cloud_api_down_holds_the_pools_alerts_and_recovers(
    replica: tuple[ScenarioReplica, SimulatedCluster], clock: SimulatedClock
) -> None:
    r, cluster = replica
    _ticks(r, clock, 3)
    held = cluster.paid_units()
    actions = cluster.scale_actions
    r.deps.cloud_down = True
    _ticks(r, clock, 5)
    assert cluster.paid_units() == held
    assert cluster.scale_actions == actions
    assert [e.kind for e in r.notifier.delivered].count(AlertKind.POOL_UNREADABLE) >= 1
    # every pool unread: the ticks ran and held every pool, counted apart from the ticks that planned
    assert _metric(r, "leadtime_ticks_total", {"role": "leader", "outcome": "blind"}) == 5
    readiness = r.assembled.health.readiness(clock.now())
    assert not readiness.ready
    assert "no pool could be read" in readiness.detail
    r.deps.cloud_down = False
    _ticks(r, clock, 2)
    assert r.assembled.health.readiness(clock.now()).ready
    assert _metric(r, "leadtime_ticks_total", {"role": "leader", "outcome": "ok"}) == 5


def test_chat_service_down_changes_nothing_but_delivery(
    replica: tuple[ScenarioReplica, SimulatedCluster], clock: SimulatedClock
) -> None:
    r, cluster = replica
    r.notifier.down = True
    r.deps.metrics_down = True
    _ticks(r, clock, 2)
    assert r.notifier.refused  # the alerts were attempted
    assert r.notifier.delivered == []
    r.deps.metrics_down = False
    _ticks(r, clock, 2)
    assert sum(cluster.paid_units().values()) > 0  # it kept working: scaled up once data came back
    assert r.assembled.health.readiness(clock.now()).ready


def test_dry_run_decides_and_records_but_changes_no_pool(clock: SimulatedClock) -> None:
    settings = helios_settings(kube_url=None)
    cluster = SimulatedCluster(settings.pool_specs(), clock)
    r = scenario_replica("leadtime-a", settings, clock, cluster, "dry-run", kube=None)
    _ticks(r, clock, 3)
    assert cluster.scale_actions == 0
    assert (
        _metric(r, "leadtime_decisions_total", {"pool": "a100-on-demand", "action": "scale-up", "status": "recorded"})
        >= 1
    )
    assert _metric(r, "leadtime_pool_recommended_units", {"pool": "a100-on-demand"}) > 0

"""A pool blocked after a permanent error is told about for as long as it stays blocked, not only at the moment it
was blocked: the real agent loop on the fakes, its planner memory read back from the state ConfigMap after a
restart (as the daemon does every tick), raises the critical alert every tick with how to unblock the pool, a
notifier sends it once per de-duplication window, and ``leadtime_pool_blocked{pool}`` says the same."""

from __future__ import annotations

from datetime import timedelta

from kubernetes import client as k8s

from agent.daemon.metrics import BackoffCollector
from agent.notify import RecordingNotifier
from agent.planning import PlannerMemory
from agent.state import MemoryKeeper
from agent.state.configmap import KubernetesStateStore
from kube import ConfigMaps
from models import AlertKind, Severity
from tests.e2e.rig import ON_DEMAND, SPOT, Rig, end_process, live_agent

DENIED = "HTTP 403: Required 'container.nodePools.update' permission"


def _store(kube: k8s.ApiClient, identity: str) -> KubernetesStateStore:
    configmaps = ConfigMaps(kube, timedelta(seconds=2))
    return KubernetesStateStore(configmaps, name="leadtime-state", namespace="leadtime", identity=identity)


def test_a_pool_blocked_before_a_restart_is_alerted_every_tick_with_how_to_unblock_it(
    rig: Rig, kube_client: k8s.ApiClient
) -> None:
    rig.add_pools(spot_nodes=1, on_demand_nodes=1)
    before = MemoryKeeper(_store(kube_client, "leadtime-0"))
    memory, _ = before.before_tick(PlannerMemory())
    assert before.after_tick(memory.block(ON_DEMAND, DENIED), rig.clock.now()) is None  # saved, then the pod goes

    keeper = MemoryKeeper(_store(kube_client, "leadtime-1"))  # the restarted process
    notifier = RecordingNotifier(dedup_window=timedelta(hours=1))
    agent = live_agent(rig, rig.settings(), kube_client, notifier)
    try:
        told = []
        for _ in range(3):
            agent.memory, error = keeper.before_tick(agent.memory)
            assert error is None, error
            report = agent.run_once(rig.clock.now())
            told.append([a for a in report.alerts if a.kind is AlertKind.ACTUATOR_FAILURE])
            rig.clock.advance(timedelta(minutes=1))
        for alerts in told:
            (alert,) = alerts
            assert (alert.severity, alert.subject, alert.details["error"]) == (Severity.CRITICAL, ON_DEMAND, DENIED)
            assert "remove the pool from `blocked`" in alert.summary and "planner-memory.json" in alert.summary
        sent = [e for e in notifier.events if e.kind is AlertKind.ACTUATOR_FAILURE]
        assert len(sent) == 1  # one message per window, not one per tick

        rig.clock.advance(timedelta(hours=1))
        agent.memory, _ = keeper.before_tick(agent.memory)
        agent.run_once(rig.clock.now())
        assert len([e for e in notifier.events if e.kind is AlertKind.ACTUATOR_FAILURE]) == 2  # told again

        families = {f.name: f for f in BackoffCollector(lambda: agent.memory, rig.clock).collect()}
        samples = [(s.labels["pool"], s.value) for s in families["leadtime_pool_blocked"].samples]
        assert samples == [(ON_DEMAND, 1.0)]
        assert SPOT not in agent.memory.blocked
    finally:
        end_process(agent)


def test_no_blocked_pool_no_alert_and_no_series(rig: Rig, kube_client: k8s.ApiClient) -> None:
    rig.add_pools(spot_nodes=1, on_demand_nodes=1)
    agent = live_agent(rig, rig.settings(), kube_client, RecordingNotifier())
    try:
        report = agent.run_once(rig.clock.now())
        assert [a for a in report.alerts if a.kind is AlertKind.ACTUATOR_FAILURE] == []
        families = {f.name: f for f in BackoffCollector(lambda: agent.memory, rig.clock).collect()}
        assert families["leadtime_pool_blocked"].samples == []
    finally:
        end_process(agent)

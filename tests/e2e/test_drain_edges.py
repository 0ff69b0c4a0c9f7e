"""How the agent shrinks drained pools when things go wrong, on the fake APIs with the real drainer: idleness that
cannot be read holds the pool, a node that must not be disrupted is never cordoned and is told about at every tick,
a drain started before a restart is taken over (not left cordoned, not started twice), a permanent error stops
touching the pool."""

from __future__ import annotations

from datetime import timedelta

from kubernetes import client as k8s

from agent.loop import Agent, TickReport
from agent.notify import RecordingNotifier
from models import ActionStatus, AlertKind, SkipReason
from tests.e2e.rig import CLASS, NODE_POOLS, ON_DEMAND, Rig, end_process, live_agent
from tests.fakes import kube_objects as objs

MINUTE = timedelta(minutes=1)


def _one_busy_one_idle(rig: Rig, kube: k8s.ApiClient) -> tuple[Agent, str]:
    rig.add_pools(on_demand_nodes=2)
    busy, idle = rig.mirror.nodes(ON_DEMAND)
    rig.kube.put("pods", objs.pod("train", busy, namespace=CLASS, accelerators=8))
    rig.prometheus.set_demand(CLASS, 8)
    return live_agent(rig, rig.settings(spot_max=0), kube, RecordingNotifier()), idle


def _skip(report: TickReport, pool_id: str) -> SkipReason | None:
    skips = [s.reason for s in report.plan.skips if s.pool_id == pool_id]
    return skips[0] if skips else None


def test_idleness_that_cannot_be_read_holds_the_pool_and_restarts_the_window(
    rig: Rig, kube_client: k8s.ApiClient
) -> None:
    agent, _ = _one_busy_one_idle(rig, kube_client)
    agent.run_once(rig.clock.now())
    rig.clock.advance(10 * MINUTE)
    rig.kube.fail_next(1, 500, verb="list", resource="pods")  # the idle check of this tick fails
    held = agent.run_once(rig.clock.now())
    assert held.plan.resizes == ()
    assert _skip(held, ON_DEMAND) is SkipReason.NOT_IDLE
    assert [a.kind for a in held.alerts if a.subject == f"idle nodes of {ON_DEMAND}"] == [AlertKind.ACTUATOR_FAILURE]
    rig.clock.advance(MINUTE)
    assert _skip(agent.run_once(rig.clock.now()), ON_DEMAND) is SkipReason.STABILIZING  # seen idle anew
    assert rig.kube.calls("patch", "nodes") == 0


def test_a_node_that_must_not_be_disrupted_is_not_retried_every_tick(rig: Rig, kube_client: k8s.ApiClient) -> None:
    agent, idle = _one_busy_one_idle(rig, kube_client)
    guard = {"karpenter.sh/do-not-disrupt": "true"}
    rig.kube.put("pods", objs.pod("precious", idle, annotations=guard))
    agent.run_once(rig.clock.now())
    held = f"idle node {idle} of {ON_DEMAND} not drained"
    for _ in range(6):  # never offered for a drain, and told why at every tick
        rig.clock.advance(2 * MINUTE)
        quiet = agent.run_once(rig.clock.now())
        assert quiet.results == ()
        assert _skip(quiet, ON_DEMAND) is SkipReason.NOT_IDLE
        (alert,) = [a for a in quiet.alerts if a.subject == held]
        assert "karpenter.sh/do-not-disrupt" in alert.summary
    assert not rig.kube.get("nodes", idle)["spec"].get("unschedulable")  # type: ignore[index]
    assert rig.kube.calls("patch", "nodes") == 0  # never cordoned
    assert rig.gke.calls("POST", "deleteInstances") == 0


def test_a_drain_started_before_a_restart_is_taken_over_and_finished_once(rig: Rig, kube_client: k8s.ApiClient) -> None:
    agent, idle = _one_busy_one_idle(rig, kube_client)
    rig.kube.put("pods", objs.pod("web", idle, labels={"app": "web"}, owner_kind="ReplicaSet"))
    rig.kube.put("poddisruptionbudgets", objs.pdb("web", {"app": "web"}, min_available=1), group="policy")
    agent.run_once(rig.clock.now())
    rig.clock.advance(10 * MINUTE)
    (waiting,) = agent.run_once(rig.clock.now()).results
    assert waiting.status is ActionStatus.STARTED

    end_process(agent)
    restarted = live_agent(rig, rig.settings(spot_max=0), kube_client, RecordingNotifier())  # memory is gone
    rig.clock.advance(MINUTE)
    resumed = restarted.run_once(rig.clock.now())
    assert resumed.plan.resizes == ()  # the node being drained is already out of the pool's count
    assert [(r.key, r.status) for r in resumed.results] == [(waiting.key, ActionStatus.STARTED)]
    rig.kube.delete("poddisruptionbudgets", "web", "default", group="policy")
    rig.clock.advance(MINUTE)
    (evicted,) = restarted.run_once(rig.clock.now()).results
    assert (evicted.key, evicted.status) == (waiting.key, ActionStatus.STARTED)  # its pod shuts down first
    rig.clock.advance(MINUTE)
    (done,) = restarted.run_once(rig.clock.now()).results
    assert (done.key, done.status) == (waiting.key, ActionStatus.DONE)
    rig.clock.advance(MINUTE)
    assert restarted.run_once(rig.clock.now()).results == ()
    assert rig.gke.calls("POST", "deleteInstances") == 1
    deleting = [i.name for i in rig.gke.pools[NODE_POOLS[ON_DEMAND]].migs[0].instances if i.action == "DELETING"]
    assert deleting == [idle]


def test_a_permanent_drain_error_stops_touching_the_pool(rig: Rig, kube_client: k8s.ApiClient) -> None:
    agent, _ = _one_busy_one_idle(rig, kube_client)
    agent.run_once(rig.clock.now())
    rig.clock.advance(10 * MINUTE)
    rig.kube.fail_next(1, 403, verb="patch", resource="nodes")  # RBAC refuses the cordon
    refused = agent.run_once(rig.clock.now())
    assert [r.status for r in refused.results] == [ActionStatus.FAILED]
    assert [(a.kind, a.subject) for a in refused.alerts if a.subject == ON_DEMAND] == [
        (AlertKind.ACTUATOR_FAILURE, ON_DEMAND)
    ]
    rig.clock.advance(MINUTE)
    blocked = agent.run_once(rig.clock.now())
    assert blocked.results == ()
    assert _skip(blocked, ON_DEMAND) is SkipReason.PERMANENT_ERROR

"""The real agent loop on the live parts ``leadtime run`` wires (PrometheusSource, the GKE node pool actuator
behind the router and metrics wrapper, the Kubernetes node drainer), talking over HTTP to the fake GKE, Compute
Engine, Kubernetes and Prometheus APIs: a scale-up, a stockout that spills to the next pool (refused at the call,
or accepted and failed afterwards), and a scale-down that drains exactly one idle node through a disruption budget
over several ticks."""

from __future__ import annotations

from datetime import timedelta

from kubernetes import client as k8s

from agent.notify import RecordingNotifier
from models import ActionStatus, AlertKind, SkipReason
from tests.e2e.rig import CLASS, NODE_POOLS, ON_DEMAND, SPOT, ZONES, Rig, live_agent
from tests.fakes import kube_objects as objs

MINUTE = timedelta(minutes=1)


def _resize_calls(rig: Rig, pool_id: str) -> int:
    """The resizes sent to the pool's one zone: its instance group's."""
    group = rig.gke.pools[NODE_POOLS[pool_id]].migs[0].name
    return rig.gke.calls("POST", f"/instanceGroupManagers/{group}/resize")


def test_a_tick_scales_the_cheapest_pool_up_to_the_demand_read_from_prometheus(
    rig: Rig, kube_client: k8s.ApiClient
) -> None:
    rig.add_pools()
    rig.prometheus.set_demand(CLASS, 24)  # 24 GPUs: three 8-GPU nodes
    agent = live_agent(rig, rig.settings(), kube_client, RecordingNotifier())

    report = agent.run_once(rig.clock.now())

    assert report.observed == {CLASS: 24.0}
    assert [(r.pool_id, r.from_units, r.to_units) for r in report.plan.resizes] == [(SPOT, 0, 3)]
    assert [(r.pool_id, r.status) for r in report.results] == [(SPOT, ActionStatus.STARTED)]
    assert _resize_calls(rig, SPOT) == 1
    assert _resize_calls(rig, ON_DEMAND) == 0
    assert rig.gke.pools[NODE_POOLS[SPOT]].migs[0].target_size == 3
    queries = rig.prometheus.queries
    assert any('namespace="training"' in q and "kube_pod_container_resource_requests" in q for q in queries)

    rig.settle()
    rig.clock.advance(10 * MINUTE)
    steady = agent.run_once(rig.clock.now())
    assert steady.plan.resizes == ()
    assert steady.results == ()
    assert len(rig.mirror.nodes(SPOT)) == 3
    assert _resize_calls(rig, SPOT) == 1


def test_a_stockout_on_the_spot_pool_makes_the_next_tick_use_the_on_demand_pool(
    rig: Rig, kube_client: k8s.ApiClient
) -> None:
    rig.add_pools()
    rig.gke.stockout(ZONES[SPOT], mode="http")  # GKE refuses the resize: the zone has no capacity
    rig.prometheus.set_demand(CLASS, 24)
    notifier = RecordingNotifier()
    agent = live_agent(rig, rig.settings(), kube_client, notifier)

    first = agent.run_once(rig.clock.now())
    assert [(r.pool_id, r.to_units) for r in first.plan.resizes] == [(SPOT, 3)]
    (failed,) = first.results
    assert (failed.pool_id, failed.status) == (SPOT, ActionStatus.FAILED)
    assert "ZONE_RESOURCE_POOL_EXHAUSTED" in (failed.error or "")
    assert [(a.kind, a.subject) for a in first.alerts] == [(AlertKind.STOCKOUT, SPOT)]
    assert _resize_calls(rig, ON_DEMAND) == 0

    rig.clock.advance(MINUTE)
    second = agent.run_once(rig.clock.now())
    assert [(r.pool_id, r.from_units, r.to_units) for r in second.plan.resizes] == [(ON_DEMAND, 0, 3)]
    assert [(r.pool_id, r.status) for r in second.results] == [(ON_DEMAND, ActionStatus.STARTED)]
    assert rig.gke.pools[NODE_POOLS[ON_DEMAND]].migs[0].target_size == 3
    assert rig.gke.pools[NODE_POOLS[SPOT]].migs[0].target_size == 0
    assert _resize_calls(rig, SPOT) == 1  # the backed-off pool is not asked again


def test_a_stockout_after_an_accepted_resize_sends_the_demand_to_the_on_demand_pool(
    rig: Rig, kube_client: k8s.ApiClient
) -> None:
    rig.add_pools()
    rig.gke.stockout(ZONES[SPOT], mode="operation")  # GKE accepts the resize; the zone cannot create the instances
    rig.prometheus.set_demand(CLASS, 24)
    agent = live_agent(rig, rig.settings(), kube_client, RecordingNotifier())

    first = agent.run_once(rig.clock.now())
    assert [(r.pool_id, r.status) for r in first.results] == [(SPOT, ActionStatus.STARTED)]
    spot = rig.gke.pools[NODE_POOLS[SPOT]].migs[0]
    assert spot.target_size == 3

    rig.settle()  # the resize operation ends with the stockout; none of the three instances comes up
    rig.clock.advance(10 * MINUTE)
    second = agent.run_once(rig.clock.now())
    # the failed instances are neither waited for nor asked again: they are removed, the spot pool backs off and
    # this same tick fills the on-demand pool
    assert [a.kind for a in second.alerts] == [AlertKind.STOCKOUT]
    assert second.alerts[0].subject == SPOT
    assert spot.target_size == 0
    assert [i.action for i in spot.instances] == ["DELETING"] * 3
    assert [(r.pool_id, r.from_units, r.to_units) for r in second.plan.resizes] == [(ON_DEMAND, 0, 3)]
    assert [(r.pool_id, r.status) for r in second.results] == [
        (SPOT, ActionStatus.STARTED),  # removing the three stuck instances
        (ON_DEMAND, ActionStatus.STARTED),
    ]
    assert rig.gke.pools[NODE_POOLS[ON_DEMAND]].migs[0].target_size == 3
    assert _resize_calls(rig, SPOT) == 1  # the backed-off pool is not asked again

    rig.clock.advance(MINUTE)
    third = agent.run_once(rig.clock.now())
    assert third.alerts == ()  # nothing failed is left: no second alert, no second removal
    assert [r.pool_id for r in third.results] == []

    rig.settle()
    rig.clock.advance(5 * MINUTE)  # within the spot pool's back-off: the demand stays where it was served
    steady = agent.run_once(rig.clock.now())
    assert steady.plan.resizes == ()
    assert (len(rig.mirror.nodes(SPOT)), len(rig.mirror.nodes(ON_DEMAND))) == (0, 3)


def test_a_scale_down_drains_exactly_the_idle_node_through_a_disruption_budget(
    rig: Rig, kube_client: k8s.ApiClient
) -> None:
    rig.add_pools(on_demand_nodes=3)
    busy_a, busy_b, idle = rig.mirror.nodes(ON_DEMAND)
    for i, node in enumerate((busy_a, busy_b)):
        rig.kube.put("pods", objs.pod(f"train-{i}", node, namespace=CLASS, accelerators=8))
    for node in (busy_a, idle):
        rig.kube.put("pods", objs.pod(f"web-{node}", node, labels={"app": "web"}, owner_kind="ReplicaSet"))
    budget = objs.pdb("web", {"app": "web"}, min_available=2, expected_pods=2)
    rig.kube.put("poddisruptionbudgets", budget, group="policy")
    rig.prometheus.set_demand(CLASS, 16)  # two nodes' worth: one of three may go, once it has been idle long enough
    agent = live_agent(rig, rig.settings(spot_max=0), kube_client, RecordingNotifier())

    # idle for less than the stabilization window: held
    for _ in range(2):
        report = agent.run_once(rig.clock.now())
        assert report.plan.resizes == ()
        assert [(s.pool_id, s.reason) for s in report.plan.skips if s.pool_id == ON_DEMAND] == [
            (ON_DEMAND, SkipReason.STABILIZING)
        ]
        rig.clock.advance(5 * MINUTE)

    # idle for the window: the planner releases one unit, which becomes a drain of that node; the budget says wait
    release = agent.run_once(rig.clock.now())
    assert [(r.pool_id, r.from_units, r.to_units) for r in release.plan.resizes] == [(ON_DEMAND, 3, 2)]
    (waiting,) = release.results
    assert waiting.status is ActionStatus.STARTED
    assert idle in waiting.detail and "disruption budgets" in waiting.detail
    assert rig.kube.get("nodes", idle)["spec"]["unschedulable"] is True  # type: ignore[index]
    assert rig.kube.get("pods", f"web-{idle}", "default") is not None

    # the next tick continues the same drain (same key) and plans nothing new for the pool
    rig.clock.advance(MINUTE)
    still = agent.run_once(rig.clock.now())
    assert still.plan.resizes == ()
    assert [(r.key, r.status) for r in still.results] == [(waiting.key, ActionStatus.STARTED)]

    # a replacement web pod comes up elsewhere: the budget allows the eviction; the pod shuts down (Terminating)
    rig.kube.put("pods", objs.pod("web-replacement", busy_b, labels={"app": "web"}, owner_kind="ReplicaSet"))
    rig.clock.advance(MINUTE)
    evicted = agent.run_once(rig.clock.now())
    assert [(r.key, r.status) for r in evicted.results] == [(waiting.key, ActionStatus.STARTED)]
    assert "to finish terminating" in evicted.results[0].detail
    assert rig.gke.calls("POST", "deleteInstances") == 0

    # once it has stopped (within its grace period) the node is removed
    rig.clock.advance(MINUTE)
    done = agent.run_once(rig.clock.now())
    assert [(r.key, r.status) for r in done.results] == [(waiting.key, ActionStatus.DONE)]
    assert rig.gke.calls("POST", "deleteInstances") == 1
    instances = {i.name: i.action for i in rig.gke.pools[NODE_POOLS[ON_DEMAND]].migs[0].instances}
    assert instances == {busy_a: "NONE", busy_b: "NONE", idle: "DELETING"}
    assert _resize_calls(rig, ON_DEMAND) == 0  # never a blind resize
    assert rig.kube.calls("delete", "pods") == 0  # evicted through the API, never deleted by force

    rig.settle()
    rig.clock.advance(MINUTE)
    after = agent.run_once(rig.clock.now())
    assert after.plan.resizes == ()
    assert after.results == ()
    assert rig.mirror.nodes(ON_DEMAND) == [busy_a, busy_b]
    assert rig.kube.get("pods", "train-0", CLASS) is not None

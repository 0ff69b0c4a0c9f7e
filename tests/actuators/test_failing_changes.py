"""Changes a pool keeps refusing with errors a retry may fix are told about: the executor, on the real GKE and
Kubernetes adapters against the fake APIs, remembers since when a pool's changes keep failing and, once that has
lasted the pool's lead time, raises an ``actuator-failure`` warning naming the pool, the error and for how long; a
failing scale-up backs the pool off as a stockout does, and an accepted change clears the count."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kubernetes import client as k8s

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.kubernetes_drain import KubernetesNodeDrainer
from agent.drains import NodeDrains
from agent.executor import execute
from agent.planning import PlannerMemory
from agent.state.codec import decode, encode
from config.cloud import NodePoolMapping
from kube import KubernetesApi
from models import (
    AcceleratorFamily,
    ActionStatus,
    AlertKind,
    CapacityPlan,
    CapacityTier,
    PoolKind,
    PoolSpec,
    Resize,
    Severity,
)
from models.clock import SimulatedClock
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

CLUSTER = "projects/test-project/locations/us-central1/clusters/ml"
T0 = datetime(2024, 5, 1, tzinfo=UTC)
LEAD = timedelta(minutes=10)
POOL = PoolSpec("gpu", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 8, 24.0, LEAD,
                ("a",))  # fmt: skip
SPECS = {"gpu": POOL}


def _actuator(gke_api: FakeGkeApi, clock: SimulatedClock) -> GkeNodePoolActuator:
    clients = google_clients(gke_api.url)
    return GkeNodePoolActuator(
        clients.gke, clients.migs, CLUSTER, [NodePoolMapping(pool="gpu", node_pool="a100")], clock
    )


def _scale_up(now: datetime, from_units: int, to_units: int) -> CapacityPlan:
    return CapacityPlan(now, (Resize("gpu", from_units, to_units, "32 chips queued", f"gpu@{now.isoformat()}"),))


def test_a_scale_up_refused_while_the_pools_nodes_upgrade_is_alerted_after_the_lead_time_and_backs_off(
    gke_api: FakeGkeApi,
) -> None:
    gke_api.add_pool("a100", nodes=2)
    upgrade = gke_api.upgrade_nodes("a100")  # the pool's changes are held until the upgrade of its nodes ends
    clock = SimulatedClock(T0)
    actuator = _actuator(gke_api, clock)
    memory = PlannerMemory()
    for minute in range(10):  # within the lead time: retried every tick, no alert yet
        now = T0 + timedelta(minutes=minute)
        done = execute(_scale_up(now, 2, 6), actuator, SPECS, memory, now)
        memory = done.memory
        assert [r.status for r in done.results] == [ActionStatus.FAILED]
        assert done.alerts == ()
        assert memory.failing_since == {"gpu": T0}
        assert not memory.in_backoff("gpu", now)

    now = T0 + LEAD
    done = execute(_scale_up(now, 2, 6), actuator, SPECS, memory, now)
    (alert,) = done.alerts
    assert (alert.kind, alert.severity, alert.subject) == (AlertKind.ACTUATOR_FAILURE, Severity.WARNING, "gpu")
    assert f"operation {upgrade} is still running on this pool" in alert.summary
    assert "kept failing for 10m" in alert.summary and "backing off 10m" in alert.summary
    assert alert.details["failing_since"] == T0.isoformat()
    assert alert.details["failing_for"] == "10m"
    assert done.memory.in_backoff("gpu", now) and not done.memory.in_backoff("gpu", now + LEAD)
    # The count survives a restart or a change of leader: it is saved with the rest of the planner memory.
    memory = decode(encode(done.memory, now, "leadtime-0"))
    assert memory.failing_since == {"gpu": T0}

    gke_api.finish_operations()  # the upgrade ends; when the back-off ends the scale-up goes through
    now += LEAD
    done = execute(_scale_up(now, 2, 6), actuator, SPECS, memory, now)
    assert [r.status for r in done.results] == [ActionStatus.STARTED]
    assert done.alerts == ()
    assert done.memory.failing_since == {}


def test_a_refusal_shorter_than_the_lead_time_raises_nothing_and_is_forgotten_once_a_change_goes_through(
    gke_api: FakeGkeApi,
) -> None:
    gke_api.add_pool("a100", nodes=2)
    gke_api.upgrade_nodes("a100")
    clock = SimulatedClock(T0)
    actuator = _actuator(gke_api, clock)
    first = execute(_scale_up(T0, 2, 3), actuator, SPECS, PlannerMemory(), T0)
    assert first.memory.failing_since == {"gpu": T0}
    gke_api.finish_operations()
    later = T0 + timedelta(minutes=9)
    second = execute(_scale_up(later, 2, 3), actuator, SPECS, first.memory, later)
    assert [r.status for r in second.results] == [ActionStatus.STARTED]
    assert (first.alerts, second.alerts, second.memory.failing_since) == ((), (), {})
    gke_api.advance()  # the node arrives
    gke_api.upgrade_nodes("a100")  # a refusal long after: counted from itself, not from the first one
    latest = T0 + timedelta(hours=2)
    third = execute(_scale_up(latest, 3, 4), actuator, SPECS, second.memory, latest)
    assert (third.alerts, third.memory.failing_since) == ((), {"gpu": latest})


def test_a_drain_blocked_past_the_drain_timeout_is_alerted(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """A disruption budget keeps the node's pods for the whole drain timeout: the drain is given up (the node
    uncordoned), the release failed since the drain started, longer than the pool's lead time."""
    gke_api.add_pool("a100", nodes=3)
    nodes = [i.name for m in gke_api.pools["a100"].migs for i in m.instances]
    for name in nodes:
        kube_api.put("nodes", objs.node(name, "a100"))
        kube_api.put("pods", objs.pod(f"web-{name}", name, labels={"app": "web"}, owner_kind="ReplicaSet"))
    kube_api.put("poddisruptionbudgets", objs.pdb("web", {"app": "web"}, min_available=3), group="policy")
    clock = SimulatedClock(T0)
    kube_api.clock = clock.now
    actuator = _actuator(gke_api, clock)
    drainer = KubernetesNodeDrainer(KubernetesApi(kube_client), clock, {"gpu": "a100"}, actuator, timedelta(minutes=15))
    drains = NodeDrains({"gpu": drainer}, timedelta(0))
    drains.observe({s.pool_id: s for s in actuator.list_pools()}, T0)
    release = CapacityPlan(T0, (Resize("gpu", 3, 2, "idle", "gpu@release"),))
    done = execute(release, actuator, SPECS, PlannerMemory(), T0, drains)
    assert [r.status for r in done.results] == [ActionStatus.STARTED]
    memory = done.memory
    for minute in range(1, 16):
        clock.advance(timedelta(minutes=1))
        done = execute(CapacityPlan(clock.now()), actuator, SPECS, memory, clock.now(), drains)
        memory = done.memory
        if minute < 15:
            assert [r.status for r in done.results] == [ActionStatus.STARTED]
            assert done.alerts == ()
    assert [r.status for r in done.results] == [ActionStatus.FAILED]
    (alert,) = done.alerts
    assert (alert.kind, alert.severity, alert.subject) == (AlertKind.ACTUATOR_FAILURE, Severity.WARNING, "gpu")
    assert "disruption budgets still block" in alert.summary and "kept failing for 15m" in alert.summary
    assert "backing off" not in alert.summary  # a release: nothing for another pool to take
    assert memory.failing_since == {"gpu": T0} and not memory.in_backoff("gpu", clock.now())

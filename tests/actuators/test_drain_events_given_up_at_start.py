"""A drain its first step gives up, after the node was cordoned, is told as what happened: the node is uncordoned,
no drain is under way and the pool did not shrink, so the Events say ``DrainRejected`` (with the reason and the
node uncordoned) and the pool's ``ScaleDownRejected``, never ``Cordoned`` / ``DrainStarted`` / ``ScaleDown``. The
reasons: a pod that must not be disrupted, a pod given work since the idle check, and a pod selected by two
PodDisruptionBudgets (the Eviction API's 500), whose drain names the pods it evicted before giving up. The agent's
drains on the local Kubernetes API with the real kubernetes client, removing through the local GKE API, and the
daemon's recorder writing the Events there; a drain that does begin is still told started."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from kubernetes import client as k8s

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.kubernetes_drain import KubernetesNodeDrainer
from config.cloud import NodePoolMapping
from kube import KubernetesApi
from models import PoolState, Resize
from models.clock import SimulatedClock
from tests.daemon.decision_event_rig import STATE, _recorder, _release_events, _state_config_map
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

CLUSTER = "projects/test-project/locations/us-central1/clusters/ml"
T0 = datetime(2024, 5, 1, tzinfo=UTC)


def _no_disruption(kube: FakeKubeApi, node: str) -> None:
    kube.put(
        "pods", objs.pod("notebook", node, annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"})
    )


def _given_work(kube: FakeKubeApi, node: str) -> None:
    kube.put("pods", objs.pod("train-0", node, accelerators=1, owner_kind="Job"))


def _two_budgets(kube: FakeKubeApi, node: str) -> None:
    kube.put("pods", objs.pod("zz-api", node, labels={"app": "api"}, owner_kind="ReplicaSet"))
    kube.put("poddisruptionbudgets", objs.pdb("api-a", {"app": "api"}, max_unavailable=1), group="policy")
    kube.put("poddisruptionbudgets", objs.pdb("api-b", {"app": "api"}, max_unavailable=1), group="policy")


def _tick_events(
    kube: FakeKubeApi, client: k8s.ApiClient, gke: FakeGkeApi, after_idle_check: Callable[[FakeKubeApi, str], None]
) -> tuple[str, list[k8s.CoreV1Event]]:
    """Six idle nodes of node pool a100 (more than a survey lists one by one: the tick shares one list of pods),
    each with a web pod (a ReplicaSet's); once all were idle for the window, ``after_idle_check`` changes the first
    before the plan's release drains it. The node and the Events the daemon's recorder wrote for that tick."""
    gke.add_pool("a100", nodes=6)
    nodes = [i.name for m in gke.pools["a100"].migs for i in m.instances]
    for name in nodes:
        kube.put("nodes", objs.node(name, "a100"))
        kube.put("pods", objs.pod(f"web-{name}", name, labels={"app": "web"}, owner_kind="ReplicaSet"))
    _state_config_map(kube)
    clock = SimulatedClock(T0)
    kube.clock = clock.now
    clients = google_clients(gke.url)
    remover = GkeNodePoolActuator(
        clients.gke, clients.migs, CLUSTER, [NodePoolMapping(pool="a", node_pool="a100")], clock
    )
    drainer = KubernetesNodeDrainer(KubernetesApi(client), clock, {"a": "a100"}, remover)
    victim = nodes[0]
    resize = Resize("a", 6, 5, "1 unit idle for 10m", "a@t->5")
    state = PoolState("a", T0, 6, 6)
    events = _release_events(drainer, state, clock, victim, resize, lambda: after_idle_check(kube, victim))
    assert _recorder(client, timeout=None).record(clock.now(), events) == len(events)
    return victim, list(k8s.CoreV1Api(client).list_event_for_all_namespaces().items)


@pytest.mark.parametrize(
    ("after_idle_check", "why"),
    [
        (_no_disruption, "pods that must not be disrupted: default/notebook ("),
        (_given_work, "no longer idle: default/train-0 started on it; "),
        (
            _two_budgets,
            "pod ('default', 'zz-api') is selected by more than one PodDisruptionBudget, so the Eviction API refuses "
            "it; [('default', 'web-{node}')] evicted before; ",
        ),
    ],
    ids=["must-not-disrupt", "no-longer-idle", "two-budgets"],
)
def test_a_drain_given_up_at_its_first_step_is_told_rejected_not_started(
    kube_api: FakeKubeApi,
    kube_client: k8s.ApiClient,
    gke_api: FakeGkeApi,
    after_idle_check: Callable[[FakeKubeApi, str], None],
    why: str,
) -> None:
    node, events = _tick_events(kube_api, kube_client, gke_api, after_idle_check)

    told = sorted((e.involved_object.kind, e.involved_object.name, e.reason, e.type) for e in events)
    assert told == [("ConfigMap", STATE, "ScaleDownRejected", "Warning"), ("Node", node, "DrainRejected", "Warning")]
    (rejected,) = [e for e in events if e.reason == "DrainRejected"]
    assert rejected.message.startswith(f"pool a: {why.format(node=node)}")
    assert rejected.message.endswith(f"node {node} uncordoned")
    (pool,) = [e for e in events if e.reason == "ScaleDownRejected"]
    assert pool.message == f"pool a: did not scale down from 6 to 5 units: {rejected.message.removeprefix('pool a: ')}"
    assert gke_api.calls("POST", "deleteInstances") == 0
    stored = kube_api.get("nodes", node)
    assert stored is not None and not stored["spec"].get("unschedulable")  # uncordoned


def test_a_drain_that_begins_is_still_told_cordoned_and_started(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    node, events = _tick_events(kube_api, kube_client, gke_api, lambda kube, node: None)

    told = sorted((e.involved_object.name, e.reason) for e in events)
    assert told == sorted([(STATE, "ScaleDown"), (node, "Cordoned"), (node, "DrainStarted"), (node, "DrainWaiting")])

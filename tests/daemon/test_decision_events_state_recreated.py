"""Pool decisions follow the state ConfigMap when it is deleted and created again: the README's way to clear the
planner memory is to delete it, the leader's next save creates it with a new uid, and ``kubectl describe`` finds a
ConfigMap's Events by that uid. The store, the keeper and the recorder are the daemon's own, in the order a tick
runs them (load, plan, save, record), with the real kubernetes client against the fake API server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kubernetes import client as k8s

from agent.decision_events import DecisionEvent, SubjectKind
from agent.planning import PlannerMemory
from agent.state import MemoryKeeper
from agent.state.configmap import KubernetesStateStore
from kube import KubernetesApi
from tests.daemon.decision_event_rig import NAMESPACE, STATE, _recorder
from tests.fakes.kube_api import FakeKubeApi

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _scaled(units: int) -> DecisionEvent:
    return DecisionEvent(
        SubjectKind.POOL, "a100", "a100", "ScaleUp", f"pool a100: scale up to {units} units", False, {}
    )


def _described(kube_api: FakeKubeApi) -> list[str]:
    """The messages ``kubectl describe configmap leadtime-state`` lists: Events whose involved object is the
    ConfigMap as it exists now, by uid."""
    config_map = kube_api.get("configmaps", STATE, NAMESPACE)
    assert config_map is not None
    uid = config_map["metadata"]["uid"]
    return sorted(
        e["message"] for e in kube_api.list("events", namespace=NAMESPACE) if e["involvedObject"]["uid"] == uid
    )


def test_decisions_after_the_state_config_map_is_deleted_name_the_one_created_anew(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient
) -> None:
    api = KubernetesApi(kube_client, timedelta(seconds=2))
    keeper = MemoryKeeper(KubernetesStateStore(api.config_maps, name=STATE, namespace=NAMESPACE, identity="a"))
    recorder = _recorder(kube_client)

    def tick(now: datetime, memory: PlannerMemory, decision: DecisionEvent) -> None:
        keeper.before_tick(memory)
        assert keeper.after_tick(memory, now) is None
        assert recorder.record(now, [decision]) == 1

    tick(T0, PlannerMemory(blocked={"a100": "403 permission denied"}), _scaled(3))
    assert _described(kube_api) == ["pool a100: scale up to 3 units"]

    kube_api.delete("configmaps", STATE, NAMESPACE)  # the operator clears the planner memory
    later = T0 + timedelta(minutes=1)
    tick(later, PlannerMemory(backoff_until={"a100": later + timedelta(hours=1)}), _scaled(5))

    assert _described(kube_api) == ["pool a100: scale up to 5 units"]  # the new ConfigMap shows the new decision

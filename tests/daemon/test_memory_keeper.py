"""MemoryKeeper over the ConfigMap store (real kubernetes client, fake API server): what an operator changes in
the stored planner memory while a leader runs is heard at the leader's next tick, never written over; what a new
leader learns before it can first read the store is kept once it can. Three-way per pool: a value only one side
changed comes from that side; where both changed, the leader's block stays and the later time wins."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from kubernetes import client as k8s

from agent.planning import PlannerMemory
from agent.state import InMemoryStateStore, MemoryKeeper
from agent.state.configmap import KEY, KubernetesStateStore
from agent.state.keeper import merge
from kube import ConfigMaps
from models import StateUnavailable
from tests.fakes.kube_api import FakeKubeApi

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
NAME, NAMESPACE = "leadtime-state", "leadtime"


def _keeper(kube_api: FakeKubeApi, api_client_for: Callable[[str], k8s.ApiClient]) -> MemoryKeeper:
    store = KubernetesStateStore(
        ConfigMaps(api_client_for(kube_api.url), timedelta(seconds=0.3)), name=NAME, namespace=NAMESPACE, identity="a"
    )
    return MemoryKeeper(store)


def _stored(kube_api: FakeKubeApi) -> dict[str, object] | None:
    found = kube_api.get("configmaps", NAME, NAMESPACE)
    return None if found is None else dict(json.loads(found["data"][KEY]))


def _leading_with_a_block(keeper: MemoryKeeper) -> PlannerMemory:
    memory, error = keeper.before_tick(PlannerMemory())
    assert error is None
    memory = memory.block("tpu-vm", "403 Forbidden").back_off("v5e", T0 + timedelta(minutes=10))
    assert keeper.after_tick(memory, T0) is None
    return memory


def test_a_block_lifted_in_the_configmap_is_lifted_at_the_next_tick_and_stays_lifted(
    kube_api: FakeKubeApi, api_client_for: Callable[[str], k8s.ApiClient]
) -> None:
    keeper = _keeper(kube_api, api_client_for)
    memory = _leading_with_a_block(keeper)
    found = kube_api.get("configmaps", NAME, NAMESPACE)
    assert found is not None
    document = json.loads(found["data"][KEY])
    document["blocked"] = {}  # the operator fixed the permission and lifts the block, as the operations guide says
    kube_api.put("configmaps", {**found, "data": {KEY: json.dumps(document)}})

    memory, error = keeper.before_tick(memory)
    assert error is None
    assert memory.blocked == {}
    assert memory.in_backoff("v5e", T0)  # what the operator left alone stays
    memory = memory.changed("a100", T0 + timedelta(minutes=1), +1)  # the leader learns something: it saves
    assert keeper.after_tick(memory, T0 + timedelta(minutes=1)) is None
    stored = _stored(kube_api)
    assert stored is not None and stored["blocked"] == {}


def test_deleting_the_configmap_clears_what_the_leader_had_saved(
    kube_api: FakeKubeApi, api_client_for: Callable[[str], k8s.ApiClient]
) -> None:
    keeper = _keeper(kube_api, api_client_for)
    memory = _leading_with_a_block(keeper)
    kube_api.delete("configmaps", NAME, NAMESPACE)
    memory, error = keeper.before_tick(memory)
    assert error is None
    assert memory == PlannerMemory()


def test_what_a_new_leader_learns_before_its_first_read_is_kept_with_what_its_predecessor_saved() -> None:
    class FailsOnce(InMemoryStateStore):
        failures = 1

        def load(self) -> PlannerMemory | None:
            if self.failures:
                self.failures -= 1
                raise StateUnavailable("get answered 500")
            return super().load()

    previous = InMemoryStateStore("old-leader")
    previous.save(PlannerMemory().block("tpu-vm", "403 Forbidden"), T0 - timedelta(hours=1))
    keeper = MemoryKeeper(FailsOnce("new-leader", _shared=previous._shared))
    memory, error = keeper.before_tick(PlannerMemory())  # its first tick: the store does not answer
    assert error is not None
    memory = memory.back_off("v5e", T0 + timedelta(minutes=10))  # that tick met a stockout
    memory, error = keeper.before_tick(memory)  # the next tick reads the store
    assert error is None
    assert memory.in_backoff("v5e", T0 + timedelta(minutes=1))
    assert memory.blocked == {"tpu-vm": "403 Forbidden"}


def test_where_both_sides_changed_a_pool_the_block_stays_and_the_later_time_wins() -> None:
    base = PlannerMemory().back_off("v5e", T0)
    ours = base.back_off("v5e", T0 + timedelta(minutes=20)).block("a100", "403 Forbidden")
    theirs = base.back_off("v5e", T0 + timedelta(minutes=10)).block("a100", "lifted and blocked again")
    merged = merge(base, ours, theirs)
    assert merged.backoff_until == {"v5e": T0 + timedelta(minutes=20)}
    assert merged.blocked == {"a100": "403 Forbidden"}
    assert merge(base, base, PlannerMemory()) == PlannerMemory()  # cleared by them, untouched by us: cleared

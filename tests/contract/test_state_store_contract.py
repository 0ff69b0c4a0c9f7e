"""The StateStore contract, on InMemoryStateStore (simulations, rehearsals) and on KubernetesStateStore (a ConfigMap
on the fake Kubernetes API, with the real client): a saved memory is read back by another replica, a write over an
unread write is a conflict that changes nothing and is cleared by reading, an unreadable document counts as
nothing saved and is replaced by the next save."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Protocol

import pytest
from kubernetes import client as k8s

from agent.planning import PlannerMemory
from agent.state import InMemoryStateStore, StateConflict, StateStore
from agent.state.configmap import KEY, KubernetesStateStore
from config.daemon import KubernetesApiSettings
from kube import ConfigMaps, kubernetes_api_client
from models import StateDocumentTooNew
from tests.fakes.kube_api import FakeKubeApi

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
MEMORY = PlannerMemory().back_off("v5e", T0 + timedelta(minutes=10)).block("tpu-vm", "403 Forbidden")


class Harness(Protocol):
    def replica(self, identity: str) -> StateStore:
        """A replica's store; all replicas of one harness share one document."""
        ...

    def overwrite(self, text: str) -> None:
        """Someone else writes ``text`` as the stored document."""
        ...


class MemoryHarness:
    def __init__(self) -> None:
        self.first = InMemoryStateStore("leadtime-a")

    def replica(self, identity: str) -> StateStore:
        return self.first if identity == "leadtime-a" else self.first.replica(identity)

    def overwrite(self, text: str) -> None:
        self.first.document = text


class ConfigMapHarness:
    def __init__(self, kube_api: FakeKubeApi, api_client: k8s.ApiClient) -> None:
        self.kube_api, self.api_client = kube_api, api_client

    def replica(self, identity: str) -> StateStore:
        return KubernetesStateStore(
            ConfigMaps(self.api_client, timedelta(seconds=2)),
            name="leadtime-state",
            namespace="leadtime",
            identity=identity,
        )

    def overwrite(self, text: str) -> None:
        saved = self.kube_api.get("configmaps", "leadtime-state", "leadtime")
        assert saved is not None
        self.kube_api.put("configmaps", {**saved, "data": {KEY: text}})


@pytest.fixture(params=["memory", "configmap"])
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    if request.param == "memory":
        yield MemoryHarness()
        return
    kube_api = FakeKubeApi().start()
    api_client = kubernetes_api_client(KubernetesApiSettings(api_url=kube_api.url))
    try:
        yield ConfigMapHarness(kube_api, api_client)
    finally:
        api_client.close()
        kube_api.stop()


def test_nothing_saved_loads_as_none_and_a_save_is_read_back_by_another_replica(harness: Harness) -> None:
    first, second = harness.replica("leadtime-a"), harness.replica("leadtime-b")
    assert first.load() is None
    first.save(MEMORY, T0)
    assert second.load() == MEMORY
    changed = MEMORY.changed("a100", T0, +1)
    first.save(changed, T0 + timedelta(minutes=1))
    assert second.load() == changed  # the last save replaces the document


def test_a_write_over_an_unread_write_is_a_conflict_that_changes_nothing(harness: Harness) -> None:
    leader, other = harness.replica("leadtime-a"), harness.replica("leadtime-b")
    leader.save(MEMORY, T0)
    other.load()
    leader.save(MEMORY.changed("a100", T0, +1), T0)
    with pytest.raises(StateConflict):
        other.save(PlannerMemory(), T0)
    assert leader.load() == MEMORY.changed("a100", T0, +1)
    other.save(PlannerMemory(), T0 + timedelta(minutes=1))  # a conflict makes it read first: this one goes through
    assert leader.load() == PlannerMemory()


def test_an_unreadable_document_counts_as_nothing_saved_and_the_next_save_replaces_it(harness: Harness) -> None:
    store = harness.replica("leadtime-a")
    store.save(MEMORY, T0)
    harness.overwrite('{"version": 1, "blocked": 3}')
    assert store.load() is None
    store.save(MEMORY, T0 + timedelta(minutes=1))
    assert harness.replica("leadtime-b").load() == MEMORY


def test_a_document_of_a_newer_release_is_unavailable_and_left_as_it_is(harness: Harness) -> None:
    store = harness.replica("leadtime-a")
    store.save(MEMORY, T0)
    harness.overwrite('{"version": 99}')
    with pytest.raises(StateDocumentTooNew, match="newer release"):
        store.load()
    with pytest.raises(StateDocumentTooNew):  # another replica finds it as it was
        harness.replica("leadtime-b").load()


def test_a_blind_save_by_a_new_replica_is_not_a_conflict(harness: Harness) -> None:
    harness.replica("leadtime-a").save(MEMORY, T0)
    newcomer = harness.replica("leadtime-b")
    newcomer.save(PlannerMemory(), T0 + timedelta(minutes=1))  # it never read: it reads, then writes
    assert harness.replica("leadtime-c").load() == PlannerMemory()

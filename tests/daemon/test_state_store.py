"""KubernetesStateStore with the real kubernetes client against the fake API server: the document round-trips
through a ConfigMap, writes are optimistic on resourceVersion (409 when someone else wrote), and API errors or a
cut connection come back as StateUnavailable, never as a vendor exception."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client as k8s

from agent.planning import PlannerMemory
from agent.state import StateConflict, StateUnavailable
from agent.state.configmap import KEY, KubernetesStateStore
from kube import ConfigMaps
from tests.daemon.links import CuttableLink
from tests.fakes.kube_api import FakeKubeApi

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
MEMORY = PlannerMemory().back_off("v5e", T0 + timedelta(minutes=10)).block("tpu-vm", "403 Forbidden")


def _store(api_client: k8s.ApiClient, identity: str = "leadtime-a") -> KubernetesStateStore:
    return KubernetesStateStore(
        ConfigMaps(api_client, timedelta(seconds=0.3)), name="leadtime-state", namespace="leadtime", identity=identity
    )


def test_a_saved_memory_is_read_back_by_another_replica(
    kube_api: FakeKubeApi, api_client_for: Callable[[str], k8s.ApiClient]
) -> None:
    first, second = _store(api_client_for(kube_api.url)), _store(api_client_for(kube_api.url), "leadtime-b")
    assert first.load() is None
    first.save(MEMORY, T0)
    assert second.load() == MEMORY
    saved = kube_api.get("configmaps", "leadtime-state", "leadtime")
    assert saved is not None
    assert json.loads(saved["data"][KEY])["saved_by"] == "leadtime-a"
    # one read when nothing was there, one create, then updates carry the version read or written last
    first.save(MEMORY.changed("a100", T0, +1), T0)
    with pytest.raises(StateConflict):  # it read before that write, so its version is stale: refused
        second.save(MEMORY, T0 + timedelta(minutes=1))
    assert [(r.verb, r.name) for r in kube_api.requests if r.resource == "configmaps"] == [
        ("get", "leadtime-state"),
        ("create", ""),
        ("get", "leadtime-state"),
        ("update", "leadtime-state"),
        ("update", "leadtime-state"),
    ]


def test_a_stale_version_is_a_conflict_and_the_next_save_reads_first(
    kube_api: FakeKubeApi, api_client_for: Callable[[str], k8s.ApiClient]
) -> None:
    leader, other = _store(api_client_for(kube_api.url)), _store(api_client_for(kube_api.url), "leadtime-b")
    leader.save(MEMORY, T0)
    other.load()
    leader.save(MEMORY.changed("a100", T0, +1), T0)
    with pytest.raises(StateConflict, match="409"):
        other.save(PlannerMemory(), T0)
    assert leader.load() == MEMORY.changed("a100", T0, +1)  # the refused write changed nothing
    other.save(PlannerMemory(), T0 + timedelta(minutes=1))
    assert leader.load() == PlannerMemory()


def test_api_errors_and_a_cut_connection_are_state_unavailable(
    kube_api: FakeKubeApi, link_to: Callable[[], CuttableLink], api_client_for: Callable[[str], k8s.ApiClient]
) -> None:
    link = link_to()
    store = _store(api_client_for(link.url))
    kube_api.fail_next(1, 500, verb="get", resource="configmaps")
    with pytest.raises(StateUnavailable, match="get answered 500"):
        store.load()
    store.save(MEMORY, T0)
    kube_api.fail_next(1, 500, verb="update", resource="configmaps")
    with pytest.raises(StateUnavailable, match="update answered 500"):
        store.save(PlannerMemory(), T0)
    link.cut()
    with pytest.raises(StateUnavailable, match="unreachable"):
        store.save(PlannerMemory(), T0)
    with pytest.raises(StateUnavailable, match="unreachable"):
        store.load()
    link.restore()
    store.save(PlannerMemory(), T0)
    assert store.load() == PlannerMemory()


def test_an_unreadable_document_is_ignored_and_replaced_by_the_next_save(
    kube_api: FakeKubeApi, api_client_for: Callable[[str], k8s.ApiClient]
) -> None:
    kube_api.put(
        "configmaps",
        {
            "metadata": {"name": "leadtime-state", "namespace": "leadtime"},
            "data": {KEY: '{"version": 1, "blocked": 3}'},
        },
    )
    store = _store(api_client_for(kube_api.url))
    assert store.load() is None
    store.save(MEMORY, T0)
    assert store.load() == MEMORY


def test_a_document_of_a_newer_release_is_unavailable_not_ignored(
    kube_api: FakeKubeApi, api_client_for: Callable[[str], k8s.ApiClient]
) -> None:
    kube_api.put(
        "configmaps",
        {"metadata": {"name": "leadtime-state", "namespace": "leadtime"}, "data": {KEY: '{"version": 7}'}},
    )
    with pytest.raises(StateUnavailable, match="newer release"):
        _store(api_client_for(kube_api.url)).load()

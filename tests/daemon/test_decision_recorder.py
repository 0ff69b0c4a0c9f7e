"""KubernetesDecisionRecorder with the real kubernetes client against the fake API server: where each Event goes,
repeats patched into one Event with a count (and created afresh when it expired), and every API failure (403,
409, 429, a hung connection) logged and dropped without raising, the rest of the tick's Events bounded."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client as k8s

from agent.decision_events import DecisionEvent, SubjectKind
from tests.daemon.decision_event_rig import STATE, _recorder, _state_config_map
from tests.daemon.links import CuttableLink
from tests.fakes.kube_api import FakeKubeApi

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
HELD = DecisionEvent(SubjectKind.POOL, "v5e", "v5e", "HeldMissingData", "pool v5e: held: no demand", True)
BLOCKED = DecisionEvent(SubjectKind.NODE, "node-1", "a100", "DrainBlocked", "pool a100: waiting", True)
SCALED = DecisionEvent(
    SubjectKind.POOL, "a100", "a100", "ScaleUp", "pool a100: scale up from 1 to 3 units", False, {"to_units": "3"}
)


@pytest.fixture
def state_uid(kube_api: FakeKubeApi) -> str:
    made = _state_config_map(kube_api)
    return str(made["metadata"]["uid"])


def test_node_events_go_to_the_node_and_pool_events_to_the_state_config_map(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, state_uid: str
) -> None:
    assert _recorder(kube_client).record(T0, [BLOCKED, SCALED]) == 2
    node_event, pool_event = (
        kube_api.list("events", namespace="default")[0],
        kube_api.list("events", namespace="leadtime")[0],
    )
    assert node_event["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": "node-1"}
    assert (node_event["reason"], node_event["type"], node_event["count"]) == ("DrainBlocked", "Warning", 1)
    assert pool_event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": STATE,
        "namespace": "leadtime",
        "uid": state_uid,
    }
    assert pool_event["metadata"]["annotations"] == {"leadtime.io/pool": "a100", "leadtime.io/to-units": "3"}
    assert pool_event["source"] == {"component": "leadtime", "host": "leadtime-0"}


def test_a_repeated_decision_is_one_event_whose_count_is_patched(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, state_uid: str
) -> None:
    recorder = _recorder(kube_client)
    for minute in range(3):
        recorder.record(T0 + timedelta(minutes=minute), [HELD])
    (event,) = k8s.CoreV1Api(kube_client).list_namespaced_event("leadtime").items
    assert event.count == 3
    assert (event.first_timestamp, event.last_timestamp) == (T0, T0 + timedelta(minutes=2))
    assert (kube_api.calls("create", "events"), kube_api.calls("patch", "events")) == (1, 2)
    other = DecisionEvent(SubjectKind.POOL, "v5e", "v5e", "HeldMissingData", "pool v5e: held: other reason", True)
    recorder.record(T0 + timedelta(minutes=3), [other])  # another message: another Event
    assert sorted(e["count"] for e in kube_api.list("events", namespace="leadtime")) == [1, 3]


def test_an_event_that_expired_is_created_again(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, state_uid: str
) -> None:
    recorder = _recorder(kube_client)
    recorder.record(T0, [HELD])
    (first,) = kube_api.list("events", namespace="leadtime")
    kube_api.delete("events", first["metadata"]["name"], "leadtime")  # the API server's TTL removed it
    assert recorder.record(T0 + timedelta(hours=2), [HELD]) == 1
    (again,) = kube_api.list("events", namespace="leadtime")
    assert again["count"] == 1 and again["metadata"]["name"] != first["metadata"]["name"]
    assert recorder.record(T0 + timedelta(hours=2, minutes=1), [HELD]) == 1
    assert kube_api.list("events", namespace="leadtime")[0]["count"] == 2


@pytest.mark.parametrize("status", [403, 409, 422])
def test_a_refused_event_is_dropped_and_the_next_one_written(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, state_uid: str, status: int
) -> None:
    kube_api.fail_next(1, status, verb="create", resource="events")
    assert _recorder(kube_client).record(T0, [HELD, BLOCKED]) == 1
    assert [e["reason"] for e in kube_api.list("events")] == ["DrainBlocked"]


@pytest.mark.parametrize("status", [429, 500, 503])
def test_a_throttled_or_failing_api_drops_the_rest_of_the_ticks_events(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, state_uid: str, status: int
) -> None:
    recorder = _recorder(kube_client)
    kube_api.fail_next(1, status, verb="create", resource="events")
    assert recorder.record(T0, [HELD, BLOCKED, SCALED]) == 0
    assert kube_api.calls("create", "events") == 1  # the two after the refusal were not tried
    assert recorder.record(T0 + timedelta(minutes=1), [HELD, BLOCKED]) == 2  # the next tick writes again


def test_a_hung_api_costs_one_request_timeout_and_drops_the_ticks_events(
    kube_api: FakeKubeApi,
    link_to: Callable[[], CuttableLink],
    api_client_for: Callable[[str], k8s.ApiClient],
    state_uid: str,
) -> None:
    link = link_to()
    recorder = _recorder(api_client_for(link.url), timeout=timedelta(seconds=0.2))
    link.hang()
    assert recorder.record(T0, [BLOCKED, SCALED, HELD]) == 0  # no exception reaches the tick
    link.restore()
    assert recorder.record(T0 + timedelta(minutes=1), [BLOCKED]) == 1
    assert [e["reason"] for e in kube_api.list("events")] == ["DrainBlocked"]


def test_pool_events_are_written_before_the_state_config_map_exists_and_carry_its_uid_after(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient
) -> None:
    recorder = _recorder(kube_client)
    assert recorder.record(T0, [SCALED]) == 1
    assert "uid" not in kube_api.list("events", namespace="leadtime")[0]["involvedObject"]
    made = _state_config_map(kube_api)
    recorder.record(T0 + timedelta(minutes=1), [HELD])
    held = next(e for e in kube_api.list("events", namespace="leadtime") if e["reason"] == "HeldMissingData")
    assert held["involvedObject"]["uid"] == made["metadata"]["uid"]


def test_no_more_than_the_limit_per_tick(kube_api: FakeKubeApi, kube_client: k8s.ApiClient, state_uid: str) -> None:
    recorder = _recorder(kube_client, max_per_tick=2)
    nodes = [DecisionEvent(SubjectKind.NODE, f"node-{i}", "a100", "Cordoned", "cordoned") for i in range(4)]
    assert recorder.record(T0, nodes) == 2
    assert [e["involvedObject"]["name"] for e in kube_api.list("events")] == ["node-0", "node-1"]


def test_a_slice_drain_event_goes_to_the_state_config_map_naming_the_slice(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, state_uid: str
) -> None:
    """The unit of a slice group is a TPU slice, whose name is no Node's; the same event of a node pool's pool still
    goes to its Node."""
    recorder = _recorder(kube_client, timeout=None, slice_pools=["v5e"])
    finished = DecisionEvent(SubjectKind.NODE, "v5e-3", "v5e", "DrainFinished", "pool v5e: slice v5e-3 drained")
    dry = DecisionEvent(SubjectKind.NODE, "v5e-2", "v5e", "RecommendDrain", "dry-run: would cordon and drain it")
    assert recorder.record(T0, [finished, dry, BLOCKED]) == 3
    on_state = {e["reason"]: e for e in kube_api.list("events", namespace="leadtime")}
    assert {
        r: (e["involvedObject"]["kind"], e["involvedObject"]["uid"], e["message"]) for r, e in on_state.items()
    } == {
        "DrainFinished": ("ConfigMap", state_uid, "slice v5e-3: pool v5e: slice v5e-3 drained"),
        "RecommendDrain": ("ConfigMap", state_uid, "dry-run: slice v5e-2: would cordon and drain it"),
    }
    assert on_state["DrainFinished"]["metadata"]["annotations"] == {
        "leadtime.io/pool": "v5e",
        "leadtime.io/slice": "v5e-3",
    }
    (on_node,) = kube_api.list("events", namespace="default")
    assert on_node["involvedObject"]["name"] == "node-1"

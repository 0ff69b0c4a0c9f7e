"""A drain taken over (after a restart, or by a new leader) counts its timeout from the drain's first step, as its
nodes' marks say, not from its take-over.

A disruption budget that allows no eviction holds a drain up: it is given up at ``cloud.drain_timeout`` (15 minutes),
its node uncordoned. Taken over 8 minutes in (its first step there a minute later), the drain went on until 15
minutes after that step (24 in all), the blocked node paid for 9 minutes more. The drainer now marks the time the
drain's timeout counts from (``leadtime.io/drain-started-at``, with the drain's key) when it cordons the node at the
drain's first step; a drainer taking the drain over reads it there. A drain an earlier release marked without it
counts from its take-over, as before, and is marked so from then on: a later take-over counts from the first one.
Real drainer, GKE actuator and clients, on the fake GKE and Kubernetes APIs."""

from __future__ import annotations

from datetime import timedelta

from kubernetes import client as k8s

from actuators.drain_mark_names import STARTED_AT_ANNOTATION
from agent.drains import NodeDrains
from models import ActionResult, ActionStatus, Resize
from models.clock import SimulatedClock
from tests.actuators.test_drain_removal_under_way import MINUTE, START, _cordoned, _drains, _marked, _pool
from tests.fakes import kube_objects as objs
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi


def _blocked_drain(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi, clock: SimulatedClock
) -> str:
    """A drain started at ``START`` of a node whose web pod a disruption budget keeps from eviction; its node."""
    node = _pool(kube_api, gke_api, clock, move_bounds=False)[0]
    kube_api.put("pods", objs.pod("web", node, labels={"app": "web"}, owner_kind="ReplicaSet"))
    kube_api.put("poddisruptionbudgets", objs.pdb("web", {"app": "web"}, max_unavailable=0), group="policy")
    _, _, drains = _drains(kube_client, gke_api, clock, move_bounds=False)
    [started] = drains.scale_down(Resize("gpu", 3, 2, "idle", "release"), clock.now(), [node]).results
    assert started.status is ActionStatus.STARTED and "disruption budget" in started.detail, started
    return node


def _steps(drains: NodeDrains, clock: SimulatedClock, minutes: int) -> list[ActionResult]:
    """A tick's observation and steps a minute apart, until the drain is settled or ``minutes`` have passed."""
    results: list[ActionResult] = []
    for _ in range(minutes):
        clock.advance(MINUTE)
        drains.observe({}, clock.now())
        results += drains.continue_pending(clock.now()).results
        if results and results[-1].status is not ActionStatus.STARTED:
            break
    return results


def _started_mark(kube_api: FakeKubeApi, node: str) -> str | None:
    found = kube_api.get("nodes", node) or {}
    annotations: dict[str, str] = found.get("metadata", {}).get("annotations") or {}
    return annotations.get(STARTED_AT_ANNOTATION)


def test_a_drain_taken_over_is_given_up_at_the_timeout_counted_from_its_first_step(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(START)
    node = _blocked_drain(kube_api, kube_client, gke_api, clock)
    assert _started_mark(kube_api, node) == f"{START.isoformat()} release/drain/{node}"
    clock.advance(8 * MINUTE)

    _, _, taken_over = _drains(kube_client, gke_api, clock, move_bounds=False)  # a restart, or another leader
    results = _steps(taken_over, clock, 30)

    assert results[-1].status is ActionStatus.FAILED, results[-1]
    assert "disruption budgets still block" in results[-1].detail
    assert clock.now() - START == timedelta(minutes=15)  # was 24: 15 minutes after the take-over
    assert not _cordoned(kube_api, node) and not _marked(kube_api, node)
    assert _started_mark(kube_api, node) is None  # taken off with the other marks


def test_a_drain_marked_without_its_start_counts_from_its_first_take_over(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """An earlier release marks no start: the drain counts from its take-over, as before, and is marked so; a second
    take-over counts from the first."""
    clock = SimulatedClock(START)
    node = _blocked_drain(kube_api, kube_client, gke_api, clock)
    found = kube_api.get("nodes", node)
    assert found is not None
    del found["metadata"]["annotations"][STARTED_AT_ANNOTATION]  # as an earlier release marks it
    kube_api.put("nodes", found)
    clock.advance(8 * MINUTE)
    _, _, first = _drains(kube_client, gke_api, clock, move_bounds=False)
    assert _steps(first, clock, 1)[0].status is ActionStatus.STARTED
    taken_over_at = clock.now()
    assert _started_mark(kube_api, node) == f"{taken_over_at.isoformat()} release/drain/{node}"
    clock.advance(5 * MINUTE)

    _, _, second = _drains(kube_client, gke_api, clock, move_bounds=False)
    results = _steps(second, clock, 30)

    assert results[-1].status is ActionStatus.FAILED, results[-1]
    assert clock.now() - taken_over_at == timedelta(minutes=15)  # was 30: 15 minutes after the second take-over
    assert not _cordoned(kube_api, node)

"""A change whose write GKE accepted may be carried out whatever fails after it (``actuators.write_window.Writes``).

A ``move-bounds`` release sends one write, setAutoscaling, and then looks once at the operation it started. A look
refused (a read rate limit, 403, 404) raised an error saying nothing of the write: ``maybe_applied`` false, and for a
403 or 404 "nothing sent"; the executor counted the writes asked and needed two, so the release read as refused while
GKE shrank the pool to its new bounds. A TPU slice's delete and create looked at their operation the same way. A write
now counts as accepted once its call returned, and the error of a look after it says the change may be carried out;
a write refused itself (its own call answered 429) is not accepted, and its error keeps its own flag. A drain step that
failed on a read before asking any write sent nothing, whatever the read's error says.

The real adapters on the local GKE and Compute Engine server, and a real drain on the local Kubernetes API server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client as k8s

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.gke_tpu_slices import GkeTpuSliceActuator
from actuators.kubernetes_drain import KubernetesNodeDrainer
from actuators.write_window import writes_sent
from agent.budget_shed_claims import carried_out
from agent.drains import NodeDrains
from config.cloud import NodePoolMapping
from kube import KubernetesApi
from models import ActionStatus, Resize, TransientActuatorError
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER, POOL, SLICES
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

START = datetime(2024, 5, 1, tzinfo=UTC)
ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
BOUNDS = {"enabled": True, "totalMinNodeCount": 0, "totalMaxNodeCount": 12}
OP_READ = "/operations/"  # the look at one operation (the list of them is ".../operations")

# What a look at the operation may meet once the write went out.
LOOK_FAILURES = {
    "read rate limit": (429, "Quota exceeded for quota metric 'Read requests' and limit 'Read requests per minute'"),
    "permission": (403, "Permission 'container.operations.get' denied on resource"),
    "not found": (404, "Not found: operation"),
}


def _move_bounds(fake: FakeGkeApi, drained: bool = False) -> GkeNodePoolActuator:
    clients = google_clients(fake.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100", gke_autoscaling="move-bounds")
    return GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], SimulatedClock(START), drained=drained)


@pytest.mark.parametrize("failure", sorted(LOOK_FAILURES))
def test_a_release_whose_operation_cannot_be_read_after_its_write_may_be_carried_out(
    gke_api: FakeGkeApi, failure: str
) -> None:
    gke_api.add_pool("a100", nodes=8, zones=ZONES, autoscaling=BOUNDS)
    actuator = _move_bounds(gke_api)
    status, message = LOOK_FAILURES[failure]
    gke_api.fail_next(1, status, message, path=OP_READ, method="GET")

    with writes_sent() as writes, pytest.raises(TransientActuatorError) as raised:
        actuator.resize("gpu", 5, "release")

    assert gke_api.calls("POST", ":setAutoscaling") == 1
    assert gke_api.pools["a100"].spec["autoscaling"]["totalMaxNodeCount"] == 5  # GKE shrinks the pool to it
    assert writes.accepted == ["gpu"], writes  # [] before: the write was only asked
    assert raised.value.maybe_applied, raised.value  # False before
    assert writes.maybe_applied(raised.value)
    assert "nothing sent" not in str(raised.value) and "was started" in str(raised.value), raised.value


def test_a_release_whose_only_write_is_refused_is_not(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=8, zones=ZONES, autoscaling=BOUNDS)
    actuator = _move_bounds(gke_api)
    gke_api.fail_next(
        1, 429, "Too many operations: cluster hits the concurrent operations quota", path=":setAutoscaling"
    )

    with writes_sent() as writes, pytest.raises(TransientActuatorError) as raised:
        actuator.resize("gpu", 5, "release")

    assert writes.asked == ["gpu"] and writes.accepted == [], writes
    assert not raised.value.maybe_applied and not writes.maybe_applied(raised.value), raised.value
    assert gke_api.pools["a100"].spec["autoscaling"]["totalMaxNodeCount"] == 12


@pytest.mark.parametrize("failure", sorted(LOOK_FAILURES))
def test_a_slice_deleted_whose_operation_cannot_be_read_may_be_carried_out(gke_api: FakeGkeApi, failure: str) -> None:
    for i in range(3):
        gke_api.add_pool(f"v5e-{i}", nodes=SLICES.hosts_per_slice, zones=("us-central1-a",))
    actuator = GkeTpuSliceActuator(google_clients(gke_api.url).gke, CLUSTER, [SLICES], SimulatedClock(START))
    status, message = LOOK_FAILURES[failure]
    gke_api.fail_next(1, status, message, path=OP_READ, method="GET")

    with writes_sent() as writes, pytest.raises(TransientActuatorError) as raised:
        actuator.resize(POOL, 1, "release")

    assert gke_api.calls("DELETE", "/nodePools/") == 1  # the first slice's delete went out, then the look failed
    assert writes.accepted == [POOL], writes  # [] before
    assert raised.value.maybe_applied, raised.value  # False before (403 and 404 were permanent: the pool blocked)


def _drain_started(kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi) -> NodeDrains:
    """The release of one node of a move-bounds pool of 3 (bounds 3-3) by a real drain: started (its node cordoned,
    empty); its next step, a minute later, removes the node and moves the bounds."""
    gke_api.add_pool("a100", nodes=3, zones=ZONES, autoscaling={"enabled": True, "totalMinNodeCount": 3,
                                                                "totalMaxNodeCount": 3})  # fmt: skip
    names = [i.name for m in gke_api.pools["a100"].migs for i in m.instances]
    for name in names:
        kube_api.put("nodes", objs.node(name, "a100"))
    clock = SimulatedClock(START)
    kube_api.clock = clock.now
    drainer = KubernetesNodeDrainer(KubernetesApi(kube_client), clock, {"gpu": "a100"}, _move_bounds(gke_api, True))
    drains = NodeDrains({"gpu": drainer}, timedelta(0))
    started = drains.scale_down(Resize("gpu", 3, 2, "idle", "release"), START, [names[0]])
    assert [r.status for r in started.results] == [ActionStatus.STARTED], started  # cordoned, empty
    clock.set(START + timedelta(minutes=1))
    return drains


def test_a_drain_whose_node_was_deleted_before_its_step_failed_keeps_its_claim(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """The drain's node is deleted at its second step (deleteInstances accepted), and then GKE refuses to move the
    autoscaler bounds (429): the step fails with an error that says nothing was applied, and the drain's release lost
    its claim (``unclear`` false) while its node went."""
    drains = _drain_started(kube_api, kube_client, gke_api)
    gke_api.fail_next(
        1, 429, "Too many operations: cluster hits the concurrent operations quota", path=":setAutoscaling"
    )

    outcome = drains.continue_pending(START + timedelta(minutes=1))  # its next step removes the node

    (result,) = outcome.results
    assert gke_api.calls("POST", "/deleteInstances") == 1  # the node is going
    assert result.status is ActionStatus.FAILED and "bounds are still 3-3" in (result.error or ""), result
    assert result.unclear and carried_out(result), result  # False before: its claim was taken back


def test_a_drain_step_failing_on_a_read_before_any_write_sent_nothing(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """The step's read of the node pool, before the node's removal is asked, answered 500: an error that says its own
    request may have been carried out (``maybe_applied``), but a read carries nothing out. The step's result was
    unclear, its release's claim kept while nothing went out; it is clear now."""
    drains = _drain_started(kube_api, kube_client, gke_api)
    gke_api.fail_next(1, 500, "backend error", path="/nodePools/a100", method="GET")

    outcome = drains.continue_pending(START + timedelta(minutes=1))

    (result,) = outcome.results
    assert gke_api.calls("POST", "") == 0  # nothing written: no deleteInstances, no setAutoscaling
    assert result.status is ActionStatus.FAILED and "HTTP 500" in (result.error or ""), result
    assert not result.unclear and not carried_out(result), result  # unclear before
    assert "gpu" in outcome.failing  # the same key continues the drain next tick


def test_a_drain_step_whose_removal_got_no_clear_answer_may_have_gone_out(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """The node's removal itself answered 500 (Compute failed while handling it): asked, not accepted, and its error
    says it may have been carried out. The step's result stays unclear."""
    drains = _drain_started(kube_api, kube_client, gke_api)
    gke_api.fail_next(1, 500, "backend error", path="/deleteInstances")

    outcome = drains.continue_pending(START + timedelta(minutes=1))

    (result,) = outcome.results
    assert gke_api.calls("POST", "/deleteInstances") == 1
    assert result.status is ActionStatus.FAILED and "HTTP 500" in (result.error or ""), result
    assert result.unclear and carried_out(result), result


@pytest.mark.parametrize(
    ("status", "message", "maybe"),
    [
        (503, "The service is currently unavailable.", True),
        (504, "Deadline exceeded", True),
        (429, "Too many operations: cluster hits the concurrent operations quota", False),
    ],
)
def test_moving_only_the_bounds_keeps_what_gke_s_answer_says_of_the_write(
    gke_api: FakeGkeApi, status: int, message: str, maybe: bool
) -> None:
    """The pool's groups are already at the size asked and only GKE's autoscaler bounds are to move (left above it,
    e.g. by a failed move): the bounds' write is this change's only write. A server error or a timeout may have
    carried it out, a refusal did not; the error said "refused" for each (``maybe_applied`` false)."""
    gke_api.add_pool("a100", nodes=5, zones=ZONES, autoscaling=BOUNDS)
    actuator = _move_bounds(gke_api)
    gke_api.fail_next(1, status, message, path=":setAutoscaling")

    with pytest.raises(TransientActuatorError) as raised:
        actuator.resize("gpu", 5, "bounds")

    assert gke_api.calls("POST", ":setAutoscaling") == 1
    assert raised.value.maybe_applied is maybe, raised.value
    assert "bounds are still 0-12" in str(raised.value), raised.value

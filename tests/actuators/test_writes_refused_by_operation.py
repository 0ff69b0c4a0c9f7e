"""A write whose operation GKE answers done with an error was refused: the error read is the cloud's answer to it.

A write counts as accepted once its call returned (``actuators.write_window``). GKE may still refuse it in the
operation it started, found done with an error when the adapter looks at it once: 409 ABORTED, 429 too many
operations, the node pool's bounds left as they were. The write stayed counted accepted, so a move-bounds release
refused so read as possibly carried out (``Writes.maybe_applied`` true, the executor's ``unclear_release`` true): its
claim was kept while GKE kept the pool. The write is now no longer counted accepted (``write_refused``), and the
error's own flag decides (true only for an operation that ended with a server error, INTERNAL). The same for a TPU
slice deleted whose operation is refused, and for a zone's Compute resize whose operation lists errors.

The real adapters on the local GKE and Compute Engine server; GKE's answer is played by the server finishing the
operation at once with the error and leaving the pool as it was."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.gke_tpu_slices import GkeTpuSliceActuator
from actuators.write_window import writes_sent
from agent.executor_resizes import unclear_release
from config.cloud import NodePoolMapping
from models import ActionStatus, ActuatorError, Resize, TransientActuatorError
from models.clock import SimulatedClock
from tests.actuators.test_writes_accepted import BOUNDS, START, ZONES, _move_bounds
from tests.contract.harnesses import CLUSTER, POOL, SLICES
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

# (gRPC code of the operation's error, its message, whether the error says the change may be carried out)
REFUSALS = {
    "aborted": (10, "Operation aborted: the cluster is being updated, please try again later", False),
    "too many operations": (8, 'Too many operations: cluster "ml" hits the concurrent operations quota 5', False),
    "internal": (13, "Internal error", True),  # a server failing while it handled it: maybe carried out
}


def _refuse_in_operation(fake: FakeGkeApi, monkeypatch: pytest.MonkeyPatch, call: tuple[str, str], error: Any) -> None:
    """GKE takes the node pool ``call`` (method, verb) and answers with its operation done at once with ``error``,
    the pool left as it was."""
    served = fake._pool_call

    def refusing(method: str, pool: Any, verb: str, body: Any) -> Any:
        if (method, verb) != call:
            return served(method, pool, verb, body)
        spec, status = copy.deepcopy(pool.spec), pool.status
        answer = served(method, pool, verb, body)
        pool.spec, pool.status = spec, status
        op = fake.operations[answer["name"]]
        op.status, op.error, op.end_time = "DONE", error, op.start_time
        return fake._operation_json(op)

    monkeypatch.setattr(fake, "_pool_call", refusing)


@pytest.mark.parametrize("refusal", sorted(REFUSALS))
def test_a_release_whose_operation_is_refused_at_once_is_judged_by_the_refusal(
    gke_api: FakeGkeApi, monkeypatch: pytest.MonkeyPatch, refusal: str
) -> None:
    gke_api.add_pool("a100", nodes=8, zones=ZONES, autoscaling=BOUNDS)
    actuator = _move_bounds(gke_api)
    code, message, maybe = REFUSALS[refusal]
    _refuse_in_operation(gke_api, monkeypatch, ("POST", "setAutoscaling"), {"code": code, "message": message})

    with writes_sent() as writes, pytest.raises(TransientActuatorError) as raised:
        actuator.resize("gpu", 5, "release")

    assert gke_api.calls("POST", ":setAutoscaling") == 1 and gke_api.calls("GET", "/operations/") == 1
    assert gke_api.pools["a100"].spec["autoscaling"] == BOUNDS  # GKE kept the bounds
    assert message in str(raised.value), raised.value
    assert writes.asked == ["gpu"] and writes.accepted == [], writes  # ["gpu"] accepted before
    assert raised.value.maybe_applied is maybe, raised.value
    release = Resize("gpu", 8, 5, "idle", "release")
    assert unclear_release(release, raised.value, writes) is maybe  # True for every refusal before


def test_a_release_whose_operation_cannot_be_read_stays_accepted(
    gke_api: FakeGkeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operation refused, but the look at it refused too (a read rate limit): nothing says GKE refused the write."""
    gke_api.add_pool("a100", nodes=8, zones=ZONES, autoscaling=BOUNDS)
    actuator = _move_bounds(gke_api)
    code, message, _ = REFUSALS["aborted"]
    _refuse_in_operation(gke_api, monkeypatch, ("POST", "setAutoscaling"), {"code": code, "message": message})
    gke_api.fail_next(1, 429, "Quota exceeded for quota metric 'Read requests'", path="/operations/", method="GET")

    with writes_sent() as writes, pytest.raises(TransientActuatorError) as raised:
        actuator.resize("gpu", 5, "release")

    assert writes.accepted == ["gpu"] and raised.value.maybe_applied, (writes, raised.value)
    assert unclear_release(Resize("gpu", 8, 5, "idle", "release"), raised.value, writes)


def test_a_slice_delete_whose_operation_is_refused_at_once_applied_nothing(
    gke_api: FakeGkeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(3):
        gke_api.add_pool(f"v5e-{i}", nodes=SLICES.hosts_per_slice, zones=("us-central1-a",))
    actuator = GkeTpuSliceActuator(google_clients(gke_api.url).gke, CLUSTER, [SLICES], SimulatedClock(START))
    code, message, _ = REFUSALS["too many operations"]
    _refuse_in_operation(gke_api, monkeypatch, ("DELETE", ""), {"code": code, "message": message})

    with writes_sent() as writes, pytest.raises(ActuatorError) as raised:
        actuator.resize(POOL, 1, "release")

    assert gke_api.calls("DELETE", "/nodePools/") == 1  # the first slice's delete, refused in its operation
    assert sorted(gke_api.pools) == ["v5e-0", "v5e-1", "v5e-2"]
    assert writes.asked == [POOL] and writes.accepted == [], writes  # [POOL] accepted before
    assert not writes.maybe_applied(raised.value), raised.value  # True before


def test_a_zone_whose_resize_operation_lists_errors_is_not_counted_accepted(
    gke_api: FakeGkeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compute takes the resize of one zone's group and answers with its operation listing a stockout: the zone is
    backed off and the others take its share; its write is not among those accepted."""
    gke_api.add_pool("a100", nodes=3, zones=ZONES)
    clients = google_clients(gke_api.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100")
    actuator = GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], SimulatedClock(START))
    served = gke_api._compute
    stockout = {"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message": "The zone does not have enough resources"}

    def refusing(method: str, zone: str, name: str, verb: str, query: Any, body: Any) -> Any:
        if verb != "resize" or zone != ZONES[0]:
            return served(method, zone, name, verb, query, body)
        return gke_api._zonal_operation("resize", zone, name) | {"error": {"errors": [stockout]}}

    monkeypatch.setattr(gke_api, "_compute", refusing)

    with writes_sent() as writes:
        result = actuator.resize("gpu", 6, "grow")

    assert result.status is ActionStatus.STARTED, result
    resizes = gke_api.calls("POST", "/resize")
    assert resizes == len(writes.asked) >= 3, (resizes, writes)  # the refused zone's, then the others'
    assert [g.target_size for g in gke_api.pools["a100"].migs] == [1, 3, 2]
    assert len(writes.accepted) == resizes - 1, writes  # every resize accepted before

"""GKE node pools during an operation GKE runs on the cluster itself (``targetLink`` ``.../clusters/C``: a control
plane upgrade it starts on its own schedule) or on another node pool (a TPU slice the agent creates).

A scale-up of a pool without GKE autoscaling resizes its zones' groups through Compute, which GKE does not police:
it is placed during either (it was held for the whole upgrade before, every GPU pool of the cluster with it). A
``move-bounds`` pool's scale-up must move the autoscaler bounds, which GKE refuses during a cluster operation, so it
is held with a transient error, its groups untouched. An operation on the pool itself (an upgrade of its nodes) holds
its resizes, as before. The real clients against ``tests.fakes.gke_api``."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.gke_tpu_slices import GkeTpuSliceActuator
from config.cloud import NodePoolMapping
from models import ActionStatus, TransientActuatorError
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER, SLICES
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

CLOCK = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
AT_THREE = {"enabled": True, "totalMinNodeCount": 3, "totalMaxNodeCount": 3}


def _node_pools(fake: FakeGkeApi, mode: str = "refuse") -> GkeNodePoolActuator:
    clients = google_clients(fake.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100", gke_autoscaling=mode)  # type: ignore[arg-type]
    return GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], CLOCK)


def _group_sizes(fake: FakeGkeApi) -> list[int]:
    return [mig.target_size for mig in fake.pools["a100"].migs]


@pytest.mark.parametrize("to_units", [6, 7])  # the same in every zone (a GKE setSize once), and not
def test_a_scale_up_during_a_control_plane_upgrade_is_placed(gke_api: FakeGkeApi, to_units: int) -> None:
    gke_api.add_pool("a100", nodes=3, zones=ZONES)
    gke_api.upgrade_cluster()  # UPGRADE_MASTER, targetLink .../clusters/ml: GKE refuses node pool changes meanwhile

    result = _node_pools(gke_api).resize("gpu", to_units, "up")

    assert result.status is ActionStatus.STARTED
    assert sum(_group_sizes(gke_api)) == to_units  # 3 before: held "running incompatible operation"
    assert gke_api.calls("POST", ":setSize") == 0


def test_a_move_bounds_scale_up_during_a_control_plane_upgrade_is_held_until_it_ends(gke_api: FakeGkeApi) -> None:
    """GKE would refuse the bounds: grown without them, its autoscaler would take the new nodes back as unneeded."""
    gke_api.add_pool("a100", nodes=3, zones=ZONES, autoscaling=AT_THREE)
    upgrade = gke_api.upgrade_cluster()
    actuator = _node_pools(gke_api, "move-bounds")

    with pytest.raises(TransientActuatorError, match=f"running incompatible operation {upgrade}.*autoscaler bounds"):
        actuator.resize("gpu", 6, "up")
    assert _group_sizes(gke_api) == [1, 1, 1]
    assert gke_api.pools["a100"].spec["autoscaling"] == AT_THREE

    gke_api.finish_operations()
    assert actuator.resize("gpu", 6, "up").status is ActionStatus.STARTED
    assert _group_sizes(gke_api) == [2, 2, 2]
    assert gke_api.pools["a100"].spec["autoscaling"]["totalMaxNodeCount"] == 6


def test_a_tpu_slice_being_created_does_not_hold_a_gpu_pools_scale_up(gke_api: FakeGkeApi) -> None:
    """The slice's CREATE_NODE_POOL names its own node pool (``.../nodePools/v5e-0``), not the cluster."""
    gke_api.add_pool("a100", nodes=3, zones=ZONES)
    clients = google_clients(gke_api.url)
    assert GkeTpuSliceActuator(clients.gke, CLUSTER, [SLICES], CLOCK).resize("accel", 1, "slice").status in (
        ActionStatus.STARTED,
        ActionStatus.DONE,
    )
    (create,) = (op for op in gke_api.operations.values() if op.op_type == "CREATE_NODE_POOL")
    assert create.status == "RUNNING" and create.target.endswith("/clusters/ml/nodePools/v5e-0")

    result = _node_pools(gke_api).resize("gpu", 7, "up")

    assert result.status is ActionStatus.STARTED
    assert _group_sizes(gke_api) == [3, 2, 2]


def test_an_upgrade_of_the_pools_own_nodes_holds_its_resizes_until_it_ends(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=3, zones=ZONES)
    upgrade = gke_api.upgrade_nodes("a100")
    actuator = _node_pools(gke_api)

    with pytest.raises(TransientActuatorError, match=f"operation {upgrade} is still running on this pool"):
        actuator.resize("gpu", 7, "up")
    assert _group_sizes(gke_api) == [1, 1, 1]

    gke_api.finish_operations()
    assert actuator.resize("gpu", 7, "up").status is ActionStatus.STARTED
    assert _group_sizes(gke_api) == [3, 2, 2]

"""A GKE node that cannot be created for a reason other than capacity is a failed unit with Compute's reason, not a
node still coming.

An instance its group cannot create stays CREATING, retried for ever, and its ``lastAttempt.errors`` names the cause
(tests/fakes/REFERENCE.md): a subnet out of addresses (IP_SPACE_EXHAUSTED), a service account without a permission
(PERMISSIONS_ERROR), ... The adapter read only stockouts and quotas there, so such a node counted as provisioning for
ever: the pool's target held it, the planner waited for it, and the operator was told at most that a scale-up
stalled, never why. cluster-autoscaler gives any such error an instance still being created and deletes those
instances (GCE ``GetErrorInfo``, ``deleteCreatedNodesWithErrors``). Now it is a failed unit carrying Compute's
reason (``PoolState.failed_messages``), not read as capacity: the agent removes it with no back-off, and once the
pool's units keep failing so for its lead time it alerts with the reason and backs the pool off, as for AWS's and
Cloud TPU's units failed for a reason of their own. Its zone is not backed off (no stockout). The real clients
against ``tests.fakes.gke_api`` and the agent's removal of failed units."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from actuators.gke_node_pool import GkeNodePoolActuator
from agent.executor import clear_failed_units
from agent.planning import PlannerMemory
from config.cloud import NodePoolMapping
from models import AcceleratorFamily, ActionStatus, AlertKind, CapacityTier, PoolKind, PoolSpec
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)
LEAD = timedelta(minutes=20)
GPU = PoolSpec(
    "gpu", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 8, 30.0, LEAD, ("t",)
)
ZONE = "us-central1-a"
# Compute's words for a subnet out of addresses (tests/fakes/REFERENCE.md).
IP_SPACE = (
    "Instance 'gke-ml-a100-0-grp-0002' creation failed: IP space of "
    "'projects/test-project/regions/us-central1/subnetworks/default' is exhausted."
)


def _actuator(fake: FakeGkeApi, clock: SimulatedClock) -> GkeNodePoolActuator:
    clients = google_clients(fake.url)
    return GkeNodePoolActuator(
        clients.gke, clients.migs, CLUSTER, [NodePoolMapping(pool="gpu", node_pool="a100")], clock
    )


def test_a_node_refused_an_address_is_a_failed_unit_with_computes_reason(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=1, zones=(ZONE,))
    gke_api.stockout(ZONE, shown_on=("instances",), code="IP_SPACE_EXHAUSTED", message=IP_SPACE)
    clock = SimulatedClock(T0)
    actuator = _actuator(gke_api, clock)
    assert actuator.resize("gpu", 2, "up").status is ActionStatus.STARTED
    gke_api.advance()
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 1)
    assert state.failed_messages == (f"IP_SPACE_EXHAUSTED: {IP_SPACE}",)
    assert (state.failed_for_capacity, state.failed_for_quota) == (False, False)

    first = clear_failed_units({"gpu": state}, actuator, {"gpu": GPU}, PlannerMemory(), T0)
    assert first.alerts == ()  # removed, asked for again: no back-off yet
    assert first.memory.backoff_until == {}
    (state,) = actuator.list_pools()
    assert (state.target_units, state.failed_units) == (1, 0)
    assert state.zones[0].backoff_until is None  # not a stockout: the zone is not left out

    # Asked for again, it fails again; a lead time on, the pool's units have kept failing: told, with the reason.
    actuator.resize("gpu", 2, "again")
    gke_api.advance()
    later = T0 + LEAD
    clock.advance(LEAD)
    (state,) = actuator.list_pools()
    done = clear_failed_units({"gpu": state}, actuator, {"gpu": GPU}, first.memory, later)
    (alert,) = done.alerts
    assert alert.kind is AlertKind.ACTUATOR_FAILURE
    assert f"none for want of capacity or quota: IP_SPACE_EXHAUSTED: {IP_SPACE}" in alert.summary
    assert done.memory.backoff_until == {"gpu": later + LEAD}


def test_a_node_being_created_with_no_error_is_still_coming(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=1, zones=(ZONE,))
    actuator = _actuator(gke_api, SimulatedClock(T0))
    actuator.resize("gpu", 2, "up")
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 2, 0)

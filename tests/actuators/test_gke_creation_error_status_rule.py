"""Which GKE nodes still being created, with an error on their last attempt, are failed units: the status rule.

An instance the group is creating (``currentAction`` CREATING) keeps its last attempt's errors, and its VM may run by
then. cluster-autoscaler's GCE ``GetErrorInfo`` (tests/fakes/REFERENCE.md) reads a stockout, a quota, IP space and a
permission as failed whatever the instance's ``instanceStatus``, and any other error only while the instance is not
running yet (status empty, PROVISIONING or STAGING, ``isInstanceStatusNotRunningYet``): a running node with an
earlier error left on its last attempt is not deleted. Unlike cluster-autoscaler, which reads every code containing
QUOTA as a quota, a rate limit (CONCURRENT_OPERATIONS_QUOTA_EXCEEDED "Rate Limit Exceeded") fails nothing: the group
retries it, and so is Compute's rate limit on operations of one resource (RESOURCE_OPERATION_RATE_EXCEEDED, many boot
disks created from one image at once). The real clients against ``tests.fakes.gke_api``."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from actuators.gke_node_pool import GkeNodePoolActuator
from config.cloud import NodePoolMapping
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)
ZONE = "us-central1-a"
OTHER = ("CONDITION_NOT_MET", "Instance 'gke-ml-a100-0-grp-0002' creation failed: a condition was not met.")
RATE_LIMITED = ("CONCURRENT_OPERATIONS_QUOTA_EXCEEDED", "Rate Limit Exceeded")
OPERATION_RATE = (
    "RESOURCE_OPERATION_RATE_EXCEEDED",
    "Operation rate exceeded for resource 'projects/test-project/global/images/gke-node-image'. "
    "Too frequent operations from the source resource.",
)
IP_SPACE = (
    "IP_SPACE_EXHAUSTED",
    "Instance 'gke-ml-a100-0-grp-0002' creation failed: IP space of "
    "'projects/test-project/regions/us-central1/subnetworks/default' is exhausted.",
)
STOCKOUT = ("ZONE_RESOURCE_POOL_EXHAUSTED", "The zone does not have enough resources available (GCE_STOCKOUT)")
NOT_RUNNING_YET = ("", "PROVISIONING", "STAGING")

CASES = [(status, OTHER, status in NOT_RUNNING_YET) for status in (*NOT_RUNNING_YET, "RUNNING")]
CASES += [(status, RATE_LIMITED, False) for status in (*NOT_RUNNING_YET, "RUNNING")]
CASES += [(status, OPERATION_RATE, False) for status in (*NOT_RUNNING_YET, "RUNNING")]
CASES += [(status, IP_SPACE, True) for status in (*NOT_RUNNING_YET, "RUNNING")]
CASES += [(status, STOCKOUT, True) for status in (*NOT_RUNNING_YET, "RUNNING")]


@pytest.mark.parametrize(("status", "error", "failed"), CASES, ids=[f"{s or 'no status'}-{e[0]}" for s, e, _ in CASES])
def test_an_error_on_the_last_attempt_fails_a_node_by_its_code_and_status(
    gke_api: FakeGkeApi, status: str, error: tuple[str, str], failed: bool
) -> None:
    gke_api.add_pool("a100", nodes=1, zones=(ZONE,))
    gke_api.stockout(ZONE, shown_on=("instances",), code=error[0], message=error[1])
    clients = google_clients(gke_api.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100")
    actuator = GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], SimulatedClock(T0))
    actuator.resize("gpu", 2, "up")
    gke_api.advance()
    gke_api.set_instance_status("a100", status)
    (state,) = actuator.list_pools()
    if failed:
        assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 1)
        assert state.failed_messages == (f"{error[0]}: {error[1]}",)
    else:
        assert (state.ready_units, state.target_units, state.failed_units) == (1, 2, 0)
        assert state.failed_messages == ()

"""GkeTpuSliceActuator on the fake GKE and Compute Engine APIs (and Kubernetes, for a slice with work on it): a slice
a stockout left short of hosts is in flight for its group's wait, then failed for want of capacity, so the next resize
deletes it and refuses the scale-up (the group is backed off, its demand sent to the next eligible pool) instead of
the slice staying paid for, serving nothing and in the target for as long as the zone stays out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client as k8s

from actuators.gke_tpu_slices import GkeTpuSliceActuator
from actuators.short_slices import SHORT_WAIT
from actuators.slice_drain import KubernetesSliceDrainer
from kube import KubernetesApi
from models import ActionStatus, CapacityUnavailable
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER, POOL, SLICES
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)
WAIT = timedelta(hours=2)  # e.g. a 1-hour lead time times alerts.stalled_after_lead_times 2.0


def _short_slice(fake: FakeGkeApi, clock: SimulatedClock, waits: dict[str, timedelta] | None) -> GkeTpuSliceActuator:
    """A group's only slice asked for in a zone with room for 2 of its 4 hosts: RUNNING_WITH_ERROR, 2 hosts running,
    the group's instance groups retrying the others."""
    clients = google_clients(fake.url)
    actuator = GkeTpuSliceActuator(clients.gke, CLUSTER, [SLICES], clock, migs=clients.migs, drained=True, waits=waits)
    fake.stockout("us-central1-a", mode="operation", room=2)
    actuator.resize(POOL, 1, "up")
    fake.advance()
    assert fake.pools["v5e-0"].status == "RUNNING_WITH_ERROR"
    return actuator


def _counts(actuator: GkeTpuSliceActuator) -> tuple[int, int, int]:
    (state,) = actuator.list_pools()
    return state.ready_units, state.target_units, state.failed_units


def test_a_slice_short_of_hosts_for_longer_than_its_wait_is_failed_deleted_and_refuses_the_scale_up(
    gke_api: FakeGkeApi,
) -> None:
    clock = SimulatedClock(T0)
    actuator = _short_slice(gke_api, clock, {POOL: WAIT})

    seen = []
    for after in (timedelta(0), WAIT - timedelta(minutes=1), WAIT):
        clock.advance(after - (clock.now() - T0))
        gke_api.advance()  # the zone stays out: the missing hosts stay CREATING
        seen.append(_counts(actuator))
    assert seen == [(0, 1, 0), (0, 1, 0), (0, 0, 1)]  # in flight for its wait, then failed
    (state,) = actuator.list_pools()
    (why,) = state.failed_messages
    assert why.startswith("insufficient capacity: short of hosts for 2h (the group waits 2h): 2 of 4 hosts running: ")
    assert "ZONE_RESOURCE_POOL_EXHAUSTED" in why

    with pytest.raises(CapacityUnavailable, match="insufficient capacity: short of hosts for 2h"):
        actuator.resize(POOL, 1, "still 1")  # the planner's slice, still wanted
    assert gke_api.pools["v5e-0"].status == "STOPPING"  # deleted: no longer paid for
    assert set(gke_api.pools) == {"v5e-0"}  # and none asked for in the stocked-out zone


def test_an_actuator_built_without_waits_gives_a_short_slice_an_hour(gke_api: FakeGkeApi) -> None:
    clock = SimulatedClock(T0)
    actuator = _short_slice(gke_api, clock, None)
    assert _counts(actuator) == (0, 1, 0)
    clock.advance(SHORT_WAIT - timedelta(minutes=1))
    assert _counts(actuator) == (0, 1, 0)
    clock.advance(timedelta(minutes=1))
    assert _counts(actuator) == (0, 0, 1)


def test_a_slice_whose_hosts_came_up_within_its_wait_is_ready_and_its_wait_starts_again_if_it_falls_short(
    gke_api: FakeGkeApi,
) -> None:
    clock = SimulatedClock(T0)
    actuator = _short_slice(gke_api, clock, {POOL: WAIT})
    assert _counts(actuator) == (0, 1, 0)
    clock.advance(WAIT - timedelta(minutes=1))
    gke_api.restock()
    gke_api.advance()  # the groups' retries create the missing hosts
    assert _counts(actuator) == (1, 1, 0)

    mig = gke_api.pools["v5e-0"].migs[0]
    mig.instances, mig.target_size = mig.instances[-2:], 2  # later two hosts go, the zone out again
    assert _counts(actuator) == (0, 1, 0)
    clock.advance(WAIT - timedelta(minutes=1))
    assert _counts(actuator) == (0, 1, 0)  # short since the last read, not since the first time


def test_a_slice_short_of_hosts_that_no_stockout_or_quota_keeps_from_them_is_waited_for(gke_api: FakeGkeApi) -> None:
    """Hosts being recreated (a repair) with nothing naming a stockout or a quota: no capacity to give up on."""
    clock = SimulatedClock(T0)
    clients = google_clients(gke_api.url)
    actuator = GkeTpuSliceActuator(clients.gke, CLUSTER, [SLICES], clock, migs=clients.migs, waits={POOL: WAIT})
    gke_api.add_pool("v5e-0", nodes=SLICES.hosts_per_slice)
    gke_api.autoscale("v5e-0", 2)
    gke_api.report_error("v5e-0", status="RUNNING_WITH_ERROR", message="2 nodes are being recreated")
    assert _counts(actuator) == (0, 1, 0)
    clock.advance(WAIT * 3)
    assert _counts(actuator) == (0, 1, 0)


def test_a_short_slice_with_work_on_it_past_its_wait_is_broken_never_deleted(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """A job's pod on its hosts keeps it busy: given up, it is broken (a slice asked for in its place, its stockout
    refusing that one), not deleted under the pod."""
    clock = SimulatedClock(T0)
    kube_api.clock = clock.now
    actuator = _short_slice(gke_api, clock, {POOL: WAIT})
    actuator.read_hosts_from(KubernetesSliceDrainer(KubernetesApi(kube_client), clock, actuator))
    running = [i.name for m in gke_api.pools["v5e-0"].migs for i in m.instances if i.action == "NONE"]
    for host in running:
        kube_api.put("nodes", objs.node(host, "v5e-0", accelerators=4, resource=objs.TPU_RESOURCE))
    pod = objs.pod("train-0", running[-1], accelerators=4, resource=objs.TPU_RESOURCE, owner_kind="Job")
    kube_api.put("pods", pod)
    assert _counts(actuator) == (0, 1, 0)  # first seen short

    clock.advance(WAIT)
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (0, 0, 0)
    ((name, why),) = state.broken_units
    assert name == "v5e-0"
    assert why.startswith("in RUNNING_WITH_ERROR with work on it and 2 of 4 hosts running; missing: ")
    with pytest.raises(CapacityUnavailable, match="2 of 4 hosts running"):
        actuator.resize(POOL, 1, "replace")
    assert gke_api.calls("DELETE", "/nodePools/") == 0
    assert actuator.resize(POOL, 0, "hold").status is ActionStatus.DONE


def test_a_slice_short_of_hosts_for_an_exhausted_quota_past_its_wait_is_failed_for_it(gke_api: FakeGkeApi) -> None:
    """GKE names the quota in a condition (GCE_QUOTA_EXCEEDED and the instance's failure, as k8s-config-connector#321
    shows it): the agent's back-off and next eligible pool apply to a quota as to a stockout."""
    clock = SimulatedClock(T0)
    clients = google_clients(gke_api.url)
    actuator = GkeTpuSliceActuator(clients.gke, CLUSTER, [SLICES], clock, migs=clients.migs, waits={POOL: WAIT})
    gke_api.add_pool("v5e-0", nodes=SLICES.hosts_per_slice)
    for instance in gke_api.pools["v5e-0"].migs[0].instances[:2]:
        instance.action = "CREATING"  # the group retries them; the quota keeps them from being created
    quota = {
        "code": "GCE_QUOTA_EXCEEDED",
        "message": "Instance 'gke-ml-v5e-0-0-0002' creation failed: Quota 'TPUS_PER_TPU_FAMILY' exceeded.  Limit: "
        "32.0 in region us-central1.",
    }
    gke_api.report_error("v5e-0", status="RUNNING_WITH_ERROR", conditions=(quota,))
    assert _counts(actuator) == (0, 1, 0)
    clock.advance(WAIT)
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (0, 0, 1)
    (why,) = state.failed_messages
    assert why.startswith("insufficient capacity: short of hosts for 2h (the group waits 2h): 2 of 4 hosts running: ")
    assert "GCE_QUOTA_EXCEEDED: Instance 'gke-ml-v5e-0-0-0002' creation failed: Quota 'TPUS_PER_TPU_FAMILY'" in why

"""The count of a pool's units failing for a reason other than capacity ends once they stop failing, even while the
pool is always creating units. It ended only on a read with no unit failed or being created, a lead time after the
last failed one: on a slice group whose demand kept growing, a slice always being created, it never ended, so a
single slice failing hours after the others (a broken slice removed once its job was stopped, which the operations
guide says raises nothing) was told as "Units of X have kept failing for 2h55m" and backed the group off. A unit still
being created two lead times after the last failure, or the end of the back-off it caused, is a stalled scale-up (told
as such), not a unit about to fail: the count now ends then too. While the slices keep failing, the count, its alert
at each removal and the back-off of one lead time each are as before (``test_failed_units_repeat_gke``).

The real GKE slice adapter with its group's slice drainer, on the fake GKE, Compute Engine and Kubernetes APIs; each
tick runs the agent's removal of failed units (``clear_failed_units``) and ``execute`` as the loop does."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from kubernetes import client as k8s

from actuators.gke_tpu_slices import GkeTpuSliceActuator
from actuators.slice_drain import KubernetesSliceDrainer
from agent.executor import clear_failed_units, execute
from agent.planning import PlannerMemory
from kube import KubernetesApi
from models import AcceleratorFamily, AlertEvent, CapacityPlan, CapacityTier, PoolKind, PoolSpec, Resize
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER, POOL, SLICES
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)
TICK = timedelta(minutes=5)
LEAD = timedelta(minutes=20)
COMES_UP = timedelta(minutes=20)  # a slice that does not fail is RUNNING, its hosts registered, after this
SPEC = PoolSpec(
    POOL, PoolKind.TPU_SLICE_GROUP, CapacityTier.ON_DEMAND, AcceleratorFamily.TPU, 16, 0, 16, 20.0, LEAD, ("tpu",)
)
PERMISSIONS = (
    "Google Compute Engine: Not all instances running in IGM after 5m0s. Expected 4, running 0, transitioning 4. "
    "Current errors: [PERMISSIONS_ERROR]"
)


class _Group:
    """A group of slices on the fake APIs and the parts of a tick that act on it: the removal of failed units, then
    a plan asking for ``wanted`` slices unless the group is backed off."""

    def __init__(self, kube: FakeKubeApi, gke: FakeGkeApi, kube_client: k8s.ApiClient) -> None:
        self.kube, self.gke, self.clock = kube, gke, SimulatedClock(T0)
        kube.clock = self.clock.now
        clients = google_clients(gke.url)
        self.actuator = GkeTpuSliceActuator(clients.gke, CLUSTER, [SLICES], self.clock, migs=clients.migs, drained=True)
        KubernetesSliceDrainer(KubernetesApi(kube_client), self.clock, self.actuator)  # reads the slices' hosts
        self.memory, self.alerts, self.wanted = PlannerMemory(), list[AlertEvent](), 2
        self.asked_at: dict[str, datetime] = {}  # slice being created -> since when
        gke.add_pool("v5e-0", nodes=SLICES.hosts_per_slice)
        self._register("v5e-0")

    def _register(self, name: str) -> None:
        for i in range(SLICES.hosts_per_slice):
            host = f"gke-ml-{name}-host-{i}"
            self.kube.put("nodes", objs.node(host, name, accelerators=4, resource=objs.TPU_RESOURCE))

    def run(self, until: timedelta, fails: Callable[[datetime], bool], grow_every: timedelta | None = None) -> None:
        """Ticks until ``until`` after T0: a slice being created fails when ``fails(now)``, else comes up after
        ``COMES_UP``; with ``grow_every``, the demand needs one more slice that often from the first tick on."""
        while (now := self.clock.now()) < T0 + until:
            self.gke.advance()
            for name, since in sorted(self.asked_at.items()):
                if fails(now):
                    self.gke.report_error(name, message=PERMISSIONS)  # GKE gave up on its instances
                    del self.asked_at[name]
                elif now - since < COMES_UP:
                    self.gke.report_error(name, status="PROVISIONING")  # GKE still creates it
                else:
                    self.gke.pools[name].status = "RUNNING"
                    self._register(name)
                    del self.asked_at[name]
            if grow_every is not None and (now - T0) % grow_every == timedelta(0):
                self.wanted += 1
            self._tick(now)
            self.clock.advance(TICK)

    def _tick(self, now: datetime) -> None:
        states = {s.pool_id: s for s in self.actuator.list_pools()}
        cleared = clear_failed_units(states, self.actuator, {POOL: SPEC}, self.memory, now)
        self.memory, self.alerts = cleared.memory, self.alerts + list(cleared.alerts)
        target = states[POOL].target_units
        resizes: tuple[Resize, ...] = ()
        if target < self.wanted and not self.memory.in_backoff(POOL, now):
            resizes = (Resize(POOL, target, self.wanted, "demand", f"{POOL}@{now.isoformat()}"),)
        done = execute(CapacityPlan(now, resizes), self.actuator, {POOL: SPEC}, self.memory, now)
        self.memory, self.alerts = done.memory, self.alerts + list(done.alerts)
        for name, pool in self.gke.pools.items():
            if pool.status == "PROVISIONING":
                self.asked_at.setdefault(name, now)


def test_a_single_failure_hours_after_the_others_raises_nothing_while_the_group_keeps_creating_slices(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    group = _Group(kube_api, gke_api, kube_client)
    group.run(timedelta(minutes=30), fails=lambda now: True)  # every slice fails 5 minutes after it is asked for
    assert [a.at - T0 for a in group.alerts] == [timedelta(minutes=25)]  # kept failing for the lead time
    group.alerts.clear()

    once = T0 + timedelta(hours=3)
    group.run(timedelta(hours=3, minutes=30), fails=lambda now: now == once, grow_every=timedelta(minutes=15))

    created = sum(1 for p in gke_api.pools.values() if p.status == "RUNNING")
    assert created > 8  # the group kept growing, a slice always being created
    assert group.alerts == []  # the slice failed at 3 hours is removed with no alert
    assert not group.memory.in_backoff(POOL, once)
    assert group.memory.units_failing_since == {POOL: once}  # a count of its own, from that failure


def test_while_slices_keep_failing_the_count_alerts_at_each_removal_and_backs_off_one_lead_time_each(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """What the count does when it does not end: it runs from the first failure, each removal after a lead time of
    failures alerts, and each back-off lasts one lead time (it never grows, and the group is asked again after it)."""
    group = _Group(kube_api, gke_api, kube_client)
    group.run(timedelta(hours=2), fails=lambda now: True)

    assert [a.at - T0 for a in group.alerts] == [timedelta(minutes=m) for m in (25, 50, 75, 100)]
    assert [a.details["failing_for"] for a in group.alerts] == ["20m", "45m", "1h10m", "1h35m"]
    assert group.memory.units_failing_since == {POOL: T0 + TICK}
    assert group.memory.backoff_until == {POOL: T0 + timedelta(minutes=100) + LEAD}

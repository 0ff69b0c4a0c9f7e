"""TPU slices whose creation keeps failing for a reason other than capacity are told about and back their group off.

A slice GKE fails with a message that names no stockout or quota (its instances refused for a permissions problem:
"Not all instances running in IGM ... Current errors: [PERMISSIONS_ERROR]", as GKE words a node pool whose instances
could not be created, hashicorp/terraform-provider-google#16559) is removed with no back-off, and the planner asks
for a slice in its place. Before, that went on at every provisioning cycle, with no back-off and no alert. Once the
group's slices have kept failing so for its lead time, each removal raises an ``actuator-failure`` warning and backs
the group off (``failing-changes``, no stockout), however long each slice took to fail. A single broken slice,
removed once its job was stopped, is still removed with no alert and no back-off, and so is another one long after.

The real GKE slice adapter with its group's slice drainer, on the fake GKE, Compute Engine and Kubernetes APIs; the
ticks run the agent's removal of failed units (``clear_failed_units``) and ``execute`` as the loop does, each tick
asking for the group's wanted slices when it is not backed off."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client as k8s

from actuators.gke_tpu_slices import GkeTpuSliceActuator
from actuators.slice_drain import KubernetesSliceDrainer
from agent.executor import clear_failed_units, execute
from agent.planning import PlannerMemory
from agent.planning.memory import BackoffReason
from kube import KubernetesApi
from models import (
    AcceleratorFamily,
    AlertEvent,
    AlertKind,
    CapacityPlan,
    CapacityTier,
    PoolKind,
    PoolSpec,
    Resize,
    Severity,
)
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER, POOL, SLICES
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)
TICK = timedelta(minutes=5)
LEAD = timedelta(minutes=20)
SPEC = PoolSpec(
    POOL, PoolKind.TPU_SLICE_GROUP, CapacityTier.ON_DEMAND, AcceleratorFamily.TPU, 16, 0, 4, 20.0, LEAD, ("tpu",)
)
PERMISSIONS = (
    "Google Compute Engine: Not all instances running in IGM after 5m0s. Expected 4, running 0, transitioning 4. "
    "Current errors: [PERMISSIONS_ERROR]"
)


@dataclass
class Agent:
    """The group on the fake APIs and the parts of a tick that act on it: the removal of failed units, then a plan
    asking for ``wanted`` slices unless the group is backed off, carried out by ``execute``."""

    kube: FakeKubeApi
    gke: FakeGkeApi
    clock: SimulatedClock
    actuator: GkeTpuSliceActuator
    wanted: int = 2
    memory: PlannerMemory = field(default_factory=PlannerMemory)
    alerts: list[AlertEvent] = field(default_factory=list)
    asked_at: dict[str, datetime] = field(default_factory=dict)  # slice being created -> since when
    created: list[datetime] = field(default_factory=list)  # when each slice was asked for

    def register(self, slice_name: str) -> None:
        for i in range(SLICES.hosts_per_slice):
            host = f"gke-ml-{slice_name}-host-{i}"
            self.kube.put("nodes", objs.node(host, slice_name, accelerators=4, resource=objs.TPU_RESOURCE))

    def tick(self) -> None:
        now = self.clock.now()
        states = {s.pool_id: s for s in self.actuator.list_pools()}
        cleared = clear_failed_units(states, self.actuator, {POOL: SPEC}, self.memory, now)
        self.memory = cleared.memory
        self.alerts += cleared.alerts
        target = states[POOL].target_units
        resizes: tuple[Resize, ...] = ()
        if target < self.wanted and not self.memory.in_backoff(POOL, now):
            resizes = (Resize(POOL, target, self.wanted, "demand", f"{POOL}@{now.isoformat()}"),)
        asked = self.gke.calls("POST", "/nodePools")
        done = execute(CapacityPlan(now, resizes), self.actuator, {POOL: SPEC}, self.memory, now)
        self.memory = done.memory
        self.alerts += done.alerts
        self.created += [now] * (self.gke.calls("POST", "/nodePools") - asked)
        for name in self.creating():
            self.asked_at.setdefault(name, now)

    def creating(self) -> list[str]:
        return [name for name, pool in self.gke.pools.items() if pool.status == "PROVISIONING"]


@pytest.fixture
def agent(kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi) -> Agent:
    """A group of one running 4-host slice, its hosts registered, that the agent grows to two."""
    clock = SimulatedClock(T0)
    kube_api.clock = clock.now
    clients = google_clients(gke_api.url)
    actuator = GkeTpuSliceActuator(clients.gke, CLUSTER, [SLICES], clock, migs=clients.migs, drained=True)
    KubernetesSliceDrainer(KubernetesApi(kube_client), clock, actuator)  # the actuator reads the slices' hosts
    gke_api.add_pool("v5e-0", nodes=SLICES.hosts_per_slice)
    rig = Agent(kube_api, gke_api, clock, actuator)
    rig.register("v5e-0")
    return rig


@pytest.mark.parametrize(
    ("fails_after", "first_alert"),
    [
        (TICK, T0 + 5 * TICK),  # failed at 5, 10, 15, 20 and 25 minutes: 20 minutes after the first failure
        (timedelta(minutes=30), T0 + timedelta(minutes=60)),  # each slice fails after longer than the lead time
    ],
)
def test_slices_whose_creation_keeps_failing_with_no_word_of_capacity_alert_and_back_the_group_off(
    agent: Agent, fails_after: timedelta, first_alert: datetime
) -> None:
    while agent.clock.now() <= first_alert + 2 * LEAD:
        agent.gke.advance()
        for name, since in list(agent.asked_at.items()):
            if agent.clock.now() - since < fails_after:
                agent.gke.report_error(name, status="PROVISIONING")  # GKE still waits for its instances
                continue
            agent.gke.report_error(name, message=PERMISSIONS)  # GKE gave up on them
            del agent.asked_at[name]
        agent.tick()
        if agent.clock.now() < first_alert:
            assert agent.alerts == [], agent.clock.now()
            assert not agent.memory.in_backoff(POOL, agent.clock.now())
        agent.clock.advance(TICK)

    alert = agent.alerts[0]
    assert (alert.at, alert.kind, alert.severity, alert.subject) == (
        first_alert, AlertKind.ACTUATOR_FAILURE, Severity.WARNING, POOL,
    )  # fmt: skip
    assert f"Units of {POOL} have kept failing for " in alert.summary
    assert f"none for want of capacity or quota: {PERMISSIONS}" in alert.summary
    assert "backing off 20m and using the next pool" in alert.summary
    assert {a.kind for a in agent.alerts} == {AlertKind.ACTUATOR_FAILURE}  # never a stockout
    # backed off for its lead time from the first alert: no slice asked for meanwhile, asked for again after it
    created = agent.created
    assert len([at for at in created if at < first_alert]) == (first_alert - T0) // fails_after  # each one failed
    assert not [at for at in created if first_alert <= at < first_alert + LEAD]
    assert [at for at in created if at >= first_alert + LEAD][:1] == [first_alert + LEAD]
    assert agent.memory.why_backed_off(POOL) is BackoffReason.FAILING_CHANGES


def test_one_broken_slice_removed_after_its_job_stopped_raises_nothing_and_neither_does_another_later(
    agent: Agent,
) -> None:
    agent.gke.add_pool("v5e-1", nodes=SLICES.hosts_per_slice)
    agent.register("v5e-1")
    breaks = {0: "v5e-1", 120: ""}  # minute -> the slice that breaks then ("": the newest one running)
    failed = []
    for minute in range(0, 240, 5):
        agent.gke.advance()
        for name in list(agent.asked_at):  # created: its hosts register
            agent.register(name)
            del agent.asked_at[name]
        if minute in breaks:
            name = breaks[minute] or max(n for n, p in agent.gke.pools.items() if p.status == "RUNNING")
            _break(agent, name)
            breaks[minute] = name
        if minute - 30 in breaks:  # a person stops the job, as the operations guide says
            agent.kube.delete("pods", f"train-{breaks[minute - 30]}", "default")
            failed += [s.failed_units for s in agent.actuator.list_pools()]
        agent.tick()
        agent.clock.advance(TICK)

    assert failed == [1, 1]  # each broken slice was failed once its job stopped, then deleted
    assert (agent.alerts, agent.memory.backoff_until) == ([], {})
    assert agent.memory.units_failing_since == {}
    assert sorted(n for n, p in agent.gke.pools.items() if p.status == "RUNNING") == ["v5e-0", "v5e-1"]


def _break(agent: Agent, name: str) -> None:
    """A job runs on the slice's last host; the slice loses its other three (deleted, not recreated) and GKE puts
    it in ERROR, saying nothing of capacity."""
    last = f"gke-ml-{name}-host-{SLICES.hosts_per_slice - 1}"
    agent.kube.put(
        "pods", objs.pod(f"train-{name}", last, accelerators=4, resource=objs.TPU_RESOURCE, owner_kind="Job")
    )
    for host in range(SLICES.hosts_per_slice - 1):
        agent.kube.delete("nodes", f"gke-ml-{name}-host-{host}")
    for mig in agent.gke.pools[name].migs:
        mig.instances, mig.target_size = mig.instances[-1:], 1
    agent.gke.report_error(name)

"""A scale-up whose units never arrive is still told stalled after a restart or a Lease handover: whole live daemons
(Lease election, the real agent loop, the fake GKE, Kubernetes and Prometheus APIs, a simulated clock), the first
stopped after asking for three spot nodes that never join, and a new one (a new pod, a new loop) started on the same
servers, ledger file and state ConfigMap.

The new leader, whose plan already equals the pool's target, asks for nothing: it waits for the scale-ups its
predecessor saved in the planner memory, from when they were asked, so its "Scale-up not ready" alert and
``LeadtimeScaleUpStuck`` (read through ``leadtime_pool_scale_up_waiting_since_seconds``) tell the stall an allowance
after the ask, as the first leader would have (before they were saved, an allowance after the new leader's first read;
see also ``test_scale_up_wait_saved_in_memory``). A dry-run agent does not take cluster-autoscaler's scale-ups for its
own, and units that arrive within their lead time after a handover raise nothing."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from datetime import timedelta

import pytest
from kubernetes import client as k8s
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from agent.daemon.live import live_parts
from agent.daemon.wiring import AssembledDaemon, assemble
from agent.notify import RecordingNotifier
from models import AlertEvent, AlertKind
from tests.e2e.rig import CLASS, NODE_POOLS, SPOT, Rig, end_process

MINUTE = timedelta(minutes=1)
ALLOWANCE = timedelta(minutes=20)  # the rig's lead time (10m) times the default stalled_after_lead_times (2.0)
WAITING = "leadtime_pool_scale_up_waiting_since_seconds"


class Replicas:
    """Agent processes started one after another on the same servers, each with its own notifier and page."""

    def __init__(self, rig: Rig, client: k8s.ApiClient) -> None:
        self.rig, self.client = rig, client
        self.started: list[AssembledDaemon] = []

    def start(self, pod: str, mode: str = "enforce") -> tuple[AssembledDaemon, RecordingNotifier]:
        notifier = RecordingNotifier()
        settings = self.rig.settings(election=True, mode=mode)
        parts = live_parts(settings, "e2e config", self.rig.clock, notifier, self.client, CollectorRegistry())
        daemon = assemble(settings, mode, parts, {"POD_NAME": pod, "POD_NAMESPACE": "leadtime"})
        daemon.endpoints.start()
        self.started.append(daemon)
        daemon.daemon.elect()
        daemon.daemon.refit()
        return daemon, notifier

    def stop(self, daemon: AssembledDaemon) -> None:
        """The process ends: no more ticks, its ledger file's lock released, its Lease left to run out."""
        daemon.daemon.stop_working()
        daemon.endpoints.stop()
        end_process(daemon.loop.agent)
        self.started.remove(daemon)

    def tick(self, daemon: AssembledDaemon) -> None:
        self.rig.clock.advance(MINUTE)
        daemon.daemon.elect()
        daemon.daemon.tick()


@pytest.fixture
def replicas(rig: Rig, kube_client: k8s.ApiClient) -> Iterator[Replicas]:
    started = Replicas(rig, kube_client)
    yield started
    for daemon in list(started.started):
        started.stop(daemon)


def _waiting(daemon: AssembledDaemon) -> dict[str, float]:
    host, port = daemon.endpoints.address
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    family = next(f for f in text_string_to_metric_families(text) if f.name == WAITING)
    return {s.labels["pool"]: s.value for s in family.samples}


def _stalled(notifier: RecordingNotifier) -> list[AlertEvent]:
    return [e for e in notifier.events if e.kind is AlertKind.STALLED_SCALE_UP]


def _spot_target(rig: Rig) -> int:
    return sum(mig.target_size for mig in rig.gke.pools[NODE_POOLS[SPOT]].migs)


def _handover(
    replicas: Replicas, first: AssembledDaemon, mode: str = "enforce"
) -> tuple[AssembledDaemon, RecordingNotifier]:
    replicas.stop(first)
    replicas.rig.clock.advance(MINUTE)  # the old pod gone, its Lease run out: the new one leads at once
    return replicas.start("leadtime-1", mode)


def test_a_scale_up_stalled_across_a_handover_is_told_an_allowance_after_it_was_asked(
    rig: Rig, replicas: Replicas
) -> None:
    rig.add_pools()
    rig.prometheus.set_demand(CLASS, 24)  # three spot nodes' worth; their instances are created, no node joins
    first, first_told = replicas.start("leadtime-0")
    replicas.tick(first)
    asked = rig.clock.now()
    assert _spot_target(rig) == 3 and _waiting(first) == {SPOT: asked.timestamp()}
    while rig.clock.now() < asked + 5 * MINUTE:
        replicas.tick(first)
    assert _stalled(first_told) == []

    second, told = _handover(replicas, first)
    replicas.tick(second)
    assert _spot_target(rig) == 3  # it plans what the pool was asked for: it asks nothing
    assert _waiting(second) == {SPOT: asked.timestamp()}  # waited for from the ask, not from its first read
    while not _stalled(told):
        assert rig.clock.now() < asked + timedelta(hours=1), "the new leader never called the scale-up stalled"
        replicas.tick(second)

    (event,) = _stalled(told)
    assert event.at == asked + ALLOWANCE  # the wait did not start again at the handover
    assert event.summary.startswith(f"Scale-up of {SPOT} to 3 units, asked at {asked:%Y-%m-%d %H:%M} UTC, ")
    assert event.details == {"ready units": "0", "asked": "0 -> 3 units"}

    rig.settle()  # the nodes join at last
    replicas.tick(second)
    assert _waiting(second) == {}


def test_a_dry_run_agent_does_not_wait_for_cluster_autoscaler_s_scale_ups(rig: Rig, replicas: Replicas) -> None:
    rig.add_pools()
    rig.prometheus.set_demand(CLASS, 24)
    rig.gke.autoscale(NODE_POOLS[SPOT], 3)  # cluster-autoscaler grew the pool; its nodes never join
    shadow, told = replicas.start("leadtime-0", mode="dry-run")
    started = rig.clock.now()
    while rig.clock.now() < started + timedelta(hours=1):
        replicas.tick(shadow)
        assert _waiting(shadow) == {}
    assert _stalled(told) == []

    second, told_after = _handover(replicas, shadow, mode="dry-run")
    while rig.clock.now() < started + timedelta(hours=2):
        replicas.tick(second)
        assert _waiting(second) == {}
    assert _stalled(told_after) == []


def test_units_that_arrive_within_their_lead_time_after_a_handover_raise_nothing(rig: Rig, replicas: Replicas) -> None:
    rig.add_pools()
    rig.prometheus.set_demand(CLASS, 8)
    first, first_told = replicas.start("leadtime-0")
    ramp_started = rig.clock.now()
    told: list[RecordingNotifier] = [first_told]
    current, waited = first, dict[str, float]()
    for step in range(1, 5):  # a steady ramp: a node's worth more every lead time, each arriving in its lead time
        rig.prometheus.set_demand(CLASS, 8 * step)
        for _ in range(10):
            replicas.tick(current)
            if current is not first and not waited:  # the new leader's first read: the second node in flight
                waited = _waiting(current)
            if step == 2 and rig.clock.now() == ramp_started + timedelta(minutes=15):
                current, notifier = _handover(replicas, current)  # halfway through the second node's lead time
                told.append(notifier)
        rig.settle()
    assert waited == {SPOT: (ramp_started + timedelta(minutes=11)).timestamp()}  # from its ask, saved
    assert _spot_target(rig) == 4
    for _ in range(3 * 10):
        replicas.tick(current)
    assert _waiting(current) == {}
    assert [_stalled(n) for n in told] == [[], []]

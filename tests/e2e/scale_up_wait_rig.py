"""The rig of the scale-up-wait end-to-end tests (``test_scale_up_wait_*.py``): whole live daemons (Lease election, the
real agent loop, the fake GKE, Kubernetes and Prometheus APIs, a simulated clock) on the rig's servers, ledger file and
state ConfigMap, their /metrics page read over HTTP. A test runs either one daemon, replica leadtime-0 in enforce mode,
for its whole length (``assembled``, telling ``notifier``), or agent processes started and stopped one after another
(``replicas``), each with its own notifier and page; and shares the readings below: the page's scale-up gauges, the
stalled scale-ups told, the spot pool's target and the planner memory saved in the state ConfigMap.

A test module takes the fixtures it uses by name (``replicas = scale_up_wait_rig.replicas``)."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from kubernetes import client as k8s
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from agent.daemon.live import live_parts
from agent.daemon.wiring import AssembledDaemon, assemble
from agent.notify import RecordingNotifier
from agent.planning import PlannerMemory
from agent.state.codec import decode
from agent.state.configmap import KEY
from models import AlertEvent, AlertKind
from tests.e2e.rig import CLASS, NODE_POOLS, SPOT, Rig, end_process

MINUTE = timedelta(minutes=1)
ALLOWANCE = timedelta(minutes=20)  # the rig's lead time (10m) times the default stalled_after_lead_times (2.0)
WAITING = "leadtime_pool_scale_up_waiting_since_seconds"
ALLOWED = "leadtime_pool_scale_up_stalled_after_seconds"
STATE = ("configmaps", "leadtime-state", "leadtime")  # where the leader saves its planner memory


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


@pytest.fixture
def notifier() -> RecordingNotifier:
    return RecordingNotifier()


@pytest.fixture
def assembled(rig: Rig, kube_client: k8s.ApiClient, notifier: RecordingNotifier) -> Iterator[AssembledDaemon]:
    settings = rig.settings(election=True, mode="enforce")
    parts = live_parts(settings, "e2e config", rig.clock, notifier, kube_client, CollectorRegistry())
    daemon = assemble(settings, "enforce", parts, {"POD_NAME": "leadtime-0", "POD_NAMESPACE": "leadtime"})
    daemon.endpoints.start()
    try:
        yield daemon
    finally:
        daemon.endpoints.stop()


def _page(daemon: AssembledDaemon, names: tuple[str, ...] = (WAITING, ALLOWED)) -> dict[str, dict[str, float]]:
    """The series of the gauges ``names`` (both scale-up gauges) on the daemon's /metrics page, by pool."""
    host, port = daemon.endpoints.address
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    return {name: {s.labels["pool"]: s.value for s in families[name].samples} for name in names}


def _waiting(daemon: AssembledDaemon) -> dict[str, float]:
    """``leadtime_pool_scale_up_waiting_since_seconds`` on the daemon's /metrics page, by pool."""
    return _page(daemon, (WAITING,))[WAITING]


def _stalled(notifier: RecordingNotifier) -> list[AlertEvent]:
    return [e for e in notifier.events if e.kind is AlertKind.STALLED_SCALE_UP]


def _spot_target(rig: Rig) -> int:
    return sum(mig.target_size for mig in rig.gke.pools[NODE_POOLS[SPOT]].migs)


def _saved(rig: Rig) -> PlannerMemory:
    config_map = rig.kube.get(*STATE)
    assert config_map is not None, "the leader saved no planner memory"
    return decode(config_map["data"][KEY])


def _tick_until(replicas: Replicas, daemon: AssembledDaemon, minutes: int) -> None:
    for _ in range(minutes):
        replicas.tick(daemon)


def _handover(
    replicas: Replicas, first: AssembledDaemon, mode: str = "enforce"
) -> tuple[AssembledDaemon, RecordingNotifier]:
    replicas.stop(first)
    replicas.rig.clock.advance(MINUTE)  # the old pod gone, its Lease run out: the new one leads at once
    return replicas.start("leadtime-1", mode)


def _first_leader_asks_for_three_spot_nodes(
    rig: Rig, replicas: Replicas
) -> tuple[AssembledDaemon, RecordingNotifier, datetime]:
    """The pools added and three spot nodes' worth of demand (their instances are created, no node joins), replica
    leadtime-0 started and its first tick asking for them: the leader, its notifier and when it asked."""
    rig.add_pools()
    rig.prometheus.set_demand(CLASS, 24)
    first, told = replicas.start("leadtime-0")
    replicas.tick(first)
    return first, told, rig.clock.now()


def _ask_for_three_spot_nodes(rig: Rig, assembled: AssembledDaemon) -> datetime:
    """The pools added and three spot nodes' worth of demand, the ``assembled`` daemon's first tick as leader asking
    for them: when it asked."""
    rig.add_pools()
    rig.prometheus.set_demand(CLASS, 24)  # three spot nodes' worth
    assembled.daemon.refit()
    rig.clock.advance(MINUTE)
    assembled.daemon.elect()
    assembled.daemon.tick()
    assert rig.gke.pools[NODE_POOLS[SPOT]].migs[0].target_size == 3
    return rig.clock.now()

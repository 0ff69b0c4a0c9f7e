"""A standby is ready only while it could read its demand as leader: each standby tick probes its Prometheus once
(one instant query of ``vector(1)`` without retries), and a standby whose Prometheus does not answer is not ready,
with the reason on /readyz and in its log. In a rolling update the new pods are standbys while the old leader holds
the Lease: with a wrong ``prometheus.url`` they must not turn ready, or the rollout goes on and the first of them to
lead is blind.

Two whole daemons elect on the fake Kubernetes API; the leader reads a replayed trace, the standby is assembled with
the live ``PrometheusSource`` the ``run`` command builds, pointed at a real ``prometheus`` process on 127.0.0.1 (or
at a wrong URL), and serves its endpoints on a real socket."""

from __future__ import annotations

import logging
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from kubernetes import client as k8s

from actuators import SimulatedCluster
from agent.daemon.replay import RehearsalCluster
from agent.daemon.wiring import AssembledDaemon, DaemonParts, assemble
from agent.ledger import InMemoryLedger
from agent.notify import RecordingNotifier
from agent.sources.prometheus import PrometheusSource
from agent.sources.prometheus_queries import demand_queries
from config.daemon import KubernetesApiSettings
from config.prometheus import PrometheusSettings
from config.schema import Settings
from kube import kubernetes_api_client
from models.clock import SimulatedClock
from tests.daemon.scenario import ScenarioReplica, helios_settings, scenario_replica
from tests.fakes.kube_api import FakeKubeApi
from tests.prometheus.server import PrometheusServer, free_port, prometheus_available

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
RETRY = timedelta(seconds=2)  # the election's retry period, as the runtime schedules it
TICK = timedelta(seconds=60)
BOUND = 3 * TICK  # the readiness bound: daemon.endpoints.ready_max_tick_age, 3 ticks by default


def _start(path: Path) -> PrometheusServer:
    if not prometheus_available():
        pytest.fail("prometheus and promtool must be on PATH (Debian package `prometheus`; `make prometheus`)")
    data = path / "data"
    data.mkdir()
    server = PrometheusServer(data, path)
    server.start()
    return server


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """A real Prometheus with no data: a standby's probe asks it only whether it answers."""
    server = _start(tmp_path_factory.mktemp("standby-prometheus"))
    try:
        yield server
    finally:
        server.stop()


@dataclass
class Pair:
    clock: SimulatedClock
    leader: ScenarioReplica
    standby: AssembledDaemon
    url: str  # the standby's endpoints

    def play(self, duration: timedelta) -> None:
        """An election every retry period and a tick every minute, as the runtime schedules them."""
        for _ in range(int(duration / RETRY)):
            self.clock.advance(RETRY)
            for daemon in (self.leader.assembled.daemon, self.standby.daemon):
                daemon.elect()
                if self.clock.now().second == 0:
                    daemon.tick()

    def readyz(self) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"{self.url}/readyz", timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def standby_ticks(self, outcome: str) -> float:
        value = self.standby.metrics.registry.get_sample_value(
            "leadtime_ticks_total", {"role": "standby", "outcome": outcome}
        )
        return value or 0.0


@pytest.fixture
def pair_at(kube_api: FakeKubeApi) -> Iterator[Callable[[str], Pair]]:
    """``make(prometheus_url)``: a leader that holds the Lease, and a standby reading Prometheus at the URL."""
    clients: list[k8s.ApiClient] = []
    standbys: list[AssembledDaemon] = []

    def make(prometheus_url: str) -> Pair:
        clock = SimulatedClock(T0)
        settings: Settings = helios_settings(kube_api.url)
        cluster = SimulatedCluster(settings.pool_specs(), clock)
        clients.extend(kubernetes_api_client(KubernetesApiSettings(api_url=kube_api.url)) for _ in range(2))
        leader = scenario_replica("leadtime-a", settings, clock, cluster, "enforce", clients[-2])
        leader.assembled.daemon.elect()  # it takes the Lease first: the other one is a standby
        prometheus_settings = PrometheusSettings(url=prometheus_url)
        source = PrometheusSource.from_settings(
            prometheus_settings, demand_queries(settings.demand_class_models(), prometheus_settings)
        )
        parts = DaemonParts(
            source=source,
            actuator=RehearsalCluster(cluster, clock),
            ledger=InMemoryLedger(),
            notifier=RecordingNotifier(),
            clock=clock,
            kube=clients[-1],
        )
        standby = assemble(settings, "enforce", parts, {"POD_NAME": "leadtime-b", "POD_NAMESPACE": "leadtime"})
        standby.endpoints.start()
        standbys.append(standby)
        host, port = standby.endpoints.address
        return Pair(clock, leader, standby, f"http://{host}:{port}")

    yield make
    for standby in standbys:
        standby.endpoints.stop()
    for client in clients:
        client.close()


def _query_requests(server: PrometheusServer) -> float:
    """How many instant queries the Prometheus process has answered, from its own metrics."""
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=5) as response:
        text = response.read().decode()
    prefix = 'prometheus_http_requests_total{code="200",handler="/api/v1/query"}'
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix))


def _wrong_urls(server: PrometheusServer) -> dict[str, str]:
    return {
        "nothing listens": f"http://127.0.0.1:{free_port()}",
        "a path Prometheus does not serve": f"{server.url}/prometheus",
    }


@pytest.mark.parametrize("wrong", ["nothing listens", "a path Prometheus does not serve"])
def test_a_standby_with_a_wrong_prometheus_url_is_never_ready(
    wrong: str, prometheus: PrometheusServer, pair_at: Callable[[str], Pair], caplog: pytest.LogCaptureFixture
) -> None:
    url = _wrong_urls(prometheus)[wrong]
    pair: Pair = pair_at(url)
    caplog.set_level(logging.INFO, logger="agent.daemon.service")

    pair.play(5 * TICK)

    assert pair.leader.assembled.elector.is_leader(pair.clock.now())
    assert not pair.standby.elector.is_leader(pair.clock.now())
    status, body = pair.readyz()
    assert status == 503
    assert body.startswith(f"no successful tick yet; last failure: cannot use Prometheus at {url}: ")
    expected = "cannot connect to Prometheus" if wrong == "nothing listens" else "Prometheus answered HTTP 404"
    assert expected in body
    assert pair.standby.health.liveness(pair.clock.now()).ready  # unready, not restarted
    assert pair.standby_ticks("failed") == 5
    assert pair.standby_ticks("ok") == 0
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and "standby not ready to lead" in r.message]
    assert len(warned) == 1  # once, not every tick
    assert f"cannot use Prometheus at {url}" in warned[0].message
    leader = pair.leader.assembled.health.readiness(pair.clock.now())
    assert leader.ready, leader.detail  # the leader reads its own demand: nothing changes for it


def test_a_standby_whose_prometheus_answers_is_ready_with_one_probe_a_tick(
    prometheus: PrometheusServer, pair_at: Callable[[str], Pair]
) -> None:
    pair: Pair = pair_at(prometheus.url)
    before = _query_requests(prometheus)

    pair.play(5 * TICK)

    assert not pair.standby.elector.is_leader(pair.clock.now())
    status, body = pair.readyz()
    assert (status, body) == (200, "last successful tick 0s ago\n")
    assert pair.standby_ticks("ok") == 5
    assert _query_requests(prometheus) - before == 5  # one probe a standby tick, nothing more


def test_a_standby_whose_prometheus_goes_away_turns_unready_after_the_bound_and_ready_when_it_is_back(
    tmp_path: Path, pair_at: Callable[[str], Pair], caplog: pytest.LogCaptureFixture
) -> None:
    server = _start(tmp_path)
    try:
        pair: Pair = pair_at(server.url)
        caplog.set_level(logging.INFO, logger="agent.daemon.service")
        pair.play(2 * TICK)
        assert pair.readyz()[0] == 200

        server.stop()
        pair.play(BOUND)  # the last success is 3 minutes old: within the bound, as for a leader
        assert pair.readyz()[0] == 200
        pair.play(TICK)
        status, body = pair.readyz()
        assert status == 503
        assert body.startswith("last successful tick 240s ago (bound 180s); last failure: cannot use Prometheus at ")
        assert "cannot connect to Prometheus" in body

        server.start()  # the same port
        pair.play(TICK)
        assert pair.readyz() == (200, "last successful tick 0s ago\n")
        assert pair.standby_ticks("failed") == 4
        lines = [r.message for r in caplog.records if r.name == "agent.daemon.service" and "standby" in r.message]
        assert len(lines) == 2
        assert lines[0].startswith("standby not ready to lead, it could not read its demand as leader: cannot use")
        assert lines[1] == "standby ready to lead: its Prometheus answers again"
    finally:
        server.stop()

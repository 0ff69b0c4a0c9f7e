"""/healthz, /readyz and a standby's contact with the Kubernetes API are aged on the monotonic clock: a wall clock
stepped back (NTP, a VM restored) does not keep a replica whose every tick fails ready, and one stepped forward
during a tick does not fail liveness (the kubelet would restart the leader in the middle of its tick)."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client as k8s

from actuators import SimulatedCluster
from agent.daemon.election import Elector, SoleReplicaElector
from agent.daemon.endpoints import EndpointServer
from agent.daemon.health import HealthState
from agent.daemon.lease import LeaseElector
from agent.daemon.metrics import DaemonMetrics
from agent.daemon.service import Daemon
from agent.notify import RecordingNotifier
from kube import Leases
from models import MetricsUnavailable
from tests.daemon.conftest import DEADLINE, LEASE, LEASE_NAME, NAMESPACE
from tests.daemon.fake_loop import FakeAgentLoop
from tests.daemon.links import CuttableLink
from tests.daemon.replicas import POOL
from tests.fakes.stepping_clock import SteppingClock

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
TICK = timedelta(minutes=1)
READY_BOUND = timedelta(minutes=3)
LIVE_BOUND = timedelta(minutes=10)


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


class Replica:
    """One daemon with its endpoints served on 127.0.0.1, on a clock whose wall time can be stepped."""

    def __init__(self, clock: SteppingClock, loop: FakeAgentLoop, elector: Elector) -> None:
        self.health = HealthState(READY_BOUND, LIVE_BOUND, clock.monotonic)
        metrics = DaemonMetrics()
        self.daemon = Daemon(
            loop,
            elector,
            clock=clock,
            metrics=metrics,
            health=self.health,
            notifier=RecordingNotifier(),
            mode="enforce",
            contact_bound=READY_BOUND,
        )
        self.server = EndpointServer("127.0.0.1", 0, self.health, metrics, clock)
        host, port = self.server.address
        self.url = f"http://{host}:{port}"


@pytest.fixture
def clock() -> SteppingClock:
    return SteppingClock(T0)


@pytest.fixture
def served() -> Iterator[Callable[[Replica], Replica]]:
    started: list[EndpointServer] = []

    def serve(replica: Replica) -> Replica:
        replica.server.start()
        started.append(replica.server)
        return replica

    yield serve
    for server in started:
        server.stop()


def _loop(clock: SteppingClock) -> FakeAgentLoop:
    cluster = SimulatedCluster([POOL], clock, initial_units={POOL.pool_id: 1})
    return FakeAgentLoop(cluster, POOL.pool_id, lambda now: 2)


def test_a_leader_failing_every_tick_after_a_step_back_turns_unready_within_the_bound(
    clock: SteppingClock, served: Callable[[Replica], Replica]
) -> None:
    loop = _loop(clock)
    leader = served(Replica(clock, loop, SoleReplicaElector("replica-a")))
    leader.daemon.elect()
    leader.daemon.tick()
    assert _get(f"{leader.url}/readyz")[0] == 200
    clock.step(-timedelta(hours=1))
    loop.fail_with = MetricsUnavailable("gpu-a100", "Prometheus answered 503")
    for _ in range(5):  # five minutes of failing ticks, all dated an hour before the last success
        clock.run(TICK)
        leader.daemon.tick()
    status, body = _get(f"{leader.url}/readyz")
    assert status == 503
    assert "last successful tick 300s ago (bound 180s)" in body
    assert "Prometheus answered 503" in body


def test_a_step_forward_during_a_tick_does_not_fail_liveness(
    clock: SteppingClock, served: Callable[[Replica], Replica]
) -> None:
    loop = _loop(clock)
    leader = served(Replica(clock, loop, SoleReplicaElector("replica-a")))
    seen: list[tuple[int, str]] = []

    def stepped_mid_tick() -> None:
        clock.step(timedelta(minutes=11))
        clock.run(timedelta(seconds=20))
        seen.append(_get(f"{leader.url}/healthz"))
        seen.append(_get(f"{leader.url}/readyz"))

    loop.during_tick = stepped_mid_tick
    leader.daemon.elect()
    leader.daemon.tick()
    assert seen == [(200, "ok\n"), (503, "no successful tick yet\n")]
    assert loop.acted_at  # the tick ran to its end, and acted
    assert _get(f"{leader.url}/readyz") == (200, "last successful tick 0s ago\n")


def test_a_standby_cut_off_from_the_api_after_a_step_back_turns_unready_within_the_bound(
    clock: SteppingClock,
    served: Callable[[Replica], Replica],
    link_to: Callable[[], CuttableLink],
    api_client_for: Callable[[str], k8s.ApiClient],
) -> None:
    def elector(identity: str, link: CuttableLink) -> LeaseElector:
        return LeaseElector(
            Leases(api_client_for(link.url), timedelta(seconds=0.3)),
            name=LEASE_NAME,
            namespace=NAMESPACE,
            identity=identity,
            lease_duration=LEASE,
            renew_deadline=DEADLINE,
            monotonic=clock.monotonic,
        )

    leader_elector = elector("replica-a", link_to())
    assert leader_elector.step(clock.now()).leading
    link = link_to()
    standby = served(Replica(clock, _loop(clock), elector("replica-b", link)))
    assert not standby.daemon.elect().leading
    standby.daemon.tick()
    assert _get(f"{standby.url}/readyz")[0] == 200
    link.cut()
    clock.step(-timedelta(hours=1))
    # Seven minutes without an answer from the API, dated an hour before the last contact: its standby ticks fail
    # once the contact is older than its bound (3 minutes), and readiness once they have failed for its bound.
    for _ in range(7):
        clock.run(TICK)
        assert standby.daemon.elect().error is not None
        standby.daemon.tick()
    status, body = _get(f"{standby.url}/readyz")
    assert status == 503
    assert body.startswith("last successful tick 240s ago (bound 180s); last failure: Kubernetes API unreachable")

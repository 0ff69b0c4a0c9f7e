"""``leadtime run`` as real processes: two replicas against the fake Kubernetes API elect one leader, serve their
endpoints, and on SIGTERM finish their tick, hand the lease over and exit 0."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.fakes.kube_api import FakeKubeApi

ROOT = Path(__file__).resolve().parents[2]
LEADTIME = Path(sys.executable).parent / "leadtime"
TRACE = ROOT / "data" / "helios-earth" / "demand_5min.csv.gz"
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


# Generous deadlines: a replica is ready within about 2 s on an idle 2-core machine and about 3 s beside a CPU-bound
# process (bench/bench_startup.py); the standby leads within a second of the hand-over. Before the daemon's start
# was made light, a busy machine stretched readiness past 30 s: 120 s leaves room for far worse.
def _wait_for(predicate: object, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def _metric(port: int, name: str) -> float | None:
    _, body = _get(f"http://127.0.0.1:{port}/metrics")
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


class Replica:
    def __init__(self, name: str, config: Path, port: int, log: Path) -> None:
        self.name, self.port, self.log = name, port, log
        env = {**os.environ, "POD_NAME": name, "POD_NAMESPACE": "leadtime"}
        self.process = subprocess.Popen(
            [str(LEADTIME), "--log-level", "INFO", "run", "--config", str(config), "--replay", str(TRACE)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log.open("w"),
        )

    def leads(self) -> bool:
        return _metric(self.port, "leadtime_is_leader") == 1.0

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=120)


@pytest.fixture
def replicas(kube_api: FakeKubeApi, tmp_path: Path) -> Iterator[list[Replica]]:
    started: list[Replica] = []
    for name in ("leadtime-a", "leadtime-b"):
        port = _free_port()
        settings = yaml.safe_load((ROOT / "config/examples/helios-earth.yaml").read_text())
        settings["loop"] = {"tick_interval": "1s"}
        # Election and hand-over do not depend on the model; the configured one would fit LightGBM for half a minute.
        settings["forecast"] = {"model": "last-value"}
        settings["daemon"] = {
            "mode": "enforce",
            "endpoints": {"bind_address": "127.0.0.1", "port": port, "ready_max_tick_age": "10s"},
            "leader_election": {"lease_duration": "3s", "renew_deadline": "2s", "retry_period": "0.5s"},
            "kubernetes": {"api_url": kube_api.url, "request_timeout": "1s"},
        }
        config = tmp_path / f"{name}.yaml"
        config.write_text(json.dumps(settings))
        started.append(Replica(name, config, port, tmp_path / f"{name}.log"))
    try:
        yield started
    finally:
        for replica in started:
            if replica.process.poll() is None:
                replica.process.kill()
                replica.process.wait(timeout=10)


def test_two_processes_elect_one_leader_and_hand_over_on_sigterm(
    replicas: list[Replica], kube_api: FakeKubeApi
) -> None:
    a, b = replicas
    _wait_for(lambda: _get(f"http://127.0.0.1:{a.port}/readyz")[0] == 200)
    _wait_for(lambda: _get(f"http://127.0.0.1:{b.port}/readyz")[0] == 200)
    assert _get(f"http://127.0.0.1:{a.port}/healthz") == (200, "ok\n")
    assert [a.leads(), b.leads()].count(True) == 1
    leader, standby = (a, b) if a.leads() else (b, a)
    _wait_for(lambda: (_metric(leader.port, 'leadtime_ticks_total{outcome="ok",role="leader"}') or 0) >= 2)
    assert _metric(standby.port, 'leadtime_ticks_total{outcome="ok",role="leader"}') is None

    assert leader.stop() == 0  # SIGTERM: the tick in progress finishes, the lease is released
    log = leader.log.read_text()
    assert "received SIGTERM" in log
    assert "daemon stopped and handed over the lease" in log
    assert "Traceback" not in log
    _wait_for(standby.leads)  # the lease was released (the holder below says who leads now)

    # A rehearsal elects on a Lease of its own, never the one a real daemon leads with, and keeps its simulated
    # pools' memory and decisions out of the cluster: no state ConfigMap, no decision Events.
    assert kube_api.get("leases", "leadtime", "leadtime", group="coordination.k8s.io") is None
    lease = kube_api.get("leases", "leadtime-rehearsal", "leadtime", group="coordination.k8s.io")
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == standby.name
    assert kube_api.get("configmaps", "leadtime-state", "leadtime") is None
    reasons = [e["reason"] for e in kube_api.list("events", namespace="leadtime")]
    assert reasons.count("LeaderElected") == 2
    assert set(reasons) == {"LeaderElected"}, reasons
    assert standby.stop() == 0

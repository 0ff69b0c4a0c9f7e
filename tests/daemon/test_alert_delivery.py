"""A tick never waits on Slack: the daemon's alerts go through the delivery queue the ``run`` command wires, to the
real slack_sdk client and the local webhook receiver. A tick that fails and alerts while the webhook hangs
finishes while the receiver still holds the request; the alert arrives once the webhook answers."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from actuators import SimulatedCluster
from agent.daemon.election import SoleReplicaElector
from agent.daemon.health import HealthState
from agent.daemon.metrics import DaemonMetrics
from agent.daemon.service import Daemon
from agent.notify.queued import queued_slack_notifier
from config.alerts import AlertSettings
from models import MetricsUnavailable
from models.clock import SimulatedClock
from tests.daemon.fake_loop import FakeAgentLoop
from tests.daemon.replicas import POOL
from tests.fakes.slack_receiver import WEBHOOK_PATH, Answer, SlackReceiver

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]
LEADTIME = Path(sys.executable).parent / "leadtime"
TRACE = ROOT / "data" / "helios-earth" / "demand_5min.csv.gz"
OUTAGE = "2020-05-10T12:00+08:00"  # the trace's collector was down all that day
SECRET = WEBHOOK_PATH.rsplit("/", 1)[-1]
BOUND_S = 30.0  # generous: the webhook hangs for a minute, so a tick that waited on it fails here


def test_a_tick_that_alerts_does_not_wait_for_a_hanging_webhook() -> None:
    clock = SimulatedClock(T0)
    released = threading.Event()
    backstop = threading.Timer(60.0, released.set)
    backstop.start()
    with SlackReceiver() as receiver:
        receiver.answer(Answer(hold=released))
        settings = AlertSettings(request_timeout=timedelta(seconds=120))
        slack = queued_slack_notifier(settings, clock, {"LEADTIME_SLACK_WEBHOOK_URL": receiver.url})
        assert slack is not None
        elector = SoleReplicaElector("replica-a")
        cluster = SimulatedCluster([POOL], clock)
        loop = FakeAgentLoop(cluster, POOL.pool_id, lambda _: 1, fail_with=MetricsUnavailable("gpu", "no data"))
        daemon = Daemon(
            loop,
            elector,
            clock=clock,
            metrics=DaemonMetrics(),
            health=HealthState(timedelta(minutes=3)),
            notifier=slack,
            mode="dry-run",
            contact_bound=timedelta(seconds=10),
        )
        daemon.elect()
        ticks_done = threading.Event()

        def two_ticks() -> None:
            daemon.tick()  # fails, alerts: the first post hangs in the webhook
            assert receiver.wait_for(1)
            clock.advance(timedelta(minutes=1))
            daemon.tick()  # fails and alerts again while the first post still hangs
            ticks_done.set()

        ticker = threading.Thread(target=two_ticks, daemon=True)
        ticker.start()
        assert ticks_done.wait(BOUND_S), "a tick waited on Slack"
        assert not released.is_set() and receiver.count() == 1
        released.set()
        assert slack.close(timedelta(seconds=BOUND_S))
        backstop.cancel()
    [message] = receiver.received  # the second alert is the same condition: de-duplicated, not sent twice
    assert "tick failed, pools held" in message["text"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _metric(port: int, name: str) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            body = response.read().decode()
    except OSError:
        return None
    values = [float(line.split()[1]) for line in body.splitlines() if line.startswith(name + " ")]
    return values[0] if values else None


def _leader_ticks(port: int) -> float:
    """Leader ticks run, whether they planned or, every class's demand missing, held every pool (blind)."""
    outcomes = ("ok", "blind")
    return sum(_metric(port, f'leadtime_ticks_total{{outcome="{o}",role="leader"}}') or 0 for o in outcomes)


@pytest.mark.slow
def test_the_daemon_alerts_through_the_queue_and_stops_within_the_flush_deadline(tmp_path: Path) -> None:
    """``leadtime run`` replaying the trace's collector outage alerts about missing data; the webhook hangs on it.
    The process keeps ticking, exposes the queue on /metrics, and on SIGTERM gives up on Slack at its deadline."""
    released = threading.Event()
    port = _free_port()
    settings = yaml.safe_load((ROOT / "config/examples/helios-earth.yaml").read_text())
    settings["forecast"] = {"model": "last-value"}
    settings["loop"] = {"tick_interval": "1s"}
    # the stop gives up on the hung webhook after the flush deadline: a short one, as the test waits it out
    settings["alerts"] = {"request_timeout": "120s", "shutdown_flush_timeout": "200ms"}
    settings["daemon"] = {
        "endpoints": {"bind_address": "127.0.0.1", "port": port},
        "leader_election": {"enabled": False},
    }
    config = tmp_path / "leadtime.yaml"
    config.write_text(json.dumps(settings))
    log = tmp_path / "leadtime.log"
    with SlackReceiver() as receiver:
        receiver.answer(Answer(hold=released))
        command = [str(LEADTIME), "--log-level", "INFO", "run", "--config", str(config), "--replay", str(TRACE)]
        process = subprocess.Popen(
            [*command, "--replay-from", OUTAGE],
            env={**os.environ, "LEADTIME_SLACK_WEBHOOK_URL": receiver.url},
            stdout=subprocess.DEVNULL,
            stderr=log.open("w"),
        )
        try:
            assert receiver.wait_for(1, timeout_s=120), log.read_text()
            first = _leader_ticks(port)
            deadline = time.monotonic() + 120
            while _leader_ticks(port) < first + 2 and time.monotonic() < deadline:
                released.wait(0.1)
            assert _leader_ticks(port) >= first + 2, "ticks stopped while Slack hung"
            assert _metric(port, "leadtime_alerts_queued") is not None
            assert _metric(port, "leadtime_alerts_dropped_total") == 0
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=60) == 0
        finally:
            released.set()
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
    written = log.read_text()
    assert "undelivered" in written and "a delivery still under way" in written
    assert "Metrics missing or stale" in receiver.received[0]["text"]
    assert SECRET not in written

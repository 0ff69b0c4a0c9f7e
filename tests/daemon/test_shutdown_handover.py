"""A stop hands the lease over only once the tick in progress has finished: a tick still running after the
shutdown wait may have a cloud write on its way, so the lease is left to lapse and a standby waits its full
duration, as for a replica that died."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

import pytest

from agent.daemon.endpoints import EndpointServer
from agent.daemon.health import HealthState
from agent.daemon.metrics import DaemonMetrics
from agent.daemon.runtime import DaemonRuntime, Schedule
from agent.daemon.service import Daemon
from agent.notify import RecordingNotifier
from models.clock import SystemClock
from tests.daemon.test_runtime import ReleasingElector, SlowLoop


def _stopped_during_a_tick(loop: SlowLoop, shutdown_wait: timedelta) -> int:
    """Start a runtime, stop it while its first tick runs, and say how many times it released the lease."""
    clock, elector, metrics = SystemClock(), ReleasingElector(), DaemonMetrics()
    health = HealthState(timedelta(seconds=10))
    daemon = Daemon(
        loop,
        elector,
        clock=clock,
        metrics=metrics,
        health=health,
        notifier=RecordingNotifier(),
        mode="enforce",
        contact_bound=timedelta(seconds=10),
    )
    schedule = Schedule(
        tick_interval=timedelta(seconds=30),
        refit_interval=timedelta(hours=1),
        election_interval=timedelta(seconds=0.1),
        misfire_grace=timedelta(seconds=1),
        daily_report_at="08:00",
    )
    endpoints = EndpointServer("127.0.0.1", 0, health, metrics, clock)
    runtime = DaemonRuntime(daemon, schedule, endpoints, shutdown_wait=shutdown_wait)
    runtime.start()
    assert loop.in_tick.wait(5)
    runtime.request_stop()
    runtime.stop()
    return elector.released


def test_a_tick_outliving_the_shutdown_wait_keeps_the_lease_until_it_lapses(caplog: pytest.LogCaptureFixture) -> None:
    loop = SlowLoop(seconds=1.0)
    with caplog.at_level(logging.WARNING):
        released = _stopped_during_a_tick(loop, timedelta(seconds=0.1))
    assert not loop.finished  # the stop did not wait for the tick
    assert released == 0  # the holder stays: no standby takes over while the tick and its writes may still run
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("not handed over" in w and "after the lease duration" in w for w in warnings), warnings


def test_a_tick_finished_within_the_shutdown_wait_hands_the_lease_over() -> None:
    loop = SlowLoop(seconds=0.3)
    released = _stopped_during_a_tick(loop, timedelta(seconds=5))
    assert loop.finished == loop.started  # the stop waited for the tick
    assert released == 1


def test_the_daemon_keeps_the_lease_while_a_tick_holds_the_loop() -> None:
    """Whoever calls it, ``Daemon.release`` hands nothing over while a tick still runs."""
    loop, elector = SlowLoop(seconds=1.0), ReleasingElector()
    health = HealthState(timedelta(seconds=10))
    daemon = Daemon(
        loop,
        elector,
        clock=SystemClock(),
        metrics=DaemonMetrics(),
        health=health,
        notifier=RecordingNotifier(),
        mode="enforce",
        contact_bound=timedelta(seconds=10),
    )
    daemon.elect()
    ticking = threading.Thread(target=daemon.tick)
    ticking.start()
    assert loop.in_tick.wait(5)
    assert daemon.stop_working(timeout=0.1) is False
    assert daemon.release() is False
    assert elector.released == 0
    ticking.join(5)
    assert daemon.release() is True  # once the tick has ended
    assert elector.released == 1

"""The APScheduler runtime with real threads and short intervals: ticks on schedule, never overlapping, and a stop
that lets the tick in progress finish before the lease is handed over."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest

from agent.daemon.election import SoleReplicaElector
from agent.daemon.endpoints import EndpointServer
from agent.daemon.health import HealthState
from agent.daemon.metrics import DaemonMetrics
from agent.daemon.runtime import DaemonRuntime, Schedule
from agent.daemon.service import Daemon
from agent.notify import RecordingNotifier
from models.clock import SystemClock
from tests.daemon.fake_loop import FakeTickReport


@dataclass
class SlowLoop:
    """Each tick takes ``seconds``; records starts, ends and the most ticks ever running at once."""

    seconds: float
    started: list[datetime] = field(default_factory=list)
    finished: list[datetime] = field(default_factory=list)
    refits: int = 0
    running: int = 0
    most_at_once: int = 0
    in_tick: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run_once(self, now: datetime) -> FakeTickReport:
        with self._lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            self.started.append(now)
        self.in_tick.set()
        threading.Event().wait(self.seconds)  # stands in for the work of a tick
        with self._lock:
            self.running -= 1
            self.finished.append(now)
        return FakeTickReport()

    def refit(self, now: datetime) -> None:
        self.refits += 1


class ReleasingElector(SoleReplicaElector):
    def __init__(self) -> None:
        super().__init__("replica-a")
        self.released = 0

    def release(self, now: datetime) -> bool:
        self.released += 1
        return True


def _runtime(
    loop: SlowLoop, tick: float, checks: Sequence[Callable[[], Sequence[str]]] = ()
) -> tuple[DaemonRuntime, ReleasingElector, DaemonMetrics]:
    clock = SystemClock()
    elector = ReleasingElector()
    metrics = DaemonMetrics()
    health = HealthState(timedelta(seconds=10))
    daemon = Daemon(
        loop,
        elector,
        clock=clock,
        metrics=metrics,
        health=health,
        notifier=RecordingNotifier(),
        mode="dry-run",
        contact_bound=timedelta(seconds=10),
    )
    schedule = Schedule(
        tick_interval=timedelta(seconds=tick),
        refit_interval=timedelta(hours=1),
        election_interval=timedelta(seconds=0.1),
        misfire_grace=timedelta(seconds=1),
        daily_report_at="08:00",
    )
    endpoints = EndpointServer("127.0.0.1", 0, health, metrics, clock)
    return DaemonRuntime(daemon, schedule, endpoints, checks), elector, metrics


def test_ticks_run_on_schedule_one_at_a_time() -> None:
    loop = SlowLoop(seconds=0.25)
    runtime, _, metrics = _runtime(loop, tick=0.1)
    runtime.start()
    runtime.wait(1.2)
    runtime.stop()
    assert loop.most_at_once == 1  # max_instances=1: a slow tick is never overlapped
    assert 3 <= len(loop.finished) <= 6  # ~1.2 s of 0.25 s ticks; skipped slots are dropped, not queued
    assert loop.refits == 1  # refit at start, then hourly
    assert metrics.registry.get_sample_value("leadtime_ticks_total", {"role": "leader", "outcome": "ok"}) == len(
        loop.finished
    )


def test_an_overrunning_tick_is_reported_once_with_the_slots_it_skipped(caplog: pytest.LogCaptureFixture) -> None:
    loop = SlowLoop(seconds=0.8)
    runtime, _, metrics = _runtime(loop, tick=0.1)
    with caplog.at_level(logging.INFO):
        runtime.start()
        runtime.wait(1.2)
        runtime.stop()
    skipped = metrics.registry.get_sample_value("leadtime_ticks_skipped_total")
    assert skipped is not None and skipped >= 2  # 0.8 s ticks on a 0.1 s schedule
    assert not [r for r in caplog.records if "maximum number of running instances" in r.getMessage()]
    overruns = [r for r in caplog.records if "scheduled ticks are skipped until it finishes" in r.getMessage()]
    ends = [r for r in caplog.records if "scheduled ticks were skipped meanwhile" in r.getMessage()]
    assert 1 <= len(overruns) <= len(loop.finished)  # once per overrunning tick, not once per skipped slot
    assert len(ends) == len(overruns)
    assert sum(int(r.getMessage().split("; ")[1].split()[0]) for r in ends) == skipped


def test_stop_lets_the_tick_in_progress_finish_then_hands_over() -> None:
    loop = SlowLoop(seconds=0.6)
    runtime, elector, _ = _runtime(loop, tick=30)
    runtime.start()
    assert loop.in_tick.wait(5)
    runtime.request_stop()
    runtime.stop()
    assert len(loop.started) == 1
    assert loop.finished == loop.started  # nothing half-done
    assert elector.released == 1


def test_start_up_checks_run_once_beside_the_ticks_and_their_findings_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[str] = []

    def finds() -> list[str]:
        calls.append("finds")
        return ["class team-a: no node offered the resource 'nvidia_com_gpus'"]

    def breaks() -> list[str]:
        calls.append("breaks")
        raise RuntimeError("Prometheus went away")

    loop = SlowLoop(seconds=0.05)
    runtime, _, _ = _runtime(loop, tick=0.1, checks=[breaks, finds])
    with caplog.at_level(logging.WARNING):
        runtime.start()
        runtime.wait(0.8)
        runtime.stop()
    assert calls == ["breaks", "finds"]  # once each, the failing one no obstacle to the next
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "configuration check: class team-a: no node offered the resource 'nvidia_com_gpus'" in warnings
    assert any("start-up check failed" in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)
    assert len(loop.finished) >= 3  # the ticks went on

"""A refit's history read runs beside the ticks, within its own deadline.

The daemon's refit reads ``forecast.history`` (seven days by default) class by class. Read while holding the lock
every tick takes, a Prometheus slow to answer range queries that long held every tick off for the whole read:
scale-ups, drains and budget enforcement waited for it (six classes each answered after 1.5 s held a 2 s tick off for
9 s). The read now runs outside that lock, only the model's copy and its swap hold ticks off, and it ends within half
of ``forecast.refit_interval``: a read cut there fails the refit, and the models in use are kept.

A small local HTTP server stands in for Prometheus and records every request; the real prometheus-api-client and
requests session talk to it. It answers an instant query (``/api/v1/query``) with a vector and a range query
(``/api/v1/query_range``) with a matrix of the requested range on its step grid, as the Prometheus HTTP API
reference documents them ("Instant queries", "Range queries": ``{"status": "success", "data": {"resultType":
"vector"|"matrix", "result": [...]}}``, each sample value a string). A range query over 12 hours or more (the refit's)
waits, while the test holds it, until the test lets it go: a Prometheus slow on long ranges.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from actuators import SimulatedCluster
from agent.daemon.wiring import AssembledDaemon, DaemonParts, assemble
from agent.ledger import InMemoryLedger
from agent.notify import RecordingNotifier
from agent.sources.prometheus import PrometheusSource
from agent.sources.prometheus_queries import demand_queries
from config import settings_from_mapping
from config.schema import Settings
from forecasting import PersistenceForecaster
from models.clock import SimulatedClock
from models.errors import RefitReadCut
from tests.fakes.http_server import serving

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
CLASSES = [f"team-{i}" for i in range(4)]
LONG_RANGE_S = 12 * 3600  # the refit reads forecast.history (1d here); a tick reads far less
HELD_AT_MOST_S = 60.0  # a held range query answers after this at the latest, so a failing test ends


@dataclass
class SlowOnLongRanges:
    """``hold``: range queries over ``LONG_RANGE_S`` or more wait until ``release`` is set; ``long_read`` is set
    when the first such query arrives."""

    hold: bool = False
    release: threading.Event = field(default_factory=threading.Event)
    long_read: threading.Event = field(default_factory=threading.Event)


class _Handler(BaseHTTPRequestHandler):
    state: SlowOnLongRanges
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        url = urlparse(self.path)
        args = {k: v[-1] for k, v in parse_qs(url.query).items()}
        if url.path == "/api/v1/query":
            sample = {"metric": {}, "value": [float(args.get("time", time.time())), "4"]}
            self._reply({"status": "success", "data": {"resultType": "vector", "result": [sample]}})
            return
        start, end, step = (int(float(args[k])) for k in ("start", "end", "step"))
        if end - start >= LONG_RANGE_S and self.state.hold:
            self.state.long_read.set()
            self.state.release.wait(HELD_AT_MOST_S)
        values = [[t, "4"] for t in range(start, end + 1, step)]
        self._reply(
            {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": values}]}}
        )

    def _reply(self, body: object) -> None:
        payload = json.dumps(body).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:
            return  # the client gave up waiting (its deadline passed)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def prometheus() -> Iterator[tuple[str, SlowOnLongRanges]]:
    state = SlowOnLongRanges()
    try:
        with serving(type("Handler", (_Handler,), {"state": state})) as url:
            yield url, state
    finally:
        state.release.set()


def _settings(url: str, tick: str, refit_interval: str) -> Settings:
    pool = {"id": "shared", "kind": "gpu-node-pool", "tier": "on-demand", "chips_per_unit": 8, "min_units": 0,
            "max_units": 20, "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": CLASSES}  # fmt: skip
    config: dict[str, Any] = {
        "demand_classes": [{"name": name} for name in CLASSES],
        "pools": [pool],
        "forecast": {"model": "persistence", "history": "1d", "step": "5m", "refit_interval": refit_interval},
        "loop": {"tick_interval": tick},
        "ledger": {"backend": "memory"},
        # a port of its own: the default 0.0.0.0:8080 collides with anything else on the machine using it
        "daemon": {"leader_election": {"enabled": False}, "endpoints": {"bind_address": "127.0.0.1", "port": 0}},
        "prometheus": {"url": url, "timeout": "30s", "retries": 2, "retry_backoff_s": 0},
    }
    return settings_from_mapping(config, source="test config")


def _daemon(settings: Settings, clock: SimulatedClock) -> AssembledDaemon:
    assert settings.prometheus is not None
    queries = demand_queries(settings.demand_class_models(), settings.prometheus)
    parts = DaemonParts(
        source=PrometheusSource.from_settings(settings.prometheus, queries),
        actuator=SimulatedCluster(settings.pool_specs(), clock),
        ledger=InMemoryLedger(),
        notifier=RecordingNotifier(),
        clock=clock,
        forecaster=PersistenceForecaster(),
    )
    assembled = assemble(settings, "enforce", parts, {"POD_NAME": "replica-a", "POD_NAMESPACE": "leadtime"})
    assembled.endpoints.stop()  # the jobs are driven directly; no socket needed
    return assembled


def _in_thread(job: Any) -> threading.Thread:
    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    return thread


def test_a_tick_finishes_within_its_interval_while_the_refit_reads_the_history(
    prometheus: tuple[str, SlowOnLongRanges],
) -> None:
    url, state = prometheus
    tick_interval = 10.0
    clock = SimulatedClock(NOW)
    assembled = _daemon(_settings(url, f"{tick_interval:g}s", "1h"), clock)
    daemon, agent, metrics = assembled.daemon, assembled.loop.agent, assembled.metrics
    daemon.elect()
    daemon.refit()
    daemon.tick()
    fitted = agent.parts.forecaster

    state.hold = True  # the next history read waits until the test lets it go
    clock.advance(timedelta(hours=1))
    refit = _in_thread(daemon.refit)
    assert state.long_read.wait(HELD_AT_MOST_S), "the refit never read the history"
    clock.advance(timedelta(seconds=tick_interval))
    started = time.monotonic()
    tick = _in_thread(daemon.tick)
    tick.join(tick_interval)
    took = time.monotonic() - started
    assert not tick.is_alive(), f"the tick waited for the refit's history read ({took:.1f} s so far)"
    assert metrics.last_success._value.get() == clock.now().timestamp()  # it succeeded, on the model fitted before
    assert agent.parts.forecaster is fitted

    state.release.set()
    refit.join(HELD_AT_MOST_S)
    assert not refit.is_alive()
    assert agent.parts.forecaster is not fitted  # the refit went on and swapped its model in
    assert agent.last_refit == NOW + timedelta(hours=1)


def test_a_refit_whose_history_read_outlasts_its_deadline_ends_and_keeps_the_models(
    prometheus: tuple[str, SlowOnLongRanges],
) -> None:
    url, state = prometheus
    clock = SimulatedClock(NOW)
    assembled = _daemon(_settings(url, "1s", "2s"), clock)  # the refit's read may take half of refit_interval: 1 s
    daemon, agent, metrics = assembled.daemon, assembled.loop.agent, assembled.metrics
    daemon.elect()
    daemon.refit()
    fitted, fitted_at = agent.parts.forecaster, agent.last_refit

    state.hold = True  # Prometheus answers no range query over the history until the test ends
    clock.advance(timedelta(seconds=2))
    started = time.monotonic()
    daemon.refit()
    took = time.monotonic() - started

    assert took < 10.0, f"the refit's history read took {took:.1f} s against a deadline of 1 s"
    assert metrics.errors.labels("RefitReadCut")._value.get() == 1
    assert agent.parts.forecaster is fitted and agent.last_refit == fitted_at  # the models in use are kept
    with pytest.raises(RefitReadCut, match=r"did not finish within 1s, half of forecast.refit_interval") as cut:
        agent.stage_refit(clock.now())
    assert "classes not read (team-" in str(cut.value)
    assert "check its load, or shorten forecast.history" in str(cut.value)

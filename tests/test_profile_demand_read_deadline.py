"""The demand history a paced budget's burst profile is read from, once an hour in the tick's ``act``, is read within
its own share of the tick (``agent.burst_history.DEMAND_HISTORY_READ_SHARE``), as the on-prem capacity history after
it is. Before, it was bounded by nothing: against a Prometheus that accepts and never answers, the first class's
query went through its retries and then a probe, (retries + 1) x timeout + timeout (about 2 minutes once an hour
with the default 30 s timeout and 2 retries, 3 s here against a 2-second tick).

A small local HTTP server (``tests.fakes.http_server.serving``) stands in for Prometheus and records every query; the
real prometheus-api-client and requests session talk to it. It accepts and reads every request and never answers
(no status line, no byte), as a Prometheus that has stopped responding."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from actuators import SimulatedCluster
from agent.ledger import InMemoryLedger
from agent.loop import Agent, AgentParts
from agent.notify.recording import RecordingNotifier
from agent.outlook import Outlook
from agent.sources.onprem_capacity import PrometheusOnPremCapacity
from agent.sources.prometheus import PROBE_QUERY, PrometheusSource
from config import settings_from_mapping
from forecasting.factory import build_forecaster
from models.clock import SimulatedClock
from tests.fakes.http_server import serving

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
DEMAND = {"train": "sum(train_gpus)", "serve": "sum(serve_gpus)"}
CAPACITY = 'count(ready_nodes{pool="onprem"})'


@dataclass
class Hung:
    """Records each query and answers none until the test ends."""

    queries: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    released: threading.Event = field(default_factory=threading.Event)

    def asked(self, query: str) -> int:
        with self.lock:
            return self.queries.count(query)


class _Handler(BaseHTTPRequestHandler):
    hung: Hung
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        query = {k: v[-1] for k, v in parse_qs(urlparse(self.path).query).items()}.get("query", "")
        with self.hung.lock:
            self.hung.queries.append(query)
        self.hung.released.wait()  # accepted and read, never answered
        self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def hung() -> Iterator[tuple[str, Hung]]:
    state = Hung()
    with serving(type("Handler", (_Handler,), {"hung": state})) as url:
        try:
            yield url, state
        finally:
            state.released.set()  # the requests held unanswered end before the server stops


def _agent(url: str) -> Agent:
    document: dict[str, Any] = {
        "demand_classes": [{"name": name} for name in DEMAND],
        "pools": [
            {"id": "onprem", "kind": "on-prem", "chips_per_unit": 8, "min_units": 4, "max_units": 4,
             "price_per_chip_hour_usd": 0.0, "lead_time": "0s", "serves": list(DEMAND)},
            {"id": "spot", "kind": "gpu-node-pool", "tier": "spot", "chips_per_unit": 8, "max_units": 48,
             "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": list(DEMAND)},
        ],
        "budgets": [{"name": "burst", "pools": ["spot"], "monthly_cap_usd": 10_000.0, "pacing": "forecast"}],
        "forecast": {"model": "persistence", "history": "6h", "step": "5m", "max_staleness": "15m"},
        "loop": {"tick_interval": "2s"},  # the demand history is read within 1 s
        "ledger": {"backend": "memory"},
        "prometheus": {
            "url": url, "timeout": "1s", "retries": 1, "retry_backoff_s": 0.0,
            "classes": {name: {"query": query} for name, query in DEMAND.items()},
            "pools": {"onprem": {"capacity_query": CAPACITY}},
        },
    }  # fmt: skip
    settings = settings_from_mapping(document, source="profile demand read test")
    prometheus = settings.prometheus
    assert prometheus is not None
    pools = settings.pool_specs()
    parts = AgentParts(
        PrometheusSource.from_settings(prometheus, DEMAND),
        build_forecaster(settings.forecast),
        SimulatedCluster(pools, SimulatedClock(NOW), initial_units={"onprem": 4, "spot": 0}),
        InMemoryLedger(),
        RecordingNotifier(),
        onprem=PrometheusOnPremCapacity.from_settings(prometheus, pools),
    )
    return Agent(settings, parts)


def test_the_demand_history_is_read_within_its_share_of_the_tick(
    hung: tuple[str, Hung], caplog: pytest.LogCaptureFixture
) -> None:
    url, state = hung
    agent = _agent(url)

    with caplog.at_level(logging.WARNING):
        report = agent.act(NOW, Outlook(dict.fromkeys(DEMAND, 8.0), {}, {}))

    # The first class's query is sent once: its 1-second timeout is the whole second the read is given, so neither
    # its retry nor the probe is sent, and the second class is not asked. Unbounded, the query went twice and the
    # probe once.
    assert state.asked(DEMAND["train"]) + state.asked(DEMAND["serve"]) == 1
    assert state.asked(PROBE_QUERY) == 0
    assert state.asked(CAPACITY) == 0  # the demand history met a failure of the server's: capacity is not asked
    assert "the time for reading demand (1 s) ran out" in caplog.text
    for name in DEMAND:
        assert f"burst profile: demand history of class {name} not read" in caplog.text
    assert report.plan.decisions  # the tick planned all the same

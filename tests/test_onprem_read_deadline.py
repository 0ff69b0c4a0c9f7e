"""The on-prem capacity read within the tick's read deadline: it comes first, within its own share of the tick
(``agent.outlook.ONPREM_READ_SHARE``), so neither a slow demand read nor the first tick's refit (which reads the
whole history) leaves it a request cut to nothing; a capacity query that does not answer in its share leaves the
demand reads the rest of the half tick; and a pool whose capacity is not read for want of time says so, not that
Prometheus cannot be reached, the pools after it not queried at all.

A small local HTTP server stands in for Prometheus and records every query (as tests/prometheus/
test_failing_server.py does); the real prometheus-api-client and requests session talk to it. Instant queries
answer an instant vector and range queries a matrix, in the documented shapes (Prometheus HTTP API, "Instant
vectors", "Range vectors"); ``vector(1)``, the reachability probe, answers at once."""

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
from agent.ledger import InMemoryLedger
from agent.loop import Agent, AgentParts
from agent.notify.recording import RecordingNotifier
from agent.onprem_capacity import onprem_capacity_events, read_onprem
from agent.sources.base import read_deadline
from agent.sources.onprem_capacity import PrometheusOnPremCapacity
from agent.sources.prometheus import PrometheusSource
from config import settings_from_mapping
from config.schema import Settings
from forecasting.factory import build_forecaster
from models import AlertKind
from models.clock import SimulatedClock
from tests.fakes.http_server import serving

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
DEMAND = "sum(demand_gpus)"
CAPACITY = {"onprem-a": "count(ready_nodes_a)", "onprem-b": "count(ready_nodes_b)"}
READY_UNITS = 30.0


@dataclass
class Stub:
    """Demand queries (``DEMAND``, range and instant) answer 8 after ``demand_delay_s``; capacity queries answer
    ``READY_UNITS`` after ``capacity_delay_s``."""

    demand_delay_s: float = 0.0
    capacity_delay_s: float = 0.0
    queries: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def asked(self, query: str) -> int:
        with self.lock:
            return sum(1 for q in self.queries if q == query)


class _Handler(BaseHTTPRequestHandler):
    stub: Stub
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        url = urlparse(self.path)
        args = {k: v[-1] for k, v in parse_qs(url.query).items()}
        query = args.get("query", "")
        with self.stub.lock:
            self.stub.queries.append(query)
        if query == DEMAND:
            time.sleep(self.stub.demand_delay_s)
        elif query in CAPACITY.values():
            time.sleep(self.stub.capacity_delay_s)
        value = str(READY_UNITS) if query in CAPACITY.values() else "8"
        if url.path == "/api/v1/query":
            sample = {"metric": {}, "value": [float(args.get("time", time.time())), value]}
            self._reply({"status": "success", "data": {"resultType": "vector", "result": [sample]}})
        else:
            start, end, step = (int(args[k]) for k in ("start", "end", "step"))
            values = [[t, value] for t in range(start, end + 1, step)]
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
            return  # the client gave up waiting

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def stub() -> Iterator[tuple[str, Stub]]:
    state = Stub()
    with serving(type("Handler", (_Handler,), {"stub": state})) as url:
        yield url, state


def _settings(url: str) -> Settings:
    onprem = [
        {"id": pool, "kind": "on-prem", "tier": "on-prem", "chips_per_unit": 8, "min_units": 40, "max_units": 40,
         "price_per_chip_hour_usd": 0.0, "lead_time": "0s", "serves": ["train"]}
        for pool in CAPACITY
    ]  # fmt: skip
    spot = {"id": "a100-spot", "kind": "gpu-node-pool", "tier": "spot", "chips_per_unit": 8, "min_units": 0,
            "max_units": 100, "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": ["train"]}  # fmt: skip
    document: dict[str, Any] = {
        "demand_classes": [{"name": "train"}],
        "pools": [*onprem, spot],
        "forecast": {"model": "persistence", "history": "6h", "step": "5m", "max_staleness": "15m"},
        "loop": {"tick_interval": "2s"},  # demand and capacity are read within 1 s, capacity within 0.2 s of it
        "ledger": {"backend": "memory"},
        "prometheus": {
            "url": url,
            "timeout": "5s",
            "retries": 0,
            "classes": {"train": {"query": DEMAND}},
            "pools": {pool: {"capacity_query": query} for pool, query in CAPACITY.items()},
        },
    }
    return settings_from_mapping(document, source="on-prem read deadline test")


def _agent(settings: Settings) -> Agent:
    prometheus = settings.prometheus
    assert prometheus is not None
    pools = settings.pool_specs()
    clock = SimulatedClock(NOW)
    parts = AgentParts(
        PrometheusSource.from_settings(prometheus, {"train": DEMAND}),
        build_forecaster(settings.forecast),
        SimulatedCluster(pools, clock, initial_units={"onprem-a": 40, "onprem-b": 40, "a100-spot": 0}),
        InMemoryLedger(),
        RecordingNotifier(),
        onprem=PrometheusOnPremCapacity.from_settings(prometheus, pools),
    )
    return Agent(settings, parts)


def test_the_first_tick_reads_on_prem_capacity_though_demand_and_the_refit_use_the_half_tick(
    stub: tuple[str, Stub],
) -> None:
    """Each demand query takes 0.4 s: the recent demand, the demand now and the first tick's refit of the history
    take 1.2 s, more than the half tick; the capacity, read before them, is read whole."""
    url, state = stub
    state.demand_delay_s = 0.4
    agent = _agent(_settings(url))

    outlook = agent.observe(NOW)

    assert state.asked(DEMAND) == 3  # recent, now, history: the tick ran through its refit
    assert outlook.onprem.problems == {}
    assert outlook.onprem.units == {"onprem-a": 30, "onprem-b": 30}


def test_a_capacity_query_that_does_not_answer_in_its_share_leaves_demand_the_rest_of_the_half_tick(
    stub: tuple[str, Stub],
) -> None:
    """The capacity queries hang for 3 s; their share of a 2-second tick is 0.2 s. The first is cut there, the
    second is not sent, and demand is read and forecast in the time left: the tick plans on it."""
    url, state = stub
    state.capacity_delay_s = 3.0
    agent = _agent(_settings(url))

    started = time.monotonic()
    outlook = agent.observe(NOW)
    took = time.monotonic() - started

    assert took < 1.0
    assert outlook.problems == {} and outlook.observed == {"train": 8.0}
    assert state.asked(CAPACITY["onprem-a"]) == 1 and state.asked(CAPACITY["onprem-b"]) == 0
    assert outlook.onprem.units == {}
    first, second = outlook.onprem.problems["onprem-a"], outlook.onprem.problems["onprem-b"]
    assert first.startswith("not answered: the time for reading on-prem capacity (0.2 s) ran out")
    assert second.startswith("not queried: the time for reading on-prem capacity (0.2 s) ran out")


def test_capacity_not_read_for_want_of_time_says_so_in_its_alert(stub: tuple[str, Stub]) -> None:
    """Read inside a deadline already spent (as the capacity was read after a slow demand read): nothing is sent,
    and the alert that the pool is planned on its max_units names the time, not a connection."""
    url, state = stub
    settings = _settings(url)
    assert settings.prometheus is not None
    pools = settings.pool_specs()
    reader = PrometheusOnPremCapacity.from_settings(settings.prometheus, pools)

    with read_deadline(timedelta(seconds=0.05)):
        time.sleep(0.06)
        reading = read_onprem(reader, pools, NOW)

    assert reading.units == {} and all(state.asked(q) == 0 for q in CAPACITY.values())
    alerts = onprem_capacity_events(reading, pools, NOW)
    assert sorted(a.subject for a in alerts) == sorted(CAPACITY)
    for alert in alerts:
        assert alert.kind is AlertKind.ONPREM_CAPACITY and "planning on its configured 40 units" in alert.summary
        why = alert.details["error"]
        assert why.startswith("not queried: the time for reading on-prem capacity (0.05 s) ran out"), why

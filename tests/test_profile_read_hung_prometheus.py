"""The on-prem capacity history a paced budget's burst profile is measured above (read once an hour, in the tick's
``act``) cannot stall the tick when Prometheus hangs. It is read as the demand classes are: once a pool's query has
failed for a reason of the server's and a probe fails too, the pools left are not asked. It is not read at all when
the demand history read just before it met a failure of the server's, and it is read within its share of the tick
(``agent.loop.CAPACITY_HISTORY_READ_SHARE``). Before, every pool's query went through its own retries, after a
failed demand history read too and with no time limit: about 91 s per pool with the default 30 s timeout and 2
retries, so a tick with 7 on-prem pools outran the 10-minute liveness bound.

A small local HTTP server stands in for Prometheus and records every query; the real prometheus-api-client and
requests session talk to it. A query it hangs on is accepted, read and never answered (no status line, no byte),
as a Prometheus that has stopped responding; the others answer an instant vector or a matrix in the documented
shapes (Prometheus HTTP API, "Instant vectors", "Range vectors")."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
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
from config.schema import Settings
from forecasting.factory import build_forecaster
from models.clock import SimulatedClock
from tests.fakes.http_server import serving

# One worker runs the module: the read of a hung Prometheus (4.5 s, ``hung_capacity_read``) goes on while the other
# tests run.
pytestmark = pytest.mark.xdist_group("profile-read-hung-prometheus")
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
DEMAND = "sum(demand_gpus)"
POOLS = [f"onprem-{i}" for i in range(4)]
CAPACITY = {pool: f'count(ready_nodes{{pool="{pool}"}})' for pool in POOLS}
RETRIES = 1  # each query is sent twice, each time given the 1-second timeout


@dataclass
class Stub:
    """Answers the queries ``answers`` accepts (demand 8, capacity 30 nodes); hangs on the others until the test
    ends."""

    answers: Callable[[str], bool] = lambda query: False
    queries: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    released: threading.Event = field(default_factory=threading.Event)

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
        if not self.stub.answers(query):
            self.stub.released.wait()  # accepted and read, never answered
            self.close_connection = True
            return
        value = "30" if query in CAPACITY.values() else "8"
        if url.path == "/api/v1/query":
            sample = {"metric": {}, "value": [float(args.get("time", time.time())), value]}
            body: dict[str, Any] = {"status": "success", "data": {"resultType": "vector", "result": [sample]}}
        else:
            start, end, step = (int(args[k]) for k in ("start", "end", "step"))
            values = [[t, value] for t in range(start, end + 1, step)]
            body = {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": values}]}}
        payload = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def stub() -> Iterator[tuple[str, Stub]]:
    state = Stub()
    with serving(type("Handler", (_Handler,), {"stub": state})) as url:
        try:
            yield url, state
        finally:
            state.released.set()  # the requests held unanswered end before the server stops


def _settings(url: str) -> Settings:
    onprem = [
        {"id": pool, "kind": "on-prem", "chips_per_unit": 8, "min_units": 40, "max_units": 40,
         "price_per_chip_hour_usd": 0.0, "lead_time": "0s", "serves": ["train"]}
        for pool in POOLS
    ]  # fmt: skip
    spot = {"id": "spot", "kind": "gpu-node-pool", "tier": "spot", "chips_per_unit": 8, "max_units": 48,
            "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": ["train"]}  # fmt: skip
    document: dict[str, Any] = {
        "demand_classes": [{"name": "train"}],
        "pools": [*onprem, spot],
        "budgets": [{"name": "burst", "pools": ["spot"], "monthly_cap_usd": 10_000.0, "pacing": "forecast"}],
        "forecast": {"model": "persistence", "history": "6h", "step": "5m", "max_staleness": "15m"},
        "loop": {"tick_interval": "2s"},  # the capacity history is read within 1 s
        "ledger": {"backend": "memory"},
        "prometheus": {
            "url": url,
            "timeout": "1s",
            "retries": RETRIES,
            "retry_backoff_s": 0.0,
            "classes": {"train": {"query": DEMAND}},
            "pools": {pool: {"capacity_query": query} for pool, query in CAPACITY.items()},
        },
    }
    return settings_from_mapping(document, source="burst profile read test")


def _agent(settings: Settings) -> Agent:
    prometheus = settings.prometheus
    assert prometheus is not None
    pools = settings.pool_specs()
    parts = AgentParts(
        PrometheusSource.from_settings(prometheus, {"train": DEMAND}),
        build_forecaster(settings.forecast),
        SimulatedCluster(pools, SimulatedClock(NOW), initial_units={**dict.fromkeys(POOLS, 40), "spot": 0}),
        InMemoryLedger(),
        RecordingNotifier(),
        onprem=PrometheusOnPremCapacity.from_settings(prometheus, pools),
    )
    return Agent(settings, parts)


def _act(agent: Agent) -> float:
    """Seconds the tick's ``act`` took, given an outlook already read (the profile is read in ``act``)."""
    started = time.monotonic()
    agent.act(NOW, Outlook({"train": 8.0}, {}, {}))
    return time.monotonic() - started


def test_the_capacity_history_is_not_read_after_the_demand_history_read_met_a_hung_prometheus(
    stub: tuple[str, Stub], caplog: pytest.LogCaptureFixture
) -> None:
    url, state = stub
    agent = _agent(_settings(url))

    took = _act(agent)

    # the demand history is read within its own half tick (1 s): its retry and the probe are not sent
    assert state.asked(DEMAND) == 1 and state.asked(PROBE_QUERY) == 0
    assert [state.asked(CAPACITY[pool]) for pool in POOLS] == [0, 0, 0, 0]
    assert "burst profile: on-prem capacity not read over the history, the demand history read has just failed" in (
        caplog.text
    )
    assert took < 4.0  # the demand's one attempt; the capacity history added each pool's 2 s


def test_the_capacity_history_is_read_within_its_share_of_the_tick(
    stub: tuple[str, Stub], caplog: pytest.LogCaptureFixture
) -> None:
    """Demand and the probe answer, every capacity query hangs: each failure is the query's own (the probe
    answers), so only the deadline, half of the 2-second tick, ends the read."""
    url, state = stub
    state.answers = lambda query: query not in CAPACITY.values()
    agent = _agent(_settings(url))

    took = _act(agent)

    assert took < 2.0  # within the tick; each of the 4 pools' two 1-second attempts took 8 s
    assert state.asked(CAPACITY["onprem-0"]) == 1
    assert [state.asked(CAPACITY[pool]) for pool in POOLS[1:]] == [0, 0, 0]
    assert "not answered: the time for reading on-prem capacity history (1 s) ran out" in caplog.text
    for pool in POOLS[1:]:
        assert f"on-prem capacity of {pool} not read over the history (not queried: the time" in caplog.text


@dataclass(frozen=True)
class HungCapacityRead:
    """The on-prem capacity history read once from a Prometheus that answers nothing: what it returned, how long it
    took, and the queries the server was sent."""

    url: str
    units: dict[str, Any]
    problems: dict[str, str]
    took: float
    stub: Stub


def _read_capacity_history(url: str, state: Stub) -> HungCapacityRead:
    settings = _settings(url)
    assert settings.prometheus is not None
    pools = settings.pool_specs()
    reader = PrometheusOnPremCapacity.from_settings(settings.prometheus, pools)

    started = time.monotonic()
    units, problems = reader.units_between(pools, NOW - settings.forecast.history, NOW, settings.forecast.step)
    took = time.monotonic() - started
    return HungCapacityRead(url, dict(units), dict(problems), took, state)


@pytest.fixture(scope="module", autouse=True)
def hung_capacity_read() -> Iterator[Future[HungCapacityRead]]:
    """The read of ``test_a_hung_prometheus_costs_the_capacity_history_one_pools_retries_and_one_probe``, in a thread
    of its own (its server and reader its own) from the module's first test on, while the other tests run; it has
    ended before its server stops."""
    state = Stub()
    with serving(type("Handler", (_Handler,), {"stub": state})) as url:
        try:
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="hung-capacity-read") as pool:
                yield pool.submit(_read_capacity_history, url, state)
        finally:
            state.released.set()


# Last in the module: its read goes on meanwhile (``hung_capacity_read``).
def test_a_hung_prometheus_costs_the_capacity_history_one_pools_retries_and_one_probe(
    hung_capacity_read: Future[HungCapacityRead],
) -> None:
    read = hung_capacity_read.result()
    url, state, units, problems, took = read.url, read.stub, read.units, read.problems, read.took

    assert units == {} and sorted(problems) == POOLS
    assert state.asked(CAPACITY["onprem-0"]) == RETRIES + 1 and state.asked(PROBE_QUERY) == 1
    assert [state.asked(CAPACITY[pool]) for pool in POOLS[1:]] == [0, 0, 0]
    for pool in POOLS[1:]:
        assert problems[pool].startswith(f"not queried: Prometheus at {url} is failing"), problems[pool]
    # two attempts and a probe, each waiting out the 1 s timeout plus the client's 0.5 s margin (4.5 s); each of 4
    # pools' two attempts would take 12 s
    assert took < 6.0

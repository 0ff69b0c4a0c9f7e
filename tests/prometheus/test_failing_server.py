"""A Prometheus that fails for every query (overloaded, hanging, gone) costs one class's retries and one probe per
read, not every class's retries: the classes not yet read are held with the server's failure, without being asked,
so the tick goes on to plan, enforce budgets and alert. A failure that is the class's own (its query too heavy for
the server's timeout, a query the server refuses) holds that class alone. A server that answers the probe but
times out every demand query is cut off by the tick's read deadline (half a tick).

Prometheus answers a query that ran out of time with 503 and ``errorType: timeout`` (web/api/v1/api.go,
``returnAPIError``: ``errorTimeout`` -> ``http.StatusServiceUnavailable``), which is not retried (the same query
would time out again) and is told with Prometheus' words and what to do; an overloaded server answers 503
``unavailable``, which is retried; a query it cannot parse is answered 400 ``bad_data``. No reason carries the
request's URL (it holds the whole query), and a read timeout says how long was waited and how many times. A small
local HTTP server stands in for it and records every request; the real
prometheus-api-client and requests session talk to it, nothing of the client is mocked.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
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
from agent.sources.base import read_deadline
from agent.sources.prometheus import PROBE_QUERY, PrometheusSource
from agent.sources.prometheus_queries import demand_queries
from config import settings_from_mapping
from config.schema import Settings
from forecasting.factory import build_forecaster
from models import AlertKind, DemandClass
from models.clock import SimulatedClock
from tests.fakes.http_server import serving
from tests.prometheus.server import free_port

# One worker runs the module: the hung read (6 s of waiting, ``hung_read``) goes on while the other tests run.
pytestmark = pytest.mark.xdist_group("failing-server")
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
STEP = timedelta(minutes=5)
CLASSES = [f"team-{i}" for i in range(10)]
RETRIES = 2
QUERY_TIMED_OUT = {"status": "error", "errorType": "timeout", "error": "query timed out in expression evaluation"}
BAD_DATA = {"status": "error", "errorType": "bad_data", "error": 'invalid parameter "query": parse error'}
UNAVAILABLE = {"status": "error", "errorType": "unavailable", "error": "too many outstanding requests"}
SERVER_ERROR = 'server error (HTTP 503), tried 3 times: errorType unavailable, "too many outstanding requests"'
OWN_TIMEOUT = (
    'Prometheus could not finish the query within its timeout (HTTP 503): errorType timeout, "query timed out in '
    'expression evaluation"; not retried, as it would time out again: simplify the query'
)


@dataclass
class Stub:
    """``mode``: ``ok``; ``overloaded`` (every query, the probe's too, answers 503 unavailable after ``delay_s``);
    ``hang`` (no answer for ``delay_s``); ``heavy`` (the class named in ``culprit`` answers 503 timeout after
    ``delay_s``, the others and the probe answer); ``bad`` (the class named in ``culprit`` answers 400 bad_data);
    ``slow`` (every demand query answers 503 unavailable after ``delay_s``, the probe at once)."""

    mode: str = "ok"
    delay_s: float = 0.0
    culprit: str = ""
    queries: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def asked(self, query: str) -> int:
        with self.lock:
            return sum(1 for q in self.queries if q == query)

    def demand_queries(self) -> list[str]:
        with self.lock:
            return [q for q in self.queries if q != PROBE_QUERY]


class _Handler(BaseHTTPRequestHandler):
    stub: Stub
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # as Prometheus' Go server does: without it every answer (headers, then body) waits ~40 ms on Nagle's algorithm
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        url = urlparse(self.path)
        args = {k: v[-1] for k, v in parse_qs(url.query).items()}
        query = args.get("query", "")
        stub = self.stub
        with stub.lock:
            stub.queries.append(query)
        own = bool(stub.culprit) and f'"{stub.culprit}"' in query
        slow = stub.mode == "slow" and query != PROBE_QUERY
        if stub.mode in ("overloaded", "hang") or (stub.mode == "heavy" and own) or slow:
            time.sleep(stub.delay_s)
            self._reply(503, UNAVAILABLE if stub.mode in ("overloaded", "slow") else QUERY_TIMED_OUT)
        elif stub.mode == "bad" and own:
            self._reply(400, BAD_DATA)
        elif url.path == "/api/v1/query":
            sample = {"metric": {}, "value": [float(args.get("time", time.time())), "4"]}
            self._reply(200, {"status": "success", "data": {"resultType": "vector", "result": [sample]}})
        else:
            start, end, step = (int(args[k]) for k in ("start", "end", "step"))
            values = [[t, "4"] for t in range(start, end + 1, step)]
            result = [{"metric": {}, "values": values}]
            self._reply(200, {"status": "success", "data": {"resultType": "matrix", "result": result}})

    def _reply(self, code: int, body: object) -> None:
        payload = json.dumps(body).encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:
            return  # the client gave up waiting (the hanging server)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def stub() -> Iterator[tuple[str, Stub]]:
    state = Stub()
    with serving(type("Handler", (_Handler,), {"stub": state})) as url:
        yield url, state


def _settings(url: str, timeout: str = "5s") -> Settings:
    pools = [
        {"id": f"{name}-pool", "kind": "gpu-node-pool", "tier": "on-demand", "chips_per_unit": 8, "min_units": 0,
         "max_units": 20, "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": [name]}
        for name in CLASSES
    ]  # fmt: skip
    config: dict[str, Any] = {
        "demand_classes": [{"name": name} for name in CLASSES],
        "pools": pools,
        "forecast": {"model": "persistence", "history": "6h", "step": "5m", "max_staleness": "15m"},
        "loop": {"tick_interval": "1m"},
        "ledger": {"backend": "memory"},
        "prometheus": {"url": url, "timeout": timeout, "retries": RETRIES, "retry_backoff_s": 0},
    }
    return settings_from_mapping(config, source="test config")


def _source(settings: Settings) -> PrometheusSource:
    assert settings.prometheus is not None
    return PrometheusSource.from_settings(
        settings.prometheus, demand_queries(settings.demand_class_models(), settings.prometheus)
    )


def _classes() -> list[DemandClass]:
    return [DemandClass(name) for name in CLASSES]


def _fetch_each(source: PrometheusSource) -> dict[str, str]:
    _, missing = source.fetch_each(_classes(), NOW - timedelta(hours=1), NOW, STEP)
    return {name: exc.reason for name, exc in missing.items()}


@dataclass(frozen=True)
class HungRead:
    """One read of every class from a server that answers nothing for longer than the client waits."""

    url: str
    missing: dict[str, str]
    demand_queries: int
    probes: int


@pytest.fixture(scope="module", autouse=True)
def hung_read_started() -> Iterator[Future[HungRead]]:
    """Every class read once from a hanging server with the shortest timeout accepted (1 s): it waits out 3 tries and
    a probe of 1.5 s each, so the tests of that read share it. It is read in a thread of its own from the module's
    first test on, while the other tests run (its server, client and counts are its own); it has ended before its
    server stops."""
    state = Stub(mode="hang", delay_s=3.0)

    def read(url: str) -> HungRead:
        missing = _fetch_each(_source(_settings(url, timeout="1s")))
        return HungRead(url, missing, len(state.demand_queries()), state.asked(PROBE_QUERY))

    with (
        serving(type("Handler", (_Handler,), {"stub": state})) as url,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="hung-read") as pool,
    ):
        yield pool.submit(read, url)


@pytest.fixture
def hung_read(hung_read_started: Future[HungRead]) -> HungRead:
    return hung_read_started.result()


def _assert_held_for_the_server(missing: dict[str, str], url: str, reason: str) -> None:
    assert list(missing) == CLASSES
    assert reason in missing[CLASSES[0]]
    for name in CLASSES[1:]:
        assert missing[name].startswith(f"not queried: Prometheus at {url} is failing"), missing[name]
        assert reason in missing[name] and f"reading class {CLASSES[0]!r}" in missing[name]
        assert f"a probe query of {PROBE_QUERY} failed too" in missing[name]


def test_an_overloaded_server_costs_one_class_retries_and_one_probe(stub: tuple[str, Stub]) -> None:
    url, state = stub
    state.mode, state.delay_s = "overloaded", 0.05
    missing = _fetch_each(_source(_settings(url)))
    _assert_held_for_the_server(missing, url, SERVER_ERROR)
    assert len(state.demand_queries()) == 1 + RETRIES  # the first class's try and its retries; no other class
    assert state.asked(PROBE_QUERY) == 1


def test_a_server_that_refuses_connections_is_asked_for_one_class() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    missing = _fetch_each(_source(_settings(url)))
    _assert_held_for_the_server(missing, url, "Connection refused")


def test_the_demand_now_stops_at_the_server_failure_too(stub: tuple[str, Stub]) -> None:
    url, state = stub
    state.mode, state.delay_s = "overloaded", 0.05
    readings, unread = _source(_settings(url)).newest_each(_classes(), NOW)
    assert readings == {}
    _assert_held_for_the_server({k: v.reason for k, v in unread.items()}, url, "HTTP 503")
    assert len(state.demand_queries()) == 1 + RETRIES
    assert state.asked(PROBE_QUERY) == 1


@pytest.mark.parametrize(("mode", "reason"), [("heavy", OWN_TIMEOUT), ("bad", "HTTP 400")])
def test_a_failure_of_one_class_query_holds_that_class_alone(stub: tuple[str, Stub], mode: str, reason: str) -> None:
    url, state = stub
    state.mode, state.culprit = mode, CLASSES[3]
    frame, missing = _source(_settings(url)).fetch_each(_classes(), NOW - timedelta(hours=1), NOW, STEP)
    assert list(missing) == [CLASSES[3]]
    assert reason in missing[CLASSES[3]].reason and "not queried" not in missing[CLASSES[3]].reason
    assert sorted(set(frame["unique_id"])) == sorted(set(CLASSES) - {CLASSES[3]})
    # A server error is the server's until a probe is answered; a refused query is the class's without one.
    assert state.asked(PROBE_QUERY) == (1 if mode == "heavy" else 0)


def _agent(settings: Settings, notifier: RecordingNotifier, tick: timedelta | None = None) -> Agent:
    clock = SimulatedClock(NOW)
    cluster = SimulatedCluster(settings.pool_specs(), clock, {f"{name}-pool": 2 for name in CLASSES})
    parts = AgentParts(_source(settings), build_forecaster(settings.forecast), cluster, InMemoryLedger(), notifier)
    return Agent(settings, parts, holder="test", tick=tick)


def test_the_tick_acts_and_alerts_on_every_class_after_one_class_retries(stub: tuple[str, Stub]) -> None:
    url, state = stub
    state.mode, state.delay_s = "overloaded", 0.05
    notifier = RecordingNotifier()
    agent = _agent(_settings(url), notifier)

    report = agent.run_once(NOW)

    assert len(state.demand_queries()) == 1 + RETRIES and state.asked(PROBE_QUERY) == 1
    assert sorted(report.problems) == sorted(CLASSES)
    assert all(SERVER_ERROR in why for why in report.problems.values())
    missing_data = [e for e in notifier.events if e.kind is AlertKind.MISSING_DATA]
    assert sorted(e.subject for e in missing_data) == sorted(f"demand class {name}" for name in CLASSES)
    # The pools were read and planned on: each is held at the units it has, none left out.
    for name in CLASSES:
        assert f"no trustworthy demand for {name}; holding -> target 2" in report.plan.decisions[f"{name}-pool"].why()
    assert {s.pool_id: s.target_units for s in agent.parts.actuator.list_pools()} == {
        f"{name}-pool": 2 for name in CLASSES
    }


def test_the_history_read_for_a_refit_stops_at_the_server_failure(stub: tuple[str, Stub]) -> None:
    url, state = stub
    state.mode, state.delay_s = "overloaded", 0.05
    agent = _agent(_settings(url), RecordingNotifier())

    staged = agent.stage_refit(NOW)

    assert staged.history.empty
    assert len(state.demand_queries()) == 1 + RETRIES and state.asked(PROBE_QUERY) == 1


def test_a_server_that_answers_the_probe_but_no_query_is_cut_off_by_the_tick_read_deadline(
    stub: tuple[str, Stub],
) -> None:
    url, state = stub
    state.mode, state.delay_s = "slow", 0.3
    notifier = RecordingNotifier()
    agent = _agent(_settings(url), notifier, tick=timedelta(seconds=2))  # demand is read within 1 s

    report = agent.run_once(NOW)

    # Each class's retries end with an answered probe; the deadline stops the read within the second class's tries
    # (the first class's three take 0.9 s), where reading every class took 10 x 3 tries.
    assert len(state.demand_queries()) <= 2 * (1 + RETRIES)
    assert sorted(report.problems) == sorted(CLASSES)
    cut = [name for name, why in report.problems.items() if "the time for reading demand (1 s) ran out" in why]
    assert len(cut) >= len(CLASSES) - 2 and all(
        f"Prometheus at {url} answers too slowly" in report.problems[n] for n in cut
    )
    missing_data = [e for e in notifier.events if e.kind is AlertKind.MISSING_DATA]
    assert len(missing_data) == len(CLASSES)


def test_the_read_deadline_cuts_a_request_timeout_and_its_retries(stub: tuple[str, Stub]) -> None:
    url, state = stub
    state.mode, state.delay_s = "hang", 5.0
    source = _source(_settings(url, timeout="2s"))
    with read_deadline(timedelta(seconds=0.3)):
        missing = _fetch_each(source)
    assert len(state.demand_queries()) == 1 and state.asked(PROBE_QUERY) == 0  # one try, cut to the time left
    assert "Prometheus did not answer within 0.3 s (read timeout)" in missing[CLASSES[0]]
    assert all("the time for reading demand (0.3 s) ran out" in missing[name] for name in CLASSES[1:])


def test_prometheus_own_timeout_is_not_retried_and_says_what_to_do(stub: tuple[str, Stub]) -> None:
    url, state = stub
    state.mode, state.culprit = "heavy", CLASSES[3]
    missing = _fetch_each(_source(_settings(url)))
    assert list(missing) == [CLASSES[3]]
    assert missing[CLASSES[3]].startswith(OWN_TIMEOUT)
    assert "raise prometheus.timeout" in missing[CLASSES[3]] and "--query.timeout" in missing[CLASSES[3]]
    # Asked once: the same query would time out again (it was asked 1 + RETRIES times).
    assert len([q for q in state.demand_queries() if f'"{CLASSES[3]}"' in q]) == 1


def test_the_client_waits_past_the_timeout_it_sends_for_prometheus_own_answer(stub: tuple[str, Stub]) -> None:
    url, state = stub
    # Prometheus answers a query it gave up on a little after the timeout it was sent (1000ms here).
    state.mode, state.culprit, state.delay_s = "heavy", CLASSES[3], 1.2
    missing = _fetch_each(_source(_settings(url, timeout="1s")))
    assert missing[CLASSES[3]].startswith(OWN_TIMEOUT)  # not "did not answer within 1 s"


@pytest.mark.parametrize(
    ("mode", "timeout"),
    [("overloaded", "5s"), ("heavy", "5s"), ("bad", "5s"), ("hang", "1s")],
)
def test_no_reason_carries_the_request_url(request: pytest.FixtureRequest, mode: str, timeout: str) -> None:
    missing: dict[str, str]
    if mode == "hang":  # the hanging server's read with its 1 s timeout, which the test above reads too
        missing = request.getfixturevalue("hung_read").missing
    else:
        url, state = request.getfixturevalue("stub")
        state.mode, state.culprit = mode, CLASSES[0]
        missing = _fetch_each(_source(_settings(url, timeout=timeout)))
    assert missing
    for reason in missing.values():
        assert "/api/v1" not in reason and "query=" not in reason and "%28" not in reason, reason


def test_a_refused_connection_is_told_without_the_request_url() -> None:
    missing = _fetch_each(_source(_settings(f"http://127.0.0.1:{free_port()}")))
    assert missing[CLASSES[0]] == "cannot connect to Prometheus: [Errno 111] Connection refused"


# Last in the module: the hung read goes on meanwhile (``hung_read_started``).
def test_a_hanging_server_costs_one_class_timeouts_and_one_probe(hung_read: HungRead) -> None:
    # The client waits half a second longer than the timeout it sends Prometheus.
    reason = "Prometheus did not answer within 1.5 s (read timeout, tried 3 times)"
    _assert_held_for_the_server(hung_read.missing, hung_read.url, reason)
    assert hung_read.demand_queries == 1 + RETRIES
    assert hung_read.probes == 1

"""A read the read deadline ended says so, how long the deadline was, and the setting to raise: the one the deadline
comes from (loop.read_deadline for a tick's reads, loop.tick_interval for a read within a share of the tick), not
prometheus.timeout. The deadline cuts each try's timeout to the time left (and the query's timeout sent to
Prometheus): the reason quoted that cut timeout as if it were the query's own ("Prometheus did not answer within
0.5 s (read timeout, tried 2 times)" for a read that waited 2 s; "no connection within the timeout"), and
Prometheus' timeout answer to a timeout the deadline had cut said to raise prometheus.timeout. A try that waited its
whole timeout, the deadline still ahead, is told as before; one before the last that did makes prometheus.timeout
the setting to raise (a server answering each query in 1.6 s fails every try of 1.5 s, however long the deadline).

No setting helps a server that never answers: when Prometheus sent no byte of an answer to any try, the reason says
so first (it may be hung or overloaded, and what to check), and names the setting only "if it is only slow"; it
named one outright ("raise prometheus.timeout" with a 1 s timeout and a 2 s deadline, "raise loop.read_deadline
(...), not prometheus.timeout" with a 2 s timeout), and following it never read a hanging server. Earlier tries
that found no connection within their whole timeout, the deadline still ahead, say that Prometheus is unreachable:
they said to raise loop.read_deadline, which only made room for more tries that found none.

Local servers on 127.0.0.1 stand in for Prometheus: one that never answers, one that answers each query late, one
that answers 503 errorType timeout (or 422 "expanding series: context deadline exceeded") when the timeout it was
sent runs out, one that answers 503 once and then never, and one whose queue of connections is full, so that no
connection is made; the real prometheus-api-client and requests session talk to them, nothing of the client is
mocked.

The reads that wait out a deadline or a timeout on those servers (a second to 3.5 s each, 20 s one after the other)
are all started at once when the first test of the module needs them (``reads``), each in a thread of its own with
its own client and deadline (a read deadline is a context variable: each thread has its own), so that their waits
overlap; each test asserts on the outcome of its own read, which is what it would be alone. The tests that time the
read against its deadline (Prometheus timing out on the time left) still make their reads alone, in the test."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlparse

import pytest

from agent.sources.base import read_deadline
from agent.sources.prometheus import PrometheusSource
from agent.sources.prometheus_answer import get_instant
from agent.sources.prometheus_client import call, connect
from config.prometheus import PrometheusSettings
from models import MetricsUnavailable
from tests.fakes.http_server import reply_json, serving

# one worker starts the module's reads once, for every test that asserts on them
pytestmark = pytest.mark.xdist_group("deadline-reasons")
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
QUERY = "sum(gpu_demand)"
TICK_READS = "loop.read_deadline (the time a tick reads in, half of loop.tick_interval unless set)"
RAISE = f"raise {TICK_READS}, not prometheus.timeout"
SHARE = "loop.tick_interval (these reads are read within 25% of a tick)"
RAISE_TIMEOUT = "raise prometheus.timeout"
WAITED = "an earlier try waited its whole timeout (1.5 s) with the read deadline still ahead"
CHECK = "it may be hung or overloaded (check its /-/ready and its query log); if it is only slow"
UNREACHABLE = (
    "Prometheus is unreachable from the agent (check the address, NetworkPolicies); a longer deadline will not help"
)
EVALUATING = {"status": "error", "errorType": "timeout", "error": "query timed out in expression evaluation"}
SELECTING = {"status": "error", "errorType": "execution", "error": "expanding series: context deadline exceeded"}


def _settings(url: str, timeout: str = "1s", retries: int = 2) -> PrometheusSettings:
    return PrometheusSettings.model_validate({"url": url, "timeout": timeout, "retries": retries, "retry_backoff_s": 0})


def _reason(url: str, deadline_s: float, retries: int = 2, setting: str | None = None, timeout: str = "1s") -> str:
    """Why one instant read through ``call`` failed inside a read deadline of ``deadline_s`` (that ``setting`` sets,
    if given)."""
    client = connect(_settings(url, timeout=timeout, retries=retries))
    within = timedelta(seconds=deadline_s)
    deadline = read_deadline(within) if setting is None else read_deadline(within, setting)
    with deadline, pytest.raises(MetricsUnavailable) as failed:
        call("a", QUERY, lambda: get_instant(client, {"query": QUERY}))
    return failed.value.reason


@pytest.fixture(scope="module")
def hanging() -> Iterator[str]:
    """Accepts connections and never answers (each one held until the module's tests are done)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.02)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
        for conn in held:
            conn.close()


def test_a_hang_the_deadline_ended_after_a_retry_says_prometheus_answered_no_try(reads: Reads) -> None:
    # The client waits 1.5 s a try (the 1 s timeout sent and a margin): the retry had the 0.5 s left of 2 s. No try
    # had a byte of an answer: the server may be hung, which no setting mends; were it only slow, the first try
    # waited all of prometheus.timeout: that, not the deadline, is the setting a longer wait takes.
    reason = reads.reason("hang within 2 s")
    assert re.fullmatch(
        r"the read deadline \(2 s\) ended the read: Prometheus did not answer within 0\.\d s \(read timeout, tried 2 "
        r"times\), the time left when the last try was sent; "
        + re.escape(f"Prometheus answered none of the 2 tries: {CHECK}, {RAISE_TIMEOUT}: {WAITED}"),
        reason,
    ), reason


def test_a_hang_with_two_earlier_tries_that_waited_their_whole_timeout_counts_both(reads: Reads) -> None:
    # Tries of 1.5 s within 3.5 s: two whole, the third cut to the 0.5 s left.
    reason = reads.reason("hang within 3.5 s")
    waited = "2 earlier tries each waited their whole timeout (1.5 s) with the read deadline still ahead"
    assert reason.endswith(f"; Prometheus answered none of the 3 tries: {CHECK}, {RAISE_TIMEOUT}: {waited}"), reason
    assert "tried 3 times" in reason


@pytest.mark.parametrize(("setting", "named"), [(None, TICK_READS), (SHARE, SHARE)])
def test_a_hang_the_deadline_ended_names_the_setting_the_deadline_comes_from(
    reads: Reads, setting: str | None, named: str
) -> None:
    # The deadline cut the only try (0.5 s of its 1.5 s): no try waited prometheus.timeout. Nor did Prometheus send a
    # byte: the setting is named for a server that is only slow, never as the cure ("not prometheus.timeout").
    reason = reads.reason(f"hang within 0.5 s of {setting or 'the default setting'}")
    assert re.fullmatch(
        r"the read deadline \(0\.5 s\) ended the read: Prometheus did not answer within 0\.\d s \(read timeout\), the "
        r"time left when it was sent; " + re.escape(f"Prometheus sent no byte of an answer: {CHECK}, raise {named}"),
        reason,
    ), reason
    assert "not prometheus.timeout" not in reason


def test_a_hang_says_prometheus_answered_no_try_whichever_timeout_is_longer(reads: Reads) -> None:
    """prometheus.timeout 1s or 2s, the deadline 2 s: either way the reason first says Prometheus answered no try;
    the setting named for a slow server follows from which one ended the tries."""
    shorter = reads.reason("hang within 2 s, timeout 1s")
    longer = reads.reason("hang within 2 s, timeout 2s")
    assert f"; Prometheus answered none of the 2 tries: {CHECK}, {RAISE_TIMEOUT}: " in shorter, shorter
    assert longer.endswith(f"; Prometheus sent no byte of an answer: {CHECK}, raise {TICK_READS}"), longer


class _Late(BaseHTTPRequestHandler):
    """Answers every query, after ``LATE_S``: later than a try of prometheus.timeout 1s waits (1.5 s)."""

    LATE_S = 1.6
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        time.sleep(self.LATE_S)
        sample = {"metric": {}, "value": [NOW.timestamp(), "7"]}
        reply_json(self, 200, {"status": "success", "data": {"resultType": "vector", "result": [sample]}})

    def log_message(self, format: str, *args: object) -> None:
        return


def test_a_try_before_the_last_that_waited_prometheus_timeout_says_to_raise_it(reads: Reads) -> None:
    """The first try waits its whole 1.5 s with the 2 s deadline ahead; the retry, sent with 0.5 s left, is cut. A
    longer deadline would only make room for more tries of 1.5 s: the setting to raise, if the server is only slow,
    is prometheus.timeout, and raised (2s: a try waits up to 2.5 s, here the 2 s deadline) the answer is read. No byte
    came before the answer's time, so the reason cannot tell this server from a hung one, and says both."""
    reason = reads.reason("late within 2 s")
    answer = reads.started["late within 2 s, timeout 2s"].result()

    assert re.fullmatch(
        r"the read deadline \(2 s\) ended the read: Prometheus did not answer within 0\.\d s \(read timeout, tried 2 "
        r"times\), the time left when the last try was sent; "
        + re.escape(f"Prometheus answered none of the 2 tries: {CHECK}, {RAISE_TIMEOUT}: {WAITED}"),
        reason,
    ), reason
    assert "loop.read_deadline" not in reason
    assert answer["data"]["result"][0]["value"][1] == "7"


def test_a_try_that_waited_its_whole_timeout_is_told_as_before(reads: Reads) -> None:
    reason = reads.reason("hang within 2 s, no retry")  # 1.5 s waited, 0.5 s of the deadline left
    assert reason == "Prometheus did not answer within 1.5 s (read timeout)"


class _TimingOut(BaseHTTPRequestHandler):
    """Answers as Prometheus does a query whose timeout ran out (``answer``), a little before the timeout it was
    sent has passed, so that its answer and not the client's own timeout ends the read: a quarter of a second
    before (50 ms was once too little on a busy machine, the client's timeout ending the read first)."""

    answer: tuple[int, dict[str, str]]
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        timeout = parse_qs(urlparse(self.path).query)["timeout"][0]
        assert timeout.endswith("ms"), timeout
        time.sleep(max(0.0, int(timeout[:-2]) / 1000 - 0.25))
        reply_json(self, *self.answer)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.mark.parametrize(
    ("code", "body"), [(503, EVALUATING), (422, SELECTING)], ids=["while evaluating", "while selecting series"]
)
def test_prometheus_timing_out_on_the_time_left_names_the_deadline(code: int, body: dict[str, str]) -> None:
    with serving(type("Handler", (_TimingOut,), {"answer": (code, body)})) as url:
        source = PrometheusSource.from_settings(_settings(url, timeout="5s"), {})
        started = time.monotonic()
        with read_deadline(timedelta(seconds=1)), pytest.raises(MetricsUnavailable) as failed:
            source.instant("a", QUERY, NOW)
        took = time.monotonic() - started
        reason = failed.value.reason

    assert took <= 1.3, f"the read took {took:.2f} s against a 1 s deadline"  # not the 5 s prometheus.timeout
    assert re.match(
        r"Prometheus could not finish the query within the \d+ms left before the read deadline \(1 s\) ", reason
    ), reason
    assert f"(HTTP {code}): errorType {body['errorType']}" in reason
    assert reason.endswith(
        f"the read deadline cut the query's timeout sent to Prometheus to the time left: {RAISE}, or simplify the query"
    ), reason
    assert "raise prometheus.timeout" not in reason


def test_prometheus_timing_out_on_its_own_timeout_still_names_prometheus_timeout() -> None:
    with serving(type("Handler", (_TimingOut,), {"answer": (503, EVALUATING)})) as url:
        source = PrometheusSource.from_settings(_settings(url, timeout="1s"), {})
        with read_deadline(timedelta(seconds=2)), pytest.raises(MetricsUnavailable) as failed:
            source.instant("a", QUERY, NOW)
    assert failed.value.reason.startswith("Prometheus could not finish the query within its timeout (HTTP 503)")
    assert "raise prometheus.timeout" in failed.value.reason and "loop.read_deadline" not in failed.value.reason


@pytest.fixture(scope="module")
def full_queue() -> Iterator[str]:
    """A listener whose queue of connections not yet accepted is full: a new connection is never made (the
    kernel drops its SYN)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):  # connecting: the kernel completes it into the queue
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def test_no_connection_before_the_deadline_says_the_deadline_ended_it(reads: Reads) -> None:
    reason = reads.reason("no connection within 1 s")
    assert (
        reason == f"the read deadline (1 s) ended the read: no connection to Prometheus within the time left; {RAISE}"
    )


def test_earlier_tries_that_found_no_connection_say_prometheus_is_unreachable(reads: Reads) -> None:
    """The first try waits its whole 1.5 s for a connection with the 2 s deadline ahead; the retry, sent with 0.5 s
    left, finds none either. A longer deadline only makes room for more such tries: the reason says Prometheus is
    unreachable, and names no setting to raise."""
    reason = reads.reason("no connection within 2 s")
    unconnected = (
        "an earlier try found no connection within its whole timeout (1.5 s) with the read deadline still ahead"
    )
    assert reason == (
        "the read deadline (2 s) ended the read: no connection to Prometheus within the time left, tried 2 times; "
        f"{unconnected}: {UNREACHABLE}"
    ), reason
    assert "loop.read_deadline" not in reason and "raise" not in reason


class _AnswersOnceThenHangs(BaseHTTPRequestHandler):
    """Answers the first query 503 (a server error urllib3 retries), then holds every other query unanswered until
    ``release`` is set."""

    protocol_version = "HTTP/1.1"
    queries: ClassVar[list[str]]
    release: ClassVar[threading.Event]

    def do_GET(self) -> None:
        self.queries.append(self.path)
        if len(self.queries) > 1:
            self.release.wait(10)
            return
        payload = json.dumps({"status": "error", "errorType": "unavailable", "error": "starting"}).encode()
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        return


def test_a_hang_after_prometheus_answered_a_try_is_not_told_as_unanswered(reads: Reads) -> None:
    """Prometheus answered the first try (503), and the retry it never answered: it answers, so the reason is that
    the deadline ended the read, with the setting it comes from to raise, not that it answered no try."""
    reason, queries = reads.started["answered once within 1 s"].result()
    assert len(queries) == 2, queries
    assert re.fullmatch(
        r"the read deadline \(1 s\) ended the read: Prometheus did not answer within [01](\.\d)? s \(read timeout, "
        r"tried 2 times\), the time left when the last try was sent; " + re.escape(RAISE),
        reason,
    ), reason


@dataclass(frozen=True)
class Reads:
    """The module's reads, under way or done (``reads``), by name."""

    started: dict[str, Future[Any]]

    def reason(self, name: str) -> str:
        """Why the read ``name`` failed (``result`` raises again what the read raised, if not MetricsUnavailable)."""
        reason = self.started[name].result()
        assert isinstance(reason, str), reason
        return reason


@pytest.fixture(scope="module")
def reads(hanging: str, full_queue: str) -> Iterator[Reads]:
    """Every read of the tests above, each in a thread of its own, started together; on leaving, every read has
    ended before its server stops."""

    class Once(_AnswersOnceThenHangs):
        queries: ClassVar[list[str]] = []
        release: ClassVar[threading.Event] = threading.Event()

    with contextlib.ExitStack() as servers:
        late = servers.enter_context(serving(_Late))
        once = servers.enter_context(serving(Once))
        servers.callback(Once.release.set)

        def answered_once() -> tuple[str, list[str]]:
            try:
                return _reason(once, deadline_s=1.0), list(Once.queries)
            finally:
                Once.release.set()

        def late_read_within_its_timeout() -> object:
            client = connect(_settings(late, timeout="2s", retries=1))
            with read_deadline(timedelta(seconds=2)):
                return call("a", QUERY, lambda: get_instant(client, {"query": QUERY}))

        cases: dict[str, Callable[[], object]] = {
            "hang within 2 s": lambda: _reason(hanging, deadline_s=2.0),
            "hang within 3.5 s": lambda: _reason(hanging, deadline_s=3.5),
            "hang within 0.5 s of the default setting": lambda: _reason(hanging, deadline_s=0.5),
            f"hang within 0.5 s of {SHARE}": lambda: _reason(hanging, deadline_s=0.5, setting=SHARE),
            "hang within 2 s, timeout 1s": lambda: _reason(hanging, deadline_s=2.0, timeout="1s"),
            "hang within 2 s, timeout 2s": lambda: _reason(hanging, deadline_s=2.0, timeout="2s"),
            "hang within 2 s, no retry": lambda: _reason(hanging, deadline_s=2.0, retries=0),
            "late within 2 s": lambda: _reason(late, deadline_s=2.0, retries=1),
            "late within 2 s, timeout 2s": late_read_within_its_timeout,
            "no connection within 1 s": lambda: _reason(full_queue, deadline_s=1.0),
            "no connection within 2 s": lambda: _reason(full_queue, deadline_s=2.0),
            "answered once within 1 s": answered_once,
        }
        with ThreadPoolExecutor(max_workers=len(cases), thread_name_prefix="deadline-read") as pool:
            yield Reads({name: pool.submit(read) for name, read in cases.items()})

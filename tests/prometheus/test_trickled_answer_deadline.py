"""An answer that trickles in ends by the read deadline, as a hang does. The read timeout bounds each socket read,
not the answer: a server (or a proxy in front of it) sending a few bytes every 0.2 s, each read well within the
client's 1.5 s, held a read with a 2 s deadline for 17 s, as long as it kept sending. Inside a read deadline no read
of the answer now starts once the deadline has passed and none waits past it, whether the status line and headers
or the body are coming in; the read fails saying the answer did not arrive in time. A local server on 127.0.0.1
trickles its answer; the real prometheus-api-client and requests session read it, nothing of the client is mocked.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from agent.sources.base import read_deadline
from agent.sources.prometheus import PrometheusSource
from agent.sources.prometheus_answer import get_instant
from agent.sources.prometheus_client import call, connect
from config.prometheus import PrometheusSettings
from models import DemandClass, MetricsUnavailable

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
QUERY = "sum(gpu_demand)"
DEADLINE_S = 1.0
# How far past its deadline a read may end: the time to give up and tell why, on a busy machine (reads ended up to
# 0.42 s late with both cores loaded several times over; what these tests catch is seconds late, or a try too many).
LATE_S = 0.6
ANSWER = json.dumps(
    {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1.0, "4"]}]}}
).encode()
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(ANSWER)


@dataclass
class Trickling:
    """Answers every request one byte every ``every_s`` (each socket read of the client within its read timeout),
    for ``for_s`` at most and then the rest at once: the body alone after the status line and headers
    (``headers_first``), or the whole answer. Counts the requests."""

    url: str = ""
    headers_first: bool = True
    every_s: float = 0.2
    for_s: float = 3.0
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, conn: socket.socket, stop: threading.Event) -> None:
        conn.settimeout(1.0)
        try:
            conn.recv(65536)
            with self.lock:
                self.requests += 1
            data = HEAD + ANSWER
            if self.headers_first:
                conn.sendall(HEAD)
                data = ANSWER
            until = time.monotonic() + self.for_s
            while data and time.monotonic() < until and not stop.is_set():
                conn.sendall(data[:1])
                data = data[1:]
                stop.wait(self.every_s)
            conn.sendall(data)
        except OSError:
            return  # the client gave up


@pytest.fixture
def trickling() -> Iterator[Trickling]:
    state = Trickling()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.02)
    stop = threading.Event()
    held: list[tuple[socket.socket, threading.Thread]] = []

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=state.answer, args=(conn, stop), daemon=True)
            held.append((conn, thread))
            thread.start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    state.url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        yield state
    finally:
        stop.set()
        acceptor.join(timeout=5)
        listener.close()
        for conn, thread in held:
            thread.join(timeout=5)
            conn.close()


def _settings(url: str) -> PrometheusSettings:
    # The client waits the 1 s timeout it sends Prometheus and half a second more for each socket read.
    return PrometheusSettings.model_validate({"url": url, "timeout": "1s", "retries": 2, "retry_backoff_s": 0})


def _read(url: str, deadline_s: float | None) -> tuple[float, object]:
    """One instant read through ``call`` inside a read deadline of ``deadline_s`` (None: none): how long it took and
    the answer, or the failure's reason."""
    client = connect(_settings(url))
    started = time.monotonic()
    try:
        if deadline_s is None:
            answer: object = call("a", QUERY, lambda: get_instant(client, {"query": QUERY}))
        else:
            with read_deadline(timedelta(seconds=deadline_s)):
                answer = call("a", QUERY, lambda: get_instant(client, {"query": QUERY}))
    except MetricsUnavailable as exc:
        answer = exc.reason
    return time.monotonic() - started, answer


def test_a_body_trickling_in_after_its_headers_ends_at_the_deadline(trickling: Trickling) -> None:
    took, reason = _read(trickling.url, DEADLINE_S)

    assert DEADLINE_S <= took <= DEADLINE_S + LATE_S, f"the read took {took:.2f} s against a {DEADLINE_S} s deadline"
    assert isinstance(reason, str), reason
    assert reason.startswith("Prometheus' answer did not arrive in time: it had begun ("), reason
    assert "bytes read) but its body was still coming in when the read deadline (1 s) ended the read" in reason
    assert trickling.requests == 1  # an answer that had begun is not asked again


def test_a_status_line_and_headers_trickling_in_end_at_the_deadline(trickling: Trickling) -> None:
    trickling.headers_first = False
    took, reason = _read(trickling.url, DEADLINE_S)

    assert DEADLINE_S <= took <= DEADLINE_S + LATE_S, f"the read took {took:.2f} s against a {DEADLINE_S} s deadline"
    assert isinstance(reason, str), reason
    assert reason.startswith("Prometheus' answer did not arrive in time: it had begun ("), reason
    assert "its status line and headers were still coming in when the read deadline (1 s) ended the read" in reason
    assert trickling.requests == 1  # no retry with the time up


def test_the_class_is_held_saying_the_answer_did_not_arrive_in_time(trickling: Trickling) -> None:
    source = PrometheusSource.from_settings(_settings(trickling.url), {"a": QUERY, "b": QUERY})
    started = time.monotonic()
    with read_deadline(timedelta(seconds=DEADLINE_S)):
        readings, missing = source.newest_each([DemandClass("a"), DemandClass("b")], NOW)
    took = time.monotonic() - started

    assert took <= DEADLINE_S + LATE_S, f"the read took {took:.2f} s against a {DEADLINE_S} s deadline"
    assert readings == {} and sorted(missing) == ["a", "b"]
    assert "Prometheus' answer did not arrive in time" in missing["a"].reason, missing["a"].reason
    assert "the time for reading demand (1 s) ran out" in missing["b"].reason, missing["b"].reason
    assert trickling.requests == 1  # b is held without a request


@pytest.mark.parametrize("deadline_s", [DEADLINE_S, None], ids=["within a deadline", "without one"])
def test_an_answer_trickling_in_whole_before_the_deadline_is_read(
    trickling: Trickling, deadline_s: float | None
) -> None:
    trickling.every_s = 0.002  # the answer takes about 0.3 s
    took, answer = _read(trickling.url, deadline_s)

    assert isinstance(answer, dict) and answer["data"]["result"][0]["value"] == [1.0, "4"], answer
    assert took < DEADLINE_S

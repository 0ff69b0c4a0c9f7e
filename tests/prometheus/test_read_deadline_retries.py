"""A read inside a read deadline ends by the deadline, its retries included: each try's timeout is cut to the time
left when the try is made, not only when the request is first sent (urllib3 hands the same timeout to every retry),
and no retry is started with less than ``MIN_TRY_S`` left. With a 1 s timeout (the client waits 1.5 s) and a 2 s
deadline, a Prometheus that accepts connections and never answers held a read 3 s: the retry, sent with 0.5 s left,
waited its whole 1.5 s. A local server on 127.0.0.1 that accepts and never answers stands in for it; the real
prometheus-api-client and requests session talk to it, nothing of the client is mocked."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from agent.sources.base import read_deadline
from agent.sources.prometheus import PROBE_QUERY, PrometheusSource
from agent.sources.prometheus_answer import get_instant
from agent.sources.prometheus_client import (
    MIN_TRY_S,
    READ_TIMEOUT_MARGIN_S,
    DeadlineTimeout,
    call,
    connect,
    request_timeout,
)
from config.prometheus import PrometheusSettings
from models import DemandClass, MetricsUnavailable

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
QUERY = "sum(gpu_demand)"
# The client waits the 1 s timeout it sends Prometheus and READ_TIMEOUT_MARGIN_S more.
TRY_S = 1.0 + READ_TIMEOUT_MARGIN_S
# How far past its deadline a read may end: the time to give up and tell why, on a busy machine (reads ended up to
# 0.42 s late with both cores loaded several times over; what these tests catch is seconds late, or a try too many).
LATE_S = 0.6


@dataclass
class Hanging:
    """Accepts connections, reads each request and never answers; when each request came and its first line."""

    url: str = ""
    requests: list[tuple[float, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def tries(self, query: str) -> list[float]:
        """When each request for ``query`` came (monotonic)."""
        word = f"query={query}".replace("(", "%28").replace(")", "%29")
        with self.lock:
            return [at for at, line in self.requests if word in line]


@pytest.fixture
def hanging() -> Iterator[Hanging]:
    state = Hanging()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.02)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            at = time.monotonic()
            held.append(conn)
            conn.settimeout(1.0)
            try:
                line = conn.recv(65536).split(b"\r\n", 1)[0].decode("latin-1")
            except OSError:
                line = ""
            with state.lock:
                state.requests.append((at, line))

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        yield state
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
        for conn in held:
            conn.close()


def _settings(url: str, retries: int) -> PrometheusSettings:
    return PrometheusSettings.model_validate({"url": url, "timeout": "1s", "retries": retries, "retry_backoff_s": 0})


def _read_demand_now(source: PrometheusSource) -> dict[str, MetricsUnavailable]:
    readings, missing = source.newest_each([DemandClass("a")], NOW)
    assert readings == {}
    return missing


def _read_history(source: PrometheusSource) -> dict[str, MetricsUnavailable]:
    frame, missing = source.fetch_each([DemandClass("a")], NOW - timedelta(hours=1), NOW, timedelta(minutes=5))
    assert frame.empty
    return missing


@pytest.mark.parametrize("read", [_read_demand_now, _read_history], ids=["demand now", "history"])
def test_a_retry_waits_only_the_time_left_before_the_deadline(
    hanging: Hanging, read: Callable[[PrometheusSource], dict[str, MetricsUnavailable]]
) -> None:
    source = PrometheusSource.from_settings(_settings(hanging.url, retries=2), {"a": QUERY})
    started = time.monotonic()
    with read_deadline(timedelta(seconds=2)):
        missing = read(source)
    took = time.monotonic() - started

    assert 2.0 <= took <= 2.0 + LATE_S, f"the read took {took:.2f} s against a 2 s deadline"
    tries = hanging.tries(QUERY)
    # The first try waited its whole timeout, the retry the 0.5 s left; no third try, no probe after the deadline.
    assert len(tries) == 2 and tries[1] - tries[0] >= TRY_S - 0.05, tries
    assert hanging.tries(PROBE_QUERY) == []
    reason = missing["a"].reason
    assert reason.startswith("not answered: the time for reading") and "ran out" in reason, reason
    assert "tried 2 times" in reason, reason


def test_no_retry_is_started_with_too_little_time_left(hanging: Hanging) -> None:
    client = connect(_settings(hanging.url, retries=2))
    deadline_s = TRY_S + MIN_TRY_S / 2  # the first try's whole timeout leaves less than MIN_TRY_S
    started = time.monotonic()
    with read_deadline(timedelta(seconds=deadline_s)), pytest.raises(MetricsUnavailable) as failed:
        call("a", QUERY, lambda: get_instant(client, {"query": QUERY}))
    took = time.monotonic() - started

    assert took <= deadline_s + LATE_S, f"the read took {took:.2f} s against a {deadline_s} s deadline"
    assert len(hanging.tries(QUERY)) == 1
    assert failed.value.reason == f"Prometheus did not answer within {TRY_S:g} s (read timeout)"


def test_the_timeout_is_the_configured_one_outside_a_deadline_and_the_time_left_inside() -> None:
    assert request_timeout(TRY_S) == TRY_S
    assert request_timeout(None) is None
    with read_deadline(timedelta(seconds=0.5)):
        cut = request_timeout(TRY_S)
        with read_deadline(None):  # a read that lifts the outer deadline
            assert request_timeout(TRY_S) == TRY_S
    assert isinstance(cut, DeadlineTimeout)
    assert 0.4 <= cut.read_timeout <= 0.5
    assert 0.4 <= cut.clone().connect_timeout <= 0.5  # each try (a clone) cuts it again

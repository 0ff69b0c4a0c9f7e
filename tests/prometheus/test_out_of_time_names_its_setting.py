"""A class not queried because the time for reading ran out says which setting gives that time: the tick's read
deadline (``loop.read_deadline``) for demand, a share of ``loop.tick_interval`` for the on-prem capacity and the
burst profile's history. Before, the reason said only that the time ran out and Prometheus was slow, and a person
had to know which of the settings bounded which read.

A small local HTTP server (``tests.fakes.http_server.serving``) stands in for Prometheus: it accepts and reads each
query and answers none until the test ends; the real prometheus-api-client and requests session talk to it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler

import pytest

from agent.sources.base import READ_DEADLINE_SETTING, read_deadline
from agent.sources.prometheus import PrometheusSource
from config.prometheus import PrometheusSettings
from models import DemandClass
from tests.fakes.http_server import serving

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
QUERIES = {"a": "sum(a_gpus)", "b": "sum(b_gpus)"}
DEADLINE = timedelta(seconds=0.5)


@pytest.fixture
def hung_url() -> Iterator[str]:
    released = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            released.wait()  # accepted and read, never answered
            self.close_connection = True

        def log_message(self, format: str, *args: object) -> None:
            return

    with serving(Handler) as url:
        try:
            yield url
        finally:
            released.set()


def _missing_b(url: str, *setting: str) -> str:
    settings = PrometheusSettings.model_validate({"url": url, "timeout": "1s", "retries": 0, "retry_backoff_s": 0})
    source = PrometheusSource.from_settings(settings, QUERIES)
    with read_deadline(DEADLINE, *setting):
        readings, missing = source.newest_each([DemandClass("a"), DemandClass("b")], NOW)
    assert readings == {} and sorted(missing) == ["a", "b"]
    return missing["b"].reason


def test_a_class_the_tick_had_no_time_left_for_names_the_read_deadline(hung_url: str) -> None:
    reason = _missing_b(hung_url)

    assert reason.startswith("not queried: the time for reading demand (0.5 s) ran out"), reason
    assert reason.endswith(f"That time is set by {READ_DEADLINE_SETTING}"), reason


def test_a_read_within_a_share_of_the_tick_names_the_tick_interval(hung_url: str) -> None:
    share = "loop.tick_interval (on-prem capacity is read within 10% of a tick)"
    reason = _missing_b(hung_url, share)

    assert reason.endswith(f"That time is set by {share}"), reason
    assert "loop.read_deadline" not in reason, reason

"""``loop.read_deadline``: how long a tick reads demand before it holds the classes not read. Unset it is half the
tick, as before; an operator whose Prometheus answers slower than that sets it longer, and the tick then reads and
plans on the demand it would have held. A deadline of a whole tick or more is refused at load, naming the key.

A small local HTTP server stands in for Prometheus (as tests/test_onprem_read_deadline.py does): every demand
query a tick reads within its deadline answers 8 after ``DELAY_S``, in the documented shapes (Prometheus HTTP API,
"Instant vectors", "Range vectors"); the real prometheus-api-client and requests session talk to it. The first tick's
refit reads the whole 6-hour history outside the deadline (``agent.model_refits.refit_in_tick``): that read is
answered at once, as the deadline is not what it shows."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from actuators import SimulatedCluster
from agent.ledger import InMemoryLedger
from agent.loop import Agent, AgentParts
from agent.notify.recording import RecordingNotifier
from agent.sources.prometheus import PrometheusSource
from config import settings_from_mapping
from config.reference import reference_markdown
from config.schema import Settings
from forecasting.factory import build_forecaster
from models import ConfigError
from models.clock import SimulatedClock
from tests.fakes.http_server import serving

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
DEMAND = "sum(demand_gpus)"
DELAY_S = 2.0  # longer than half the 3-second tick, shorter than the 2.8 s deadline set
RECENT_S = 15 * 60  # forecast.max_staleness: the span of the window a tick reads; the refit's read is longer


class _SlowPrometheus(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        url = urlparse(self.path)
        args = {k: v[-1] for k, v in parse_qs(url.query).items()}
        refit = url.path == "/api/v1/query_range" and int(args["end"]) - int(args["start"]) > RECENT_S
        if args.get("query") == DEMAND and not refit:
            time.sleep(DELAY_S)
        if url.path == "/api/v1/query":
            sample = {"metric": {}, "value": [float(args.get("time", time.time())), "8"]}
            body: dict[str, Any] = {"status": "success", "data": {"resultType": "vector", "result": [sample]}}
        else:
            start, end, step = (int(args[k]) for k in ("start", "end", "step"))
            values = [[t, "8"] for t in range(start, end + 1, step)]
            body = {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": values}]}}
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
def url() -> Iterator[str]:
    with serving(_SlowPrometheus) as served:
        yield served


def _document(url: str, loop: dict[str, str]) -> dict[str, Any]:
    pool = {"id": "a100", "kind": "gpu-node-pool", "tier": "on-demand", "chips_per_unit": 8, "max_units": 10,
            "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": ["train"]}  # fmt: skip
    return {
        "demand_classes": [{"name": "train"}],
        "pools": [pool],
        "forecast": {"model": "persistence", "history": "6h", "step": "5m", "max_staleness": "15m"},
        "loop": loop,
        "ledger": {"backend": "memory"},
        "prometheus": {"url": url, "timeout": "10s", "retries": 0, "classes": {"train": {"query": DEMAND}}},
    }


def _observe(settings: Settings) -> tuple[dict[str, float], dict[str, str]]:
    assert settings.prometheus is not None
    parts = AgentParts(
        PrometheusSource.from_settings(settings.prometheus, {"train": DEMAND}),
        build_forecaster(settings.forecast),
        SimulatedCluster(settings.pool_specs(), SimulatedClock(NOW)),
        InMemoryLedger(),
        RecordingNotifier(),
    )
    outlook = Agent(settings, parts).observe(NOW)
    return outlook.observed, outlook.problems


def test_unset_a_tick_reads_for_half_its_interval_and_holds_the_class_not_read(url: str) -> None:
    settings = settings_from_mapping(_document(url, {"tick_interval": "3s"}), source="read deadline test")
    observed, problems = _observe(settings)
    assert observed == {}
    assert "the time for reading demand" in problems["train"], problems


def test_a_longer_deadline_reads_the_slow_demand_and_plans_on_it(url: str) -> None:
    document = _document(url, {"tick_interval": "3s", "read_deadline": "2800ms"})
    observed, problems = _observe(settings_from_mapping(document, source="read deadline test"))
    assert (observed, problems) == ({"train": 8.0}, {})


@pytest.mark.parametrize("deadline", ["3s", "1m"])
def test_a_deadline_of_a_tick_or_more_is_refused_naming_the_key(deadline: str) -> None:
    document = _document("http://127.0.0.1:9", {"tick_interval": "3s", "read_deadline": deadline})
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping(document, source="read deadline test")
    [(key, message)] = [(p.key_path, p.message) for p in caught.value.problems]
    assert key == "loop.read_deadline"
    assert message.startswith(f"must be shorter than one tick (loop.tick_interval, 3s), got {deadline}")
    [row] = [line for line in reference_markdown().splitlines() if line.startswith("| `read_deadline` |")]
    assert "shorter than `loop.tick_interval`" in row and "half of `loop.tick_interval`" in row

"""A demand now that Prometheus answers with a value that is not a number holds the class, as the same value in the
range read does; a demand now that is not answered (a server error, a timeout) lets the range's newest value stand in.

The tick reads each class's range (``/api/v1/query_range``), then its value at the tick (``/api/v1/query``). A range
read that is fine and an instant answer of ``"abc"`` used to let the range's newest value stand in, with a warning in
the log alone: the class was planned on an older value while Prometheus was answering nonsense for it. A failed
request is another matter: the next tick's read is likely to get through, and the range's newest value, judged for
staleness as ever, is the class's demand meanwhile. A small local HTTP server answers every range query with 16 and
the instant query of the class ``broken`` as the test says; the real prometheus-api-client talks to it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from actuators.simulated import SimulatedCluster
from agent.commands.recommend import recommend
from agent.sources.prometheus import PrometheusSource
from config import load_settings
from config.prometheus import PrometheusSettings
from models import DemandClass, MalformedAnswer, MetricsUnavailable
from models.clock import SimulatedClock
from models.errors import PrometheusServerFailure
from tests.fakes.http_server import serving
from tests.prometheus.test_recommend import WritesForbidden
from tests.prometheus.test_sample_not_a_number import AT, QUERIES, STEP, _Answers, _config, _not_a_number

pytestmark = pytest.mark.xdist_group("prometheus")  # one worker runs the module: see ``unanswered_now_read``
CLASSES = [DemandClass(name="steady"), DemandClass(name="broken")]
UNITS = {"a100-on-demand": 4, "h100-on-demand": 4}
SLOW_S = 2.5  # the instant answer's delay in "timeout": above the client's wait (the query's timeout, 1 s, + 0.5 s)


class _NowAnswers(BaseHTTPRequestHandler):
    """Every range query answered with 16 at each step; every instant query (the probe's ``vector(1)`` too) with 16,
    but the one naming the class ``broken``, answered as ``mode`` says: ``abc`` (a value that is not a number),
    ``503`` (a server error), ``timeout`` (no answer within the source's timeout), ``null`` (no value, its empty
    result sent as null) or ``proxy`` (a proxy's JSON at 200)."""

    protocol_version = "HTTP/1.1"
    mode = "abc"

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        args = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        broken = parts.path == "/api/v1/query" and '"broken"' in args.get("query", "")
        if parts.path == "/api/v1/query_range":
            start, end, step = float(args["start"]), float(args["end"]), int(args["step"])
            values = [[t, "16"] for t in range(math.ceil(start), math.floor(end) + 1, step)]
            data: dict[str, Any] = {"resultType": "matrix", "result": [{"metric": {}, "values": values}]}
        else:
            at = float(args.get("time", AT.timestamp()))  # the probe asks without a time
            value, metric = ("abc", {"class": "broken"}) if broken else ("16", {})
            data = {"resultType": "vector", "result": [{"metric": metric, "value": [at, value]}]}
        if broken and self.mode == "503":
            self._send(503, {"status": "error", "errorType": "unavailable", "error": "overloaded"})
            return
        if broken and self.mode == "null":  # an empty vector as some Go servers encode it (GMP's frontend, Cortex's)
            self._send(200, {"status": "success", "data": {"resultType": "vector", "result": None}})
            return
        if broken and self.mode == "proxy":  # JSON that is no query's answer, from a proxy in front of Prometheus
            self._send(200, {"message": "upstream timed out"})
            return
        if broken and self.mode == "timeout":
            time.sleep(SLOW_S)
        self._send(200, {"status": "success", "data": data})

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the client gave up waiting (``timeout``)
            pass

    def log_message(self, format: str, *args: object) -> None:
        return


def _answering(mode: str) -> type[_NowAnswers]:
    return type("_NowAnswersWith", (_NowAnswers,), {"mode": mode})


@pytest.fixture(params=["abc", "503", "timeout"])
def now_mode(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    mode = str(request.param)
    with serving(_answering(mode)) as url:
        yield mode, url


def _source(url: str) -> PrometheusSource:
    settings = PrometheusSettings.model_validate({"url": url, "retries": 0, "timeout": "1s"})
    return PrometheusSource.from_settings(settings, QUERIES)


def _told(reason: str) -> str:
    """A class's problem as the range read tells it (``MetricsUnavailable``'s own words, with the query)."""
    return str(MetricsUnavailable("broken", reason, QUERIES["broken"]))


def test_the_range_is_fine_and_only_the_demand_now_is_not(now_mode: tuple[str, str]) -> None:
    _, url = now_mode
    frame, missing = _source(url).fetch_each(CLASSES, AT - timedelta(hours=1), AT, STEP)
    assert missing == {}
    assert set(frame["unique_id"]) == {"steady", "broken"} and (frame["y"] == 16).all()


def test_a_range_value_that_is_not_a_number_is_a_malformed_answer_too() -> None:
    with serving(_Answers) as url:  # every value of the class ``broken`` is "abc", in the range as at an instant
        _, missing = _source(url).fetch_each(CLASSES, AT - timedelta(hours=1), AT, STEP)
    assert isinstance(missing["broken"], MalformedAnswer)
    assert str(missing["broken"]) == _told(_not_a_number(AT - timedelta(hours=1)))


def _recommend(url: str, tmp_path: Path) -> dict[str, Any]:
    config = _config(tmp_path, url)
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    raw["prometheus"]["timeout"] = "1s"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    settings = load_settings(config)
    read_side = WritesForbidden(SimulatedCluster(settings.pool_specs(), SimulatedClock(AT), initial_units=UNITS))
    document = recommend(settings, str(config), tmp_path / "out", AT, read_side, pool_state_source="test")
    assert read_side.writes == []
    return document


def _rows(document: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """The classes by name, the pool serving ``broken``, and the missing-data alerts of a recommendation."""
    classes = {c["name"]: c for c in document["classes"]}
    pool = {p["pool_id"]: p for p in document["pools"]}["h100-on-demand"]
    return classes, pool, [a for a in document["alerts"] if a["kind"] == "missing-data"]


@pytest.mark.parametrize("mode", ["503", "timeout", "null", "proxy"])
def test_recommend_lets_the_range_stand_in_for_a_demand_now_that_failed(mode: str, tmp_path: Path) -> None:
    with serving(_answering(mode)) as url:
        document = _recommend(url, tmp_path)

    classes, pool, missing_data = _rows(document)
    assert classes["steady"]["observed"] == 16.0 and classes["steady"]["problem"] is None
    assert classes["broken"]["observed"] == 16.0 and classes["broken"]["problem"] is None  # the range's newest
    assert document["problems"] == {} and missing_data == []
    assert "(broken: q0.9 peak 16, now 16)" in pool["why"]


def test_recommend_holds_a_class_whose_demand_now_is_not_a_number(tmp_path: Path) -> None:
    with serving(_answering("abc")) as url:
        document = _recommend(url, tmp_path)

    classes, pool, missing_data = _rows(document)
    told = _told(_not_a_number(AT))  # word for word what a range read of the same value says
    assert classes["steady"]["observed"] == 16.0 and classes["steady"]["problem"] is None
    assert classes["broken"]["observed"] is None  # the range's newest value, 16, does not stand in
    assert classes["broken"]["problem"] == told
    assert document["problems"] == {"broken": told}
    (alert,) = missing_data
    assert alert["subject"] == "demand class broken"
    assert alert["details"] == {"broken": told}
    assert (pool["action"], pool["recommended_units"]) == ("hold", 4)  # the planner keeps its capacity
    assert pool["reason"].startswith("missing-data")


NowRead = tuple[dict[str, tuple[datetime, float]], dict[str, MetricsUnavailable]]


@pytest.fixture(scope="module", autouse=True)
def unanswered_now_read() -> Iterator[Future[NowRead]]:
    """The demand now read from a server whose instant answer for ``broken`` comes after the client's wait (mode
    ``timeout``: 1.5 s waited), in a thread of its own (its server and source its own) from the module's first test
    on, while the other tests run; it has ended before its server stops."""
    with (
        serving(_answering("timeout")) as url,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="unanswered-now-read") as pool,
    ):
        yield pool.submit(lambda: _source(url).newest_each(CLASSES, AT))


# Last in the module: the read of mode ``timeout`` goes on meanwhile (``unanswered_now_read``).
@pytest.mark.parametrize("mode", ["abc", "503", "timeout"])
def test_only_a_demand_now_that_is_not_a_number_is_a_malformed_answer(
    mode: str, unanswered_now_read: Future[NowRead]
) -> None:
    if mode == "timeout":
        readings, missing = unanswered_now_read.result()
    else:
        with serving(_answering(mode)) as url:
            readings, missing = _source(url).newest_each(CLASSES, AT)

    assert readings == {"steady": (AT, 16.0)}
    assert list(missing) == ["broken"]
    why = missing["broken"]
    if mode == "abc":
        assert isinstance(why, MalformedAnswer)
        assert str(why) == _told(_not_a_number(AT))
    else:  # a request that failed is the server's failure, not an answer that is nonsense
        assert isinstance(why, PrometheusServerFailure) and not isinstance(why, MalformedAnswer)
        assert ("HTTP 503" if mode == "503" else "did not answer within 1.5 s (read timeout)") in why.reason

"""A sample value Prometheus sends that is not a number is told as itself, never as NaN and never as zero.

Prometheus' HTTP API sends each sample value as a string ("Expression query result formats"): a float literal, or
``NaN``, ``+Inf``, ``-Inf``. A value that is none of these (``"abc"`` from a broken proxy or a fake) was read as NaN,
so ``recommend`` said "the newest value Prometheus returned (...) is NaN" and sent one looking for a NaN in the
query. Now the class is unavailable (its pools held, as for missing data) with "value 'abc' at <time> is not a
number", and the legal values keep their meaning: a real Prometheus' NaN (``vector(0) / 0``) is still told as NaN.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from actuators.simulated import SimulatedCluster
from agent.cli import main
from agent.commands.recommend import recommend
from agent.sources.prometheus import PrometheusSource
from config import load_settings
from config.prometheus import PrometheusSettings
from models import DemandClass, MetricsUnavailable
from models.clock import SimulatedClock
from tests.fakes.http_server import serving
from tests.prometheus.server import PrometheusServer
from tests.prometheus.test_recommend import WritesForbidden

pytestmark = pytest.mark.xdist_group("prometheus")
AT = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
STEP = timedelta(minutes=5)
QUERIES = {name: f'sum(demand{{class="{name}"}})' for name in ("steady", "broken")}
BROKEN = "abc"


class _Answers(BaseHTTPRequestHandler):
    """Range and instant queries, every sample 16 (the probe's ``vector(1)`` too), but ``BROKEN`` for a query naming
    the class ``broken``; ``value`` overrides the broken class's value (a legal NaN or infinity)."""

    protocol_version = "HTTP/1.1"
    value = BROKEN

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        args = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        value = self.value if '"broken"' in args.get("query", "") else "16"
        metric = {"class": "broken"} if value != "16" else {}
        if parts.path == "/api/v1/query_range":
            start, end, step = float(args["start"]), float(args["end"]), int(args["step"])
            stamps = range(math.ceil(start), math.floor(end) + 1, step)
            data: dict[str, Any] = {
                "resultType": "matrix",
                "result": [{"metric": metric, "values": [[t, value] for t in stamps]}],
            }
        else:
            at = float(args.get("time", AT.timestamp()))  # the probe asks without a time
            data = {"resultType": "vector", "result": [{"metric": metric, "value": [at, value]}]}
        body = json.dumps({"status": "success", "data": data}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


def _answering(value: str) -> type[_Answers]:
    return type("_AnswersWith", (_Answers,), {"value": value})


@pytest.fixture
def fake() -> Iterator[str]:
    with serving(_Answers) as url:
        yield url


def _source(url: str) -> PrometheusSource:
    return PrometheusSource.from_settings(PrometheusSettings.model_validate({"url": url, "retries": 0}), QUERIES)


def _not_a_number(at: datetime) -> str:
    return (
        f"malformed answer from Prometheus: value 'abc' at {at.isoformat()} of the series {{class='broken'}} is not "
        "a number"
    )


CLASSES = [DemandClass(name="steady"), DemandClass(name="broken")]


@pytest.mark.parametrize("history", [False, True], ids=["newest", "history"])
def test_a_range_read_tells_the_value_that_is_not_a_number(fake: str, history: bool) -> None:
    source = _source(fake)
    read = source.fetch_history if history else source.fetch_each
    frame, missing = read(CLASSES, AT - timedelta(hours=1), AT, STEP)

    assert set(missing) == {"broken"}
    assert missing["broken"].reason == _not_a_number(AT - timedelta(hours=1))  # the first such value
    assert missing["broken"].query == QUERIES["broken"]
    assert "NaN" not in str(missing["broken"])
    assert set(frame["unique_id"]) == {"steady"}
    assert (frame["y"] == 16).all()


def test_an_instant_read_tells_the_value_that_is_not_a_number(fake: str) -> None:
    source = _source(fake)
    readings, missing = source.newest_each(CLASSES, AT)

    assert readings == {"steady": (AT, 16.0)}
    assert missing["broken"].reason == _not_a_number(AT)
    with pytest.raises(MetricsUnavailable) as raised:
        source.instant("broken", QUERIES["broken"], AT)
    assert raised.value.reason == _not_a_number(AT)


@pytest.mark.parametrize(("sent", "meant"), [("NaN", math.nan), ("+Inf", math.inf), ("-Inf", -math.inf)])
def test_nan_and_the_infinities_keep_their_meaning(sent: str, meant: float) -> None:
    with serving(_answering(sent)) as url:
        source = _source(url)
        at, value = source.newest("broken", QUERIES["broken"], AT)
        with pytest.raises(MetricsUnavailable) as ranged:
            source.series("broken", QUERIES["broken"], AT - timedelta(hours=1), AT, STEP)
    assert at == AT
    assert value == meant or (math.isnan(meant) and math.isnan(value))
    assert "is not a number" not in ranged.value.reason
    expected = "is NaN" if sent == "NaN" else "is not a demand"
    assert expected in ranged.value.reason


def _config(tmp_path: Path, url: str) -> Path:
    document: dict[str, Any] = {
        "demand_classes": [{"name": name} for name in QUERIES],
        "pools": [
            {
                "id": "a100-on-demand",
                "kind": "gpu-node-pool",
                "chips_per_unit": 8,
                "max_units": 60,
                "price_per_chip_hour_usd": 3.67,
                "lead_time": "10m",
                "serves": ["steady"],
            },
            {
                "id": "h100-on-demand",
                "kind": "gpu-node-pool",
                "chips_per_unit": 8,
                "max_units": 60,
                "price_per_chip_hour_usd": 9.8,
                "lead_time": "10m",
                "serves": ["broken"],
            },
        ],
        "prometheus": {
            "url": url,
            "retries": 0,
            "classes": {name: {"query": query} for name, query in QUERIES.items()},
        },
        "ledger": {"path": str(tmp_path / "leadtime-ledger.sqlite")},
    }
    path = tmp_path / "leadtime.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def test_recommend_holds_the_class_and_alerts_with_the_value(fake: str, tmp_path: Path) -> None:
    config = _config(tmp_path, fake)
    settings = load_settings(config)
    units = {"a100-on-demand": 4, "h100-on-demand": 4}
    read_side = WritesForbidden(SimulatedCluster(settings.pool_specs(), SimulatedClock(AT), initial_units=units))

    document = recommend(settings, str(config), tmp_path / "out", AT, read_side, pool_state_source="test")

    (alert,) = [a for a in document["alerts"] if a["kind"] == "missing-data"]
    assert alert["subject"] == "demand class broken"
    told = alert["details"]["broken"]
    assert re.fullmatch(
        r"metrics unavailable for demand class 'broken': malformed answer from Prometheus: value 'abc' at \S+ of "
        r"the series \{class='broken'\} is not a number \(query: sum\(demand\{class=\"broken\"\}\)\)",
        told,
    ), told
    held = {p["pool_id"]: p for p in document["pools"]}["h100-on-demand"]
    assert (held["action"], held["recommended_units"]) == ("hold", 4)  # held at its units, never read as zero


def test_the_command_line_names_the_value_not_nan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with serving(_answering(BROKEN)) as url:
        config = _config(tmp_path, url)
        raw = yaml.safe_load(config.read_text(encoding="utf-8"))
        raw["prometheus"]["classes"]["steady"]["query"] = QUERIES["broken"].replace("demand", "other_demand")
        config.write_text(yaml.safe_dump(raw), encoding="utf-8")
        args = ["recommend", "--config", str(config), "--out", str(tmp_path / "o"), "--at", AT.isoformat()]
        code = main([*args, "--current-units", "a100-on-demand=4,h100-on-demand=4"])
    (line,) = capsys.readouterr().err.splitlines()
    assert code == 3
    assert re.fullmatch(
        rf"leadtime: Prometheus at {re.escape(url)} has no usable data for any demand class: 'steady', 'broken': "
        r"malformed answer from Prometheus: value 'abc' at \S+ of the series \{class='broken'\} is not a number",
        line,
    ), line


def test_a_real_prometheus_nan_is_still_told_as_nan(empty_prometheus: PrometheusServer) -> None:
    source = _source(empty_prometheus.url)
    query = "vector(0) / 0"
    at, value = source.newest("zero-by-zero", query, AT)
    with pytest.raises(MetricsUnavailable) as ranged:
        source.series("zero-by-zero", query, AT - timedelta(hours=1), AT, STEP)
    assert at == AT and math.isnan(value)
    newest = (AT - STEP).isoformat()  # the grid is [start, end): its newest step starts a step before AT
    assert ranged.value.reason == f"the newest value Prometheus returned ({newest}) is NaN"

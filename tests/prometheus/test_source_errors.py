"""PrometheusSource against a small local HTTP stub for what a healthy server cannot be made to do: server
errors, timeouts, refused credentials, dead endpoints, malformed answers. The real prometheus-api-client
talks HTTP to it; nothing of the client is mocked."""

from __future__ import annotations

import json
import logging
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from agent.sources.prometheus import PrometheusSource
from config.prometheus import PrometheusSettings
from models import DemandClass, MetricsUnavailable
from tests.prometheus.server import free_port

STEP = timedelta(minutes=5)
END = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
QUERY = 'sum(kueue_cluster_queue_resource_usage{cluster_queue="a"})'
TOKEN = "s3cret-token"
# Annotations a successful answer can carry (Prometheus HTTP API, "Format overview"): ``infos`` since Prometheus
# 2.45 (promql/annotations: "PromQL info: metric might not be a counter, name does not end in _total/_sum/_count/
# _bucket"), and the ``warnings`` Thanos adds to a partial response when one of its stores fails.
ANNOTATIONS: dict[str, dict[str, list[str]]] = {
    "infos": {"infos": ['PromQL info: metric might not be a counter, name does not end in _total: "gpu_demand"']},
    "partial": {"warnings": ["receive store 10.0.3.7:10901: rpc error: code = Unavailable desc = connection refused"]},
}


@dataclass
class StubState:
    mode: str = "ok"
    delay_s: float = 0.0
    requests: list[dict[str, str]] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    state: StubState

    def do_GET(self) -> None:
        state = self.state
        state.requests.append(dict(self.headers.items()))
        if state.delay_s:
            time.sleep(state.delay_s)
        if state.mode == "500":
            self._reply(500, {"status": "error", "error": "internal"})
        elif state.mode == "auth" and self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._reply(401, {"status": "error", "error": "unauthorized"})
        elif state.mode == "garbage":
            self._send(200, b"<html>proxy login</html>")
        else:
            url = urlparse(self.path)
            args = parse_qs(url.query)
            body: dict[str, object]
            if url.path == "/api/v1/query":  # an instant query: a vector of one sample at the query's time
                sample = {"metric": {}, "value": [float(args["time"][0]), "6"]}
                body = {"status": "success", "data": {"resultType": "vector", "result": [sample]}}
            else:
                start, end, step = (int(args[k][0]) for k in ("start", "end", "step"))
                values = [[t, "4"] for t in range(start, end + 1, step)]
                body = {
                    "status": "success",
                    "data": {"resultType": "matrix", "result": [{"metric": {}, "values": values}]},
                }
            if state.mode in ANNOTATIONS:
                body |= ANNOTATIONS[state.mode]
            self._reply(200, body)

    def _reply(self, code: int, body: object) -> None:
        self._send(code, json.dumps(body).encode())

    def _send(self, code: int, payload: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        return


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        return  # a client that gave up (the timeout test) leaves a broken pipe behind; that is expected


def _serve(tls: ssl.SSLContext | None = None) -> Iterator[tuple[str, StubState]]:
    state = StubState()
    handler = type("Handler", (_Handler,), {"state": state})
    server = _QuietServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def stub() -> Iterator[tuple[str, StubState]]:
    yield from _serve()


@pytest.fixture
def tls_stub(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    cert, key = tmp_path / "ca.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    for url, _ in _serve(context):
        yield url, cert


def _source(url: str, **overrides: object) -> PrometheusSource:
    settings = PrometheusSettings.model_validate({"url": url, "retries": 0, "retry_backoff_s": 0, **overrides})
    return PrometheusSource.from_settings(settings, {"gpu-a": QUERY})


def _fetch(source: PrometheusSource) -> None:
    source.fetch([DemandClass("gpu-a")], END - timedelta(hours=1), END, STEP)


def test_the_stub_answers_like_prometheus(stub: tuple[str, StubState]) -> None:
    url, _ = stub
    frame = _source(url).fetch([DemandClass("gpu-a")], END - timedelta(hours=1), END, STEP)
    assert frame["y"].tolist() == [4.0] * 12


def test_server_errors_are_retried_a_bounded_number_of_times_then_unavailable(stub: tuple[str, StubState]) -> None:
    url, state = stub
    state.mode = "500"
    with pytest.raises(MetricsUnavailable, match=r"server error \(HTTP 500\)") as caught:
        _fetch(_source(url, retries=2))
    assert len(state.requests) == 3  # the first try and two retries
    assert caught.value.demand_class == "gpu-a"
    assert caught.value.query == QUERY


def test_a_slow_server_times_out(stub: tuple[str, StubState]) -> None:
    url, state = stub
    state.delay_s = 10.0
    started = time.monotonic()
    with pytest.raises(MetricsUnavailable, match="timeout"):
        _fetch(_source(url, timeout="1s"))
    assert time.monotonic() - started < 8.0  # gave up at its timeout, long before the answer (margin: 8x)


def test_the_bearer_token_comes_from_its_file_and_a_wrong_one_is_refused(
    stub: tuple[str, StubState], tmp_path: Path
) -> None:
    url, state = stub
    state.mode = "auth"
    token_file = tmp_path / "token"
    token_file.write_text("not-the-token\n", encoding="utf-8")
    source = _source(url, bearer_token_file=str(token_file))
    with pytest.raises(MetricsUnavailable, match=r"refused the credentials \(HTTP 401\).*bearer_token_file"):
        _fetch(source)
    token_file.write_text(f"{TOKEN}\n", encoding="utf-8")  # rotated: read again on the next fetch
    _fetch(source)
    assert state.requests[-1]["Authorization"] == f"Bearer {TOKEN}"


def test_a_missing_token_file_is_unavailable(stub: tuple[str, StubState], tmp_path: Path) -> None:
    url, state = stub
    with pytest.raises(MetricsUnavailable, match="bearer token file"):
        _fetch(_source(url, bearer_token_file=str(tmp_path / "absent")))
    assert state.requests == []


def test_a_dead_endpoint_is_unavailable() -> None:
    with pytest.raises(MetricsUnavailable, match="cannot connect"):
        _fetch(_source(f"http://127.0.0.1:{free_port()}"))


def test_a_non_json_answer_is_unavailable(stub: tuple[str, StubState]) -> None:
    url, state = stub
    state.mode = "garbage"
    with pytest.raises(MetricsUnavailable, match="malformed answer"):
        _fetch(_source(url))


def test_an_unknown_class_names_the_configured_ones(stub: tuple[str, StubState]) -> None:
    url, _ = stub
    with pytest.raises(MetricsUnavailable, match=r"no Prometheus query is configured.*gpu-a"):
        _source(url).fetch([DemandClass("tpu-b")], END - timedelta(hours=1), END, STEP)


def test_the_custom_ca_file_verifies_the_server(tls_stub: tuple[str, Path]) -> None:
    url, ca = tls_stub
    with pytest.raises(MetricsUnavailable, match="TLS verification failed"):
        _fetch(_source(url))  # the system trust store does not know this server
    frame = _source(url, ca_file=str(ca)).fetch([DemandClass("gpu-a")], END - timedelta(hours=1), END, STEP)
    assert frame["y"].tolist() == [4.0] * 12


def test_infos_are_logged_and_the_answer_is_used(stub: tuple[str, StubState], caplog: pytest.LogCaptureFixture) -> None:
    url, state = stub
    state.mode = "infos"
    with caplog.at_level(logging.INFO, logger="agent.sources.prometheus"):
        frame = _source(url).fetch([DemandClass("gpu-a")], END - timedelta(hours=1), END, STEP)
    assert frame["y"].tolist() == [4.0] * 12
    assert [r.levelno for r in caplog.records if "might not be a counter" in r.getMessage()] == [logging.INFO]


def test_a_partial_response_is_unavailable_and_logged_once(
    stub: tuple[str, StubState], caplog: pytest.LogCaptureFixture
) -> None:
    url, state = stub
    state.mode = "partial"
    with (
        caplog.at_level(logging.WARNING, logger="agent.sources.prometheus"),
        pytest.raises(MetricsUnavailable, match=r"warnings.*partial.*receive store 10\.0\.3\.7") as caught,
    ):
        _source(url, max_points_per_query=4).fetch([DemandClass("gpu-a")], END - timedelta(hours=1), END, STEP)
    assert caught.value.demand_class == "gpu-a"
    assert len([r for r in caplog.records if "receive store" in r.getMessage()]) == 1


def test_the_demand_now_is_read_at_the_instant_asked(stub: tuple[str, StubState]) -> None:
    readings, missing = _source(stub[0]).newest_each([DemandClass("gpu-a")], END)
    assert readings == {"gpu-a": (END, 6.0)} and missing == {}


@pytest.mark.parametrize(
    ("mode", "reason"),
    [("500", "server error"), ("partial", "warnings"), ("garbage", "malformed"), ("auth", "credentials")],
)
def test_a_demand_now_that_cannot_be_read_is_unavailable_for_its_class(
    stub: tuple[str, StubState], tmp_path: Path, mode: str, reason: str
) -> None:
    url, state = stub
    state.mode = mode
    wrong = tmp_path / "token"
    wrong.write_text("wrong-token")
    source = _source(url, bearer_token_file=str(wrong)) if mode == "auth" else _source(url)
    readings, missing = source.newest_each([DemandClass("gpu-a"), DemandClass("gpu-b")], END)
    assert readings == {}
    assert list(missing) == ["gpu-a", "gpu-b"]
    assert reason in missing["gpu-a"].reason
    assert "no Prometheus query is configured" in missing["gpu-b"].reason

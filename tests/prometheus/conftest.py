"""Fixtures: one real Prometheus server per test session, loaded with the bundled trace (see ``server``), and one
with no data of its own whose remote-read store is down, so that every answer carries warnings; and one with no
data at all per module that asks for it (``empty_prometheus``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.prometheus.server import (
    LoadedTrace,
    PrometheusServer,
    backfill,
    free_port,
    load_trace,
    prometheus_available,
)


@pytest.fixture(scope="session")
def loaded_trace() -> LoadedTrace:
    return load_trace()


@pytest.fixture(scope="session")
def prometheus(loaded_trace: LoadedTrace, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    if not prometheus_available():
        pytest.fail("prometheus and promtool must be on PATH (Debian package `prometheus`; `make prometheus`)")
    work = tmp_path_factory.mktemp("prometheus")
    data_dir = work / "data"
    data_dir.mkdir()
    backfill(loaded_trace, data_dir, work)
    server = PrometheusServer(data_dir, work)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def prometheus_partial(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """A Prometheus whose remote-read endpoint refuses connections. Remote storage is a secondary querier, whose
    errors Prometheus turns into ``warnings`` of an otherwise successful answer (storage/fanout.go), the same shape
    as a Thanos or Cortex partial response. ``read_recent`` makes every query ask it."""
    if not prometheus_available():
        pytest.fail("prometheus and promtool must be on PATH (Debian package `prometheus`; `make prometheus`)")
    work = tmp_path_factory.mktemp("prometheus-partial")
    data_dir = work / "data"
    data_dir.mkdir()
    dead = f"http://127.0.0.1:{free_port()}/api/v1/read"
    server = PrometheusServer(data_dir, work, extra_config=f"remote_read:\n  - url: {dead}\n    read_recent: true\n")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def empty_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """A real Prometheus with no data, one per module: what it answers of a query over nothing (``vector(0) / 0``,
    a selector matching no series) is Prometheus's own."""
    assert prometheus_available(), "prometheus and promtool must be on PATH (Debian package `prometheus`)"
    work = tmp_path_factory.mktemp("prometheus-empty")
    (work / "data").mkdir()
    server = PrometheusServer(work / "data", work)
    server.start()
    try:
        yield server
    finally:
        server.stop()

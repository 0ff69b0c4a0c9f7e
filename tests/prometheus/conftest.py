"""Fixtures: one real Prometheus server per test session, loaded with the bundled trace (see ``server``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.prometheus.server import LoadedTrace, PrometheusServer, backfill, load_trace, prometheus_available


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

"""What ``agent.sources.prometheus_answer`` reads from prometheus-api-client beyond its public API: the session,
timeout and method a ``PrometheusConnect`` was built with. The dependency is bounded to the versions where this
holds (pyproject.toml); this test is what to run before moving the bound."""

from __future__ import annotations

import requests
from requests.adapters import HTTPAdapter

from agent.sources.prometheus_client import READ_TIMEOUT_MARGIN_S, connect
from config.prometheus import PrometheusSettings


def test_the_client_keeps_the_session_timeout_and_method_it_was_built_with() -> None:
    settings = PrometheusSettings.model_validate({"url": "http://127.0.0.1:9/", "timeout": "2500ms"})
    client = connect(settings)
    session = client._session
    assert isinstance(session, requests.Session)
    assert client._timeout == 2.5 + READ_TIMEOUT_MARGIN_S  # a little longer than the timeout sent to Prometheus
    assert client._method == "GET"
    assert client.url == "http://127.0.0.1:9"
    # the retrying adapter the client mounted is on that session, so a range query made through it retries too
    adapter = session.get_adapter(f"{client.url}/api/v1/query_range")
    assert isinstance(adapter, HTTPAdapter) and adapter.max_retries.total == settings.retries

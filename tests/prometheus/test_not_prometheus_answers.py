"""The first contact with a URL that is not Prometheus' HTTP API says what answered and what to set, rather than a
JSON parser's complaint or a bare 404.

- A Prometheus behind a sign-in proxy, reached without credentials: ingress-nginx with the ``auth-url`` and
  ``auth-signin`` annotations answers a request its auth service refuses with a redirect (302) to the
  ``auth-signin`` location, adding the original URL as ``rd`` (ingress-nginx docs, "Annotations: External
  Authentication"), which ends on an HTML sign-in page (200). requests follows the redirect; the probe said
  "malformed answer from Prometheus: Expecting value: line 1 column 1 (char 0)". A stub stands in for the ingress
  and its sign-in page (the identity provider's page is served by the same stub: a simplification).
- ``prometheus.url`` with a path that is not the server's base URL (``/prometheus`` on a plain Prometheus, which
  serves the API at /api/v1): a real Prometheus answers 404 "404 page not found", which was all the reason said.
"""

from __future__ import annotations

from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from urllib.parse import quote

import pytest

from agent.sources.prometheus import PrometheusSource
from config.prometheus import PrometheusSettings
from models import MetricSourceUnavailable, MetricsUnavailable
from tests.fakes.http_server import serving
from tests.prometheus.server import PrometheusServer

pytestmark = pytest.mark.xdist_group("prometheus")
AT = datetime(2026, 12, 7, 6, 0, tzinfo=UTC)
SIGN_IN = "/oauth2/sign_in"
SIGN_IN_PAGE = b"<!DOCTYPE html><html><head><title>Sign In</title></head><body>Sign in with Google</body></html>"


class _SignInIngress(BaseHTTPRequestHandler):
    """Every request without a session is sent to the sign-in page, with the original URL as ``rd``."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.path.startswith(SIGN_IN):
            body, status = SIGN_IN_PAGE, 200
        else:
            body, status = b"<html><body>302 Found</body></html>", 302
        self.send_response(status)
        if status == 302:
            original = quote(f"http://{self.headers['Host']}{self.path}", safe="")
            self.send_header("Location", f"{SIGN_IN}?rd={original}")
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


def _source(url: str) -> PrometheusSource:
    return PrometheusSource.from_settings(PrometheusSettings.model_validate({"url": url, "retries": 0}), {})


def test_a_sign_in_page_is_told_as_one_with_what_to_set() -> None:
    with serving(_SignInIngress) as url:
        with pytest.raises(MetricSourceUnavailable) as probed:
            _source(url).probe()
        with pytest.raises(MetricsUnavailable) as read:
            _source(url).newest("train", 'sum(kube_pod_container_resource_requests{namespace="train"})', AT)
    assert str(probed.value) == (
        f'cannot use Prometheus at {url}: the answer is not Prometheus\' JSON but an HTML page titled "Sign In" '
        f"(HTTP 200, after a redirect to {url}{SIGN_IN}): a sign-in page of a proxy in front of Prometheus wants "
        "credentials (set prometheus.bearer_token_file to a token it accepts), or prometheus.url is not the "
        "server's base URL, the part before /api/v1/query"
    )
    assert read.value.reason == str(probed.value).removeprefix(f"cannot use Prometheus at {url}: ")
    assert "kube_pod_container_resource_requests" not in read.value.reason  # the rd parameter held the query


def test_a_url_that_is_not_the_servers_base_says_to_set_it(empty_prometheus: PrometheusServer) -> None:
    url = f"{empty_prometheus.url}/prometheus"
    with pytest.raises(MetricSourceUnavailable) as probed:
        _source(url).probe()
    assert str(probed.value) == (
        f"cannot use Prometheus at {url}: Prometheus answered HTTP 404: 404 page not found; there is no Prometheus "
        "HTTP API under prometheus.url: set it to the server's base URL, the part before /api/v1/query (for "
        "Grafana Mimir or Cortex, with their /prometheus prefix)"
    )
    _source(empty_prometheus.url).probe()  # the base URL answers

"""The one translation of the Kubernetes client's failures (``kube.errors``): each status to its class, the
Retry-After hint, a missing answer as unavailable; and the typed calls raising those classes over real HTTP."""

from __future__ import annotations

import json
import socket
from datetime import timedelta

import pytest
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from kubernetes.client.rest import RESTResponse
from urllib3.exceptions import MaxRetryError, ProtocolError, ReadTimeoutError
from urllib3.response import HTTPResponse

from config.daemon import KubernetesApiSettings
from kube import KubernetesApi, kubernetes_api_client, translate
from kube.models import V1Lease, V1LeaseSpec, V1ObjectMeta
from models.errors import (
    KubernetesApiError,
    KubernetesConflict,
    KubernetesForbidden,
    KubernetesInvalid,
    KubernetesNotFound,
    KubernetesThrottled,
    KubernetesUnavailable,
    LeadtimeError,
)
from tests.fakes import kube_objects as objs
from tests.fakes.kube_api import FakeKubeApi


def _answered(
    status: int, reason: str, body: dict[str, object] | None = None, headers: dict[str, str] | None = None
) -> ApiException:
    """The exception the client raises for an answer, built the way it builds it (from the urllib3 response)."""
    data = json.dumps(body or {"kind": "Status", "code": status, "reason": reason}).encode()
    response = HTTPResponse(body=data, headers=headers or {}, status=status, reason=reason, preload_content=True)
    return ApiException(http_resp=RESTResponse(response))


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (400, KubernetesInvalid),
        (401, KubernetesForbidden),
        (403, KubernetesForbidden),
        (404, KubernetesNotFound),
        (405, KubernetesInvalid),
        (408, KubernetesUnavailable),
        (409, KubernetesConflict),
        (422, KubernetesInvalid),
        (429, KubernetesThrottled),
        (500, KubernetesUnavailable),
        (503, KubernetesUnavailable),
        (504, KubernetesUnavailable),
    ],
)
def test_each_status_becomes_its_class(status: int, expected: type[KubernetesApiError]) -> None:
    translated = translate(_answered(status, "Why"))
    assert type(translated) is expected
    assert isinstance(translated, LeadtimeError)
    assert (translated.status, translated.reason) == (status, "Why")
    assert str(translated) == f"Kubernetes API answered {status} Why"
    assert f'"code": {status}' in translated.detail  # the Status body, for whoever reports it


def test_retry_after_is_read_from_the_header() -> None:
    translated = translate(_answered(429, "TooManyRequests", headers={"Retry-After": "7"}))
    assert isinstance(translated, KubernetesThrottled)
    assert translated.retry_after == 7.0


def test_retry_after_falls_back_to_the_status_details() -> None:
    body = {"kind": "Status", "code": 429, "reason": "TooManyRequests", "details": {"retryAfterSeconds": 3}}
    translated = translate(_answered(429, "TooManyRequests", body))
    assert isinstance(translated, KubernetesThrottled)
    assert translated.retry_after == 3.0


@pytest.mark.parametrize("header", ["", "soon", "Wed, 21 Oct 2026 07:28:00 GMT", "-5"])
def test_a_429_without_a_usable_hint_has_none(header: str) -> None:
    translated = translate(_answered(429, "TooManyRequests", headers={"Retry-After": header} if header else None))
    assert isinstance(translated, KubernetesThrottled)
    assert translated.retry_after is None


@pytest.mark.parametrize(
    "failure",
    [
        ConnectionRefusedError(111, "Connection refused"),
        OSError("Network is unreachable"),
        MaxRetryError(None, "/apis", ProtocolError("Connection aborted")),  # type: ignore[arg-type]
        ReadTimeoutError(None, "/apis", "Read timed out"),  # type: ignore[arg-type]
        ApiException(status=0, reason="no answer"),
    ],
    ids=["refused", "os-error", "retries-exhausted", "read-timeout", "status-0"],
)
def test_no_answer_is_unavailable(failure: Exception) -> None:
    translated = translate(failure)
    assert type(translated) is KubernetesUnavailable
    assert translated.status is None
    assert str(translated).startswith("Kubernetes API unreachable: ")


# -- the typed calls, with the real client over HTTP ------------------------------------------------------------


@pytest.fixture
def api(kube_client: ApiClient) -> KubernetesApi:
    return KubernetesApi(kube_client, timedelta(seconds=2))


def _lease(holder: str, version: str | None = None) -> V1Lease:
    return V1Lease(
        metadata=V1ObjectMeta(name="leadtime", namespace="ops", resource_version=version),
        spec=V1LeaseSpec(holder_identity=holder, lease_duration_seconds=15),
    )


def test_the_calls_raise_the_translated_classes(kube_api: FakeKubeApi, api: KubernetesApi) -> None:
    with pytest.raises(KubernetesNotFound):
        api.leases.read("leadtime", "ops")
    first = api.leases.create("ops", _lease("a"))
    with pytest.raises(KubernetesConflict):
        api.leases.create("ops", _lease("b"))  # the name exists
    api.leases.replace("leadtime", "ops", _lease("a", first.metadata.resource_version))
    with pytest.raises(KubernetesConflict):
        api.leases.replace("leadtime", "ops", _lease("b", first.metadata.resource_version))  # a stale version
    kube_api.fail_next(status=503, resource="configmaps")
    with pytest.raises(KubernetesUnavailable) as failed:
        api.config_maps.read("state", "ops")
    assert failed.value.status == 503


def test_an_eviction_a_disruption_budget_refuses_is_throttled(kube_api: FakeKubeApi, api: KubernetesApi) -> None:
    for i in range(2):
        kube_api.put("pods", objs.pod(f"web-{i}", f"n{i}", labels={"app": "web"}))
    kube_api.put("poddisruptionbudgets", objs.pdb("web", {"app": "web"}, min_available=2), group="policy")
    with pytest.raises(KubernetesThrottled) as refused:
        api.pods.evict("web-0", "default")
    assert "disruption budget" in refused.value.detail
    assert kube_api.get("pods", "web-0", "default") is not None
    with pytest.raises(KubernetesNotFound):
        api.pods.evict("gone", "default")


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed on return: nothing listens there any more


def test_an_api_nobody_answers_is_unavailable(closed_port: int) -> None:
    client = kubernetes_api_client(KubernetesApiSettings(api_url=f"http://127.0.0.1:{closed_port}"))
    try:
        with pytest.raises(KubernetesUnavailable) as failed:
            KubernetesApi(client, timedelta(seconds=2)).nodes.with_label("pool=a100")
    finally:
        client.close()
    assert failed.value.status is None

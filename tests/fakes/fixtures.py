"""Pytest fixtures that start the fake APIs on 127.0.0.1 (ephemeral ports) and hand out real, configured clients.

Registered for the whole suite by ``tests/conftest.py``. Each fixture stops its server when the test ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1, container_v1, tpu_v2
from kubernetes import client as k8s

from tests.fakes.aws_api import FakeAwsApi, shared_aws
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.prometheus_api import FakePrometheusApi
from tests.fakes.tpu_api import FakeTpuApi


@pytest.fixture
def kube_api() -> Iterator[FakeKubeApi]:
    """A running FakeKubeApi with no objects; seed it with ``kube_api.put(...)``."""
    fake = FakeKubeApi().start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def kube_client(kube_api: FakeKubeApi) -> Iterator[k8s.ApiClient]:
    """A real ``kubernetes.client.ApiClient`` pointed at ``kube_api``."""
    configuration = k8s.Configuration()
    configuration.host = kube_api.url
    api_client = k8s.ApiClient(configuration)
    try:
        yield api_client
    finally:
        api_client.close()


@pytest.fixture
def gke_api() -> Iterator[FakeGkeApi]:
    """A running FakeGkeApi (GKE node pools and operations, Compute Engine instance groups)."""
    fake = FakeGkeApi().start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def tpu_api() -> Iterator[FakeTpuApi]:
    """A running FakeTpuApi (Cloud TPU v2 queued resources and operations)."""
    fake = FakeTpuApi().start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def aws_api() -> FakeAwsApi:
    """The AWS proxy in front of moto's server (EC2, Auto Scaling, EKS), emptied for this test. One moto server runs
    per test process (started on first use, stopped by PID at exit): starting one takes seconds."""
    return shared_aws()


@pytest.fixture
def prometheus_api() -> Iterator[FakePrometheusApi]:
    """A running FakePrometheusApi answering range and instant queries with the demand a test sets."""
    fake = FakePrometheusApi().start()
    try:
        yield fake
    finally:
        fake.stop()


def google_clients(endpoint: str) -> GoogleClients:
    """The real Google Cloud clients (REST transport, anonymous credentials) pointed at a local endpoint."""
    options = {"api_endpoint": endpoint}
    credentials = AnonymousCredentials()  # type: ignore[no-untyped-call]
    return GoogleClients(
        gke=container_v1.ClusterManagerClient(transport="rest", credentials=credentials, client_options=options),
        migs=compute_v1.InstanceGroupManagersClient(transport="rest", credentials=credentials, client_options=options),
        tpu=tpu_v2.TpuClient(transport="rest", credentials=credentials, client_options=options),
    )


@dataclass(frozen=True)
class GoogleClients:
    gke: container_v1.ClusterManagerClient
    migs: compute_v1.InstanceGroupManagersClient
    tpu: tpu_v2.TpuClient

"""Pytest fixtures that start the fake APIs on 127.0.0.1 (ephemeral ports) and hand out real, configured clients.

Registered for the whole suite by ``tests/conftest.py``. Each fixture stops its server when the test ends.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client as k8s

from tests.fakes.kube_api import FakeKubeApi


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

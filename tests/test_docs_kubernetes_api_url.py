"""``daemon.kubernetes.api_url`` as README and the configuration reference describe it: when set it is used, even in
a pod, with no credentials (a local test server), and in a pod a warning at connect says the service account is
not used. README said the service account came first and api_url last, after the kubeconfig."""

from __future__ import annotations

import logging

import pytest
from kubernetes import client

from config.daemon import KubernetesApiSettings
from kube.connect import kubernetes_api_client
from tests.fakes.kube_api import FakeKubeApi

IN_A_POD = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


def test_in_a_pod_api_url_is_called_without_credentials_and_a_warning_says_so(
    kube_api: FakeKubeApi, caplog: pytest.LogCaptureFixture
) -> None:
    kube_api.put("nodes", {"metadata": {"name": "n1"}})
    with caplog.at_level(logging.WARNING, logger="kube.connect"):
        api_client = kubernetes_api_client(KubernetesApiSettings(api_url=kube_api.url), environ=IN_A_POD)
    [record] = [r for r in caplog.records if r.name == "kube.connect"]
    assert record.levelno == logging.WARNING
    assert record.getMessage() == (
        f"daemon.kubernetes.api_url is set ({kube_api.url}), so the Kubernetes API is called there with no "
        "credentials, not with this pod's service account; unset it to use the service account"
    )
    configuration = api_client.configuration
    assert (configuration.api_key, configuration.cert_file, configuration.key_file) == ({}, None, None)
    nodes = client.CoreV1Api(api_client).list_node(_request_timeout=5)  # the service host is not asked
    assert [n.metadata.name for n in nodes.items] == ["n1"]
    assert kube_api.calls("list", "nodes") == 1


def test_outside_a_pod_api_url_is_used_without_a_warning(
    kube_api: FakeKubeApi, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="kube.connect"):
        api_client = kubernetes_api_client(KubernetesApiSettings(api_url=kube_api.url), environ={})
    assert [r for r in caplog.records if r.name == "kube.connect"] == []
    assert api_client.configuration.host == kube_api.url

"""Reaching the Kubernetes API: one ``ApiClient`` for everything. Connection details come from settings or the
pod's environment, never from code."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from kubernetes import client, config
from kubernetes.client import ApiClient
from kubernetes.config.config_exception import ConfigException

from config.daemon import KubernetesApiSettings
from models import KubernetesUnconfigured

log = logging.getLogger(__name__)


def kubernetes_api_client(settings: KubernetesApiSettings, environ: Mapping[str, str] = os.environ) -> ApiClient:
    """``api_url`` when set, with no credentials (a local test server); else the in-cluster service account when
    running in a pod; else the kubeconfig."""
    configuration = client.Configuration()
    try:
        if settings.api_url:
            if environ.get("KUBERNETES_SERVICE_HOST"):
                # Set in a pod, it wins over the service account: the calls go out anonymous.
                log.warning(
                    "daemon.kubernetes.api_url is set (%s), so the Kubernetes API is called there with no credentials, "
                    "not with this pod's service account; unset it to use the service account",
                    settings.api_url,
                )
            configuration.host = settings.api_url
        elif environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call, unused-ignore]
        else:
            config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call, unused-ignore]
    except (ConfigException, OSError) as exc:
        raise KubernetesUnconfigured(
            f"cannot reach a Kubernetes API ({exc}); set daemon.kubernetes.api_url, run in a pod, provide a "
            "kubeconfig, or set daemon.leader_election.enabled: false for a single local replica"
        ) from None
    # One retry on a dropped connection; a call is also bounded by daemon.kubernetes.request_timeout.
    configuration.retries = 1
    return client.ApiClient(configuration)

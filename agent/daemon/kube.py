"""Reaching the Kubernetes API from the daemon: one ApiClient for everything, this replica's identity and the
namespace of its Lease. Connection details come from settings or the pod's environment, never from code."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path

from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException

from config.daemon import KubernetesApiSettings, LeaderElectionSettings
from models import KubernetesUnconfigured

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def kubernetes_api_client(settings: KubernetesApiSettings, environ: Mapping[str, str] = os.environ) -> client.ApiClient:
    """``api_url`` when set; else the in-cluster service account when running in a pod; else the kubeconfig."""
    configuration = client.Configuration()
    try:
        if settings.api_url:
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


def replica_identity(settings: LeaderElectionSettings, environ: Mapping[str, str] = os.environ) -> str:
    """The pod name (from the environment variable the Deployment sets), else the host name."""
    return environ.get(settings.identity_env) or socket.gethostname()


def lease_namespace(
    settings: LeaderElectionSettings,
    environ: Mapping[str, str] = os.environ,
    namespace_file: Path = SERVICE_ACCOUNT_NAMESPACE,
) -> str:
    if settings.lease_namespace:
        return settings.lease_namespace
    if environ.get("POD_NAMESPACE"):
        return environ["POD_NAMESPACE"]
    try:
        return namespace_file.read_text(encoding="utf-8").strip() or "default"
    except OSError:
        return "default"

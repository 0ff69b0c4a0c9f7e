"""This replica's identity and the namespace of its Lease, from settings or the pod's environment. The API client
itself is built in ``kube.connect``."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path

from config.daemon import LeaderElectionSettings

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


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

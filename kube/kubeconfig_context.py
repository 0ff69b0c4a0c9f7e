"""Which cluster a kubeconfig reaches: its current context and the name of that context's cluster entry, as
``kube.connect.kubernetes_api_client`` connects when neither ``daemon.kubernetes.api_url`` nor a pod's service account
is there. A command run from a workstation (``leadtime recommend``) reaches whatever cluster the current context
names, and checks it against the cluster it was configured for (``cloud.cluster``, ``aws.cluster``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from kubernetes import config
from kubernetes.config.config_exception import ConfigException

from config.daemon import KubernetesApiSettings


@dataclass(frozen=True)
class KubeconfigCluster:
    """The kubeconfig's current context (``context``) and the name of its cluster entry (``cluster``: gcloud writes
    ``gke_PROJECT_LOCATION_CLUSTER``, ``aws eks update-kubeconfig`` the cluster's ARN, eksctl ``NAME.REGION.eksctl.io``;
    any name a person gave it otherwise)."""

    context: str
    cluster: str


def kubeconfig_cluster(
    settings: KubernetesApiSettings, environ: Mapping[str, str] = os.environ
) -> KubeconfigCluster | None:
    """The cluster the kubeconfig's current context names, when the Kubernetes API is reached through the kubeconfig
    (no ``api_url``, not in a pod); None otherwise, or when the kubeconfig cannot be read or has no current context."""
    if settings.api_url or environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    try:
        _, current = config.list_kube_config_contexts(config_file=environ.get("KUBECONFIG"))  # type: ignore[no-untyped-call, unused-ignore]
    except (ConfigException, OSError):
        return None
    context = current.get("context") if isinstance(current, dict) else None
    if not isinstance(context, dict):
        return None
    return KubeconfigCluster(str(current.get("name") or ""), str(context.get("cluster") or ""))

"""Reaching the Kubernetes API: one ``ApiClient`` for everything. Connection details come from settings or the
pod's environment, never from code. When none is found, the error says what the API is needed for (``KubernetesNeeds``)
and only the advice that helps with that."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

from kubernetes import client, config
from kubernetes.client import ApiClient
from kubernetes.config.config_exception import ConfigException

from config.daemon import KubernetesApiSettings
from models import KubernetesUnconfigured

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KubernetesNeeds:
    """Why the agent calls the Kubernetes API: to elect a leader on a Lease, and to drain the idle nodes of these
    pools (GKE node pools and TPU slice groups, AWS node groups) before they shrink. ``live``: the run acts on the
    cluster; a rehearsal (``run --replay``) does not, and needs the API for election only, which it may turn off in
    a pod as well (only a live run asks a pod without election to declare itself the only replica)."""

    leader_election: bool = False
    drained_pools: tuple[str, ...] = ()
    live: bool = True


def kubernetes_api_client(
    settings: KubernetesApiSettings, environ: Mapping[str, str] = os.environ, needs: KubernetesNeeds | None = None
) -> ApiClient:
    """``api_url`` when set, with no credentials (a local test server); else the in-cluster service account when
    running in a pod; else the kubeconfig. ``needs`` is what the caller needs the API for, told when none is found."""
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
            config.load_kube_config(config_file=environ.get("KUBECONFIG"), client_configuration=configuration)  # type: ignore[no-untyped-call, unused-ignore]
    except (ConfigException, OSError) as exc:
        in_a_pod = not settings.api_url and bool(environ.get("KUBERNETES_SERVICE_HOST"))
        raise KubernetesUnconfigured(unreachable(exc, needs or KubernetesNeeds(), in_a_pod)) from None
    # One retry on a dropped connection; a call is also bounded by daemon.kubernetes.request_timeout.
    configuration.retries = 1
    return client.ApiClient(configuration)


_SINGLE_REPLICA_ENV = "LEADTIME_SINGLE_REPLICA"  # agent.daemon.live_settings.SINGLE_REPLICA_ENV, read there


def unreachable(cause: Exception, needs: KubernetesNeeds, in_a_pod: bool = False) -> str:
    """No Kubernetes API found: what it is needed for, and what to do. Turning leader election off is offered only
    when election is why, and said not to be enough when pools are drained through the API as well. In a pod (no
    service account token was found) the advice is the pod's token, and election off only as a pod allows it."""
    election_off = "daemon.leader_election.enabled: false"
    pools = ", ".join(needs.drained_pools)
    reasons = []
    if needs.leader_election:
        reasons.append("for leader election (daemon.leader_election.enabled: true)")
    if needs.drained_pools:
        reasons.append(f"to drain the idle nodes of pools {pools} before they shrink")
    text = f"cannot reach a Kubernetes API ({cause})"
    if reasons:
        text += f"; it is needed {' and '.join(reasons)}"
    if in_a_pod:
        return text + _pod_advice(needs, election_off, pools)
    text += (
        ". Set daemon.kubernetes.api_url, run in a pod (its service account), or provide a kubeconfig (KUBECONFIG or "
        "~/.kube/config)"
    )
    if needs.leader_election and not needs.drained_pools:
        text += f", or set {election_off} for a single local replica"
    elif needs.leader_election:
        text += f"; with {election_off} the agent would still need it to drain {pools}"
    if needs.drained_pools:
        text += "; or rehearse without any cluster: leadtime run --replay TRACE"
        if needs.leader_election:
            text += f" with {election_off}"
    return text


def _pod_advice(needs: KubernetesNeeds, election_off: str, pools: str) -> str:
    """In a pod the API is reached with the pod's service account token, which was not found; a kubeconfig is never
    read there, and a live run's election off is refused unless the pod says it is the only replica (a rehearsal's
    is not)."""
    text = (
        ". This runs in a pod (KUBERNETES_SERVICE_HOST is set) and found no service account token: give the pod its "
        "service account token (serviceAccountName: leadtime and automountServiceAccountToken: true in the pod "
        "spec, as the shipped manifests do, with the ServiceAccount and its RBAC applied), or set "
        "daemon.kubernetes.api_url"
    )
    if needs.leader_election and not needs.live:
        text += f"; or set {election_off}: a rehearsal (run --replay) acts on no cluster and needs no election"
    elif needs.leader_election and not needs.drained_pools:
        text += (
            f"; or, for a single replica, set {election_off} together with {_SINGLE_REPLICA_ENV}=true in the pod, "
            "replicas: 1 and strategy Recreate in the Deployment"
        )
    elif needs.leader_election:
        text += f"; with {election_off} the agent would still need it to drain {pools}"
    return text

"""Whether the cluster ``leadtime recommend`` reads the drains in progress from is the one it recommends for.

The daemon reads nodes in its own cluster: in a pod, through its service account. Recommend, run from a workstation,
reaches whatever cluster the kubeconfig's current context names (``kube.kubeconfig_context``), and its drainers
count every node carrying a pool's label (``cloud.google.com/gke-nodepool``, ``eks.amazonaws.com/nodegroup``, an
Auto Scaling group's tag) as the pool's: nodes of another cluster with a node pool of the same name would be counted as
drains in progress. The names gcloud, ``aws eks update-kubeconfig`` and eksctl give a context's cluster say which
cluster it is; one that names another cluster than ``cloud.cluster`` or ``aws.cluster`` (and their project, location
or region) is refused, one that says nothing is read and told, with the context and the server it reached."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from config.schema import Settings

if TYPE_CHECKING:
    from kube.kubeconfig_context import KubeconfigCluster  # the Kubernetes client: only when the cluster is read

_GKE = re.compile(r"gke_(?P<project>[^_]+)_(?P<location>[^_]+)_(?P<cluster>.+)")
_EKS_ARN = re.compile(r"arn:aws[\w-]*:eks:(?P<region>[^:]+):\d+:cluster/(?P<cluster>.+)")
_EKSCTL = re.compile(r"(?P<cluster>[^.]+)\.(?P<region>[^.]+)\.eksctl\.io")


def configured(settings: Settings) -> list[str]:
    """The clusters the configuration changes, as ``key=value`` lists of their identifying settings."""
    out = []
    if (cloud := settings.cloud) is not None:
        out.append(f"cloud.project={cloud.project}, cloud.location={cloud.location}, cloud.cluster={cloud.cluster}")
    if (aws := settings.aws) is not None:
        out.append(f"aws.region={aws.region}" + (f", aws.cluster={aws.cluster}" if aws.cluster else ""))
    return out


def named_cluster(entry: str) -> tuple[str, str] | None:
    """``(kind, what)`` of a kubeconfig cluster entry whose name says which cluster it is: ``gke`` with
    ``project/location/cluster``, ``eks`` with ``region/cluster``; None for any other name."""
    if m := _GKE.fullmatch(entry):
        return "gke", f"{m['project']}/{m['location']}/{m['cluster']}"
    if (m := _EKS_ARN.fullmatch(entry)) or (m := _EKSCTL.fullmatch(entry)):
        return "eks", f"{m['region']}/{m['cluster']}"
    return None


def is_configured(kind: str, what: str, settings: Settings) -> bool:
    """Whether the cluster ``named_cluster`` read is one the configuration changes. An EKS cluster of the configured
    region is taken as the one where ``aws.cluster`` is unset (Auto Scaling groups alone name no cluster)."""
    if kind == "gke" and (cloud := settings.cloud) is not None:
        return what == f"{cloud.project}/{cloud.location}/{cloud.cluster}"
    if kind == "eks" and (aws := settings.aws) is not None:
        region, _, cluster = what.partition("/")
        return region == aws.region and cluster == (aws.cluster or cluster)
    return False


def kubeconfig_problem(seen: KubeconfigCluster, server: str, settings: Settings) -> tuple[bool, str | None]:
    """Whether to read the drains through the kubeconfig's current context, and what to tell: a context whose cluster
    entry names another cluster is not read (its nodes with the pools' labels would read as drains); one whose name
    does not say which cluster it is is read, and told."""
    where = f"the kubeconfig's current context {seen.context!r} (cluster {seen.cluster!r}, server {server})"
    wanted = "; ".join(configured(settings))
    named = named_cluster(seen.cluster)
    if named is None:
        return True, (
            f"drains in progress read through {where}, whose name does not say which cluster it is: leadtime could not "
            f"check that it is the cluster configured ({wanted}). Nodes of another cluster carrying the pools' labels "
            "would be counted as being drained; make sure that context is that cluster, or set "
            "daemon.kubernetes.api_url to its API server"
        )
    if is_configured(*named, settings):
        return True, None
    return False, (
        f"drains in progress not read: {where} is {named[0].upper()} cluster {named[1]}, not the cluster configured "
        f"({wanted}), and nodes of another cluster carrying the pools' labels would be counted as being drained. "
        "Switch to the cluster's context (kubectl config use-context) or set daemon.kubernetes.api_url to its API "
        "server"
    )

"""The one home of the ``kubernetes`` client: connecting (``kube.connect``), typed calls for the objects the
product reads and writes (``kube.api``) and the one translation of the client's failures into ``models.errors``
(``kube.errors``). No other package imports ``kubernetes`` (an import-linter contract)."""

from kube.api import ConfigMaps, Events, KubernetesApi, Leases, Nodes, Pods
from kube.connect import KubernetesNeeds, kubernetes_api_client
from kube.errors import translate
from kube.models import ApiClient

__all__ = [
    "ApiClient",
    "ConfigMaps",
    "Events",
    "KubernetesApi",
    "KubernetesNeeds",
    "Leases",
    "Nodes",
    "Pods",
    "kubernetes_api_client",
    "translate",
]

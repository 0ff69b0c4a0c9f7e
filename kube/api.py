"""Typed calls over the ``kubernetes`` client, one small class per kind of object the product reads or writes.

Each answers the client's own model type (``V1Lease``, ``V1ConfigMap``, ``CoreV1Event``, ``V1Node``, ``V1Pod``),
bounds every request with the configured timeout, and raises a failure as its ``models.errors`` class
(``kube.errors``), never as an ``ApiException``. The calls and their RBAC verbs are listed in
docs/kubernetes-rbac.md.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kubernetes.client import (
    ApiClient,
    CoordinationV1Api,
    CoreV1Api,
    CoreV1Event,
    V1ConfigMap,
    V1Eviction,
    V1Lease,
    V1Node,
    V1ObjectMeta,
    V1Pod,
)

from kube.errors import call
from models.errors import KubernetesUnavailable


class _Calls:
    def __init__(self, request_timeout: timedelta | None) -> None:
        # Every call bounded, so a hung connection fails the call instead of holding up its caller.
        self._bound: dict[str, float] = (
            {"_request_timeout": request_timeout.total_seconds()} if request_timeout is not None else {}
        )


class Leases(_Calls):
    """``coordination.k8s.io/v1`` Leases: get, create, update."""

    def __init__(self, api_client: ApiClient, request_timeout: timedelta | None = None) -> None:
        super().__init__(request_timeout)
        self._api = CoordinationV1Api(api_client)

    def read(self, name: str, namespace: str) -> V1Lease:
        return call(lambda: self._api.read_namespaced_lease(name, namespace, **self._bound))

    def create(self, namespace: str, body: V1Lease) -> V1Lease:
        return call(lambda: self._api.create_namespaced_lease(namespace, body, **self._bound))

    def replace(self, name: str, namespace: str, body: V1Lease) -> V1Lease:
        return call(lambda: self._api.replace_namespaced_lease(name, namespace, body, **self._bound))


class ConfigMaps(_Calls):
    """core/v1 ConfigMaps: get, create, update."""

    def __init__(self, api_client: ApiClient, request_timeout: timedelta | None = None) -> None:
        super().__init__(request_timeout)
        self._api = CoreV1Api(api_client)

    def read(self, name: str, namespace: str) -> V1ConfigMap:
        return call(lambda: self._api.read_namespaced_config_map(name, namespace, **self._bound))

    def create(self, namespace: str, body: V1ConfigMap) -> V1ConfigMap:
        return call(lambda: self._api.create_namespaced_config_map(namespace, body, **self._bound))

    def replace(self, name: str, namespace: str, body: V1ConfigMap) -> V1ConfigMap:
        return call(lambda: self._api.replace_namespaced_config_map(name, namespace, body, **self._bound))


class Events(_Calls):
    """core/v1 Events: create, and patch a repeat (count, lastTimestamp, message)."""

    def __init__(self, api_client: ApiClient, request_timeout: timedelta | None = None) -> None:
        super().__init__(request_timeout)
        self._api = CoreV1Api(api_client)

    def create(self, namespace: str, body: CoreV1Event) -> CoreV1Event:
        return call(lambda: self._api.create_namespaced_event(namespace, body, **self._bound))

    def patch(self, name: str, namespace: str, patch: Mapping[str, object]) -> CoreV1Event:
        return call(lambda: self._api.patch_namespaced_event(name, namespace, dict(patch), **self._bound))


class Nodes(_Calls):
    """core/v1 Nodes: list by label, patch (cordon, annotations)."""

    def __init__(self, api_client: ApiClient, request_timeout: timedelta | None = None) -> None:
        super().__init__(request_timeout)
        self._api = CoreV1Api(api_client)

    def with_label(self, label_selector: str) -> list[V1Node]:
        return list(call(lambda: self._api.list_node(label_selector=label_selector, **self._bound)).items)

    def patch(self, name: str, patch: Mapping[str, object]) -> V1Node:
        return call(lambda: self._api.patch_node(name, dict(patch), **self._bound))


class Pods(_Calls):
    """core/v1 Pods: list those on a node or on a set of nodes (all namespaces), and evict one through the Eviction
    API."""

    def __init__(self, api_client: ApiClient, request_timeout: timedelta | None = None) -> None:
        super().__init__(request_timeout)
        self._client = api_client
        self._api = CoreV1Api(api_client)

    def on_node(self, node: str) -> list[V1Pod]:
        selector = f"spec.nodeName={node}"
        return list(call(lambda: self._api.list_pod_for_all_namespaces(field_selector=selector, **self._bound)).items)

    def on_nodes(self, nodes: Collection[str], page_size: int = 500) -> dict[str, list[V1Pod]]:
        """The unfinished pods bound to each of ``nodes`` (every node named, with or without pods), from one list of
        the cluster's pods bound to a node and not finished, read in pages of ``page_size`` ("Retrieving large
        results sets in chunks", Kubernetes API concepts). A field selector cannot name several nodes, so this is
        one list for any number of nodes, where ``on_node`` is one per node. Only the pods on ``nodes`` are made
        into ``V1Pod`` objects: the others are parsed as plain JSON and dropped, which costs a small part of
        building them."""
        found: dict[str, list[dict[str, Any]]] = {node: [] for node in nodes}
        token: str | None = None
        while True:
            page = self._page(page_size, token)
            for item in page.get("items") or []:
                node = (item.get("spec") or {}).get("nodeName")
                if node in found:
                    found[node].append(item)
            token = (page.get("metadata") or {}).get("continue") or None
            if token is None:
                break
        return {node: self._pods(items) for node, items in found.items()}

    def _page(self, limit: int, token: str | None) -> dict[str, Any]:
        """One page of the list, as parsed JSON (the body is read inside ``call``: a connection lost while reading
        it is translated too)."""
        selector = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"

        def read() -> Any:
            answer = self._api.list_pod_for_all_namespaces(
                field_selector=selector, limit=limit, _continue=token, _preload_content=False, **self._bound
            )
            try:
                return json.loads(answer.data)
            finally:
                answer.release_conn()

        try:
            page = call(read)
        except ValueError as exc:
            raise KubernetesUnavailable(None, f"a pod list answered no JSON: {exc}") from exc
        if not isinstance(page, dict):
            raise KubernetesUnavailable(None, "a pod list answered something other than a PodList object")
        return page

    def _pods(self, items: list[dict[str, Any]]) -> list[V1Pod]:
        if not items:
            return []
        pods: list[V1Pod] = self._client.deserialize(_Body(json.dumps(items)), "list[V1Pod]")
        return pods

    def evict(self, name: str, namespace: str) -> None:
        """A ``policy/v1`` Eviction; ``KubernetesThrottled`` when a PodDisruptionBudget says not now."""
        body = V1Eviction(
            api_version="policy/v1", kind="Eviction", metadata=V1ObjectMeta(name=name, namespace=namespace)
        )
        call(lambda: self._api.create_namespaced_pod_eviction(name, namespace, body, **self._bound))


@dataclass(frozen=True)
class _Body:
    """A response body as ``ApiClient.deserialize`` reads it."""

    data: str


class KubernetesApi:
    """Every typed call over one ``ApiClient``, each request bounded by ``request_timeout``."""

    def __init__(self, api_client: ApiClient, request_timeout: timedelta | None = None) -> None:
        self.leases = Leases(api_client, request_timeout)
        self.config_maps = ConfigMaps(api_client, request_timeout)
        self.events = Events(api_client, request_timeout)
        self.nodes = Nodes(api_client, request_timeout)
        self.pods = Pods(api_client, request_timeout)

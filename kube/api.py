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
from models.errors import KubernetesApiError, KubernetesThrottled, KubernetesUnavailable

# How long one list of the cluster's pods answers ``Pods.on_nodes`` for the nodes it holds: longer than one tick's
# reads of every pool (its observation and its executor's checks, seconds apart), shorter than a tick (60 s by
# default), so every pool and drain step of a tick shares one list and the next tick reads again.
SHARED_POD_LIST_FOR = timedelta(seconds=10)
# A node not asked about for this long is no longer kept from a list (it left its pool, or the cluster).
_FORGET_NODES_AFTER = timedelta(hours=1)


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


class _ContinueExpired(KubernetesUnavailable):
    """A continued page of a list answered 410 Gone: its continue token expired."""


@dataclass(frozen=True)
class _PodList:
    """One list of the cluster's pods, kept only for the nodes asked about (parsed JSON, by node)."""

    read_at: float  # monotonic seconds
    by_node: dict[str, list[dict[str, Any]]]


class Pods(_Calls):
    """core/v1 Pods: list those on a node or on a set of nodes (all namespaces), and evict one through the Eviction
    API.

    A list of the cluster's pods (``on_nodes``) answers later calls made within ``shared_for`` of it (the callers
    say when, on their monotonic clock), as long as it holds every node they name: it keeps the pods of each node
    asked about in the last ``_FORGET_NODES_AFTER``, so after a tick has asked once for every pool, the next tick's
    first call reads one list for all of them. After an eviction the API accepts, it no longer answers for the
    evicted pod's node (the pod is now terminating or gone)."""

    def __init__(
        self,
        api_client: ApiClient,
        request_timeout: timedelta | None = None,
        shared_for: timedelta = SHARED_POD_LIST_FOR,
    ) -> None:
        super().__init__(request_timeout)
        self._client = api_client
        self._api = CoreV1Api(api_client)
        self._shared_s = shared_for.total_seconds()
        self._listed: _PodList | None = None
        self._asked: dict[str, float] = {}  # node -> monotonic time it was last asked about

    def on_node(self, node: str) -> list[V1Pod]:
        selector = f"spec.nodeName={node}"
        return list(call(lambda: self._api.list_pod_for_all_namespaces(field_selector=selector, **self._bound)).items)

    def on_nodes(
        self, nodes: Collection[str], page_size: int = 500, now: float | None = None, fresh: bool = False
    ) -> dict[str, list[V1Pod]]:
        """The unfinished pods bound to each of ``nodes`` (every node named, with or without pods), from one list of
        the cluster's pods bound to a node and not finished, read in pages of ``page_size`` ("Retrieving large
        results sets in chunks", Kubernetes API concepts). A field selector cannot name several nodes, so this is
        one list for any number of nodes, where ``on_node`` is one per node. Only the pods on ``nodes`` are made
        into ``V1Pod`` objects: the others are parsed as plain JSON and dropped, which costs a small part of
        building them.

        Given ``now`` (the caller's monotonic time), the list read last answers while it is shared (see the class),
        unless ``fresh``; a list read then is shared from ``now``. Without ``now`` the list is read and not shared.
        """
        listed = self._listed
        if now is None:
            return {node: self._pods(items) for node, items in self._list(nodes, page_size).items()}
        self._asked.update(dict.fromkeys(nodes, now))
        if (
            fresh
            or listed is None
            or not 0 <= now - listed.read_at < self._shared_s
            or not set(nodes) <= listed.by_node.keys()
        ):
            forget = now - _FORGET_NODES_AFTER.total_seconds()
            self._asked = {node: at for node, at in self._asked.items() if at > forget}
            listed = self._listed = _PodList(now, self._list(self._asked, page_size))
        return {node: self._pods(listed.by_node[node]) for node in nodes}

    def _list(self, nodes: Collection[str], page_size: int) -> dict[str, list[dict[str, Any]]]:
        """The cluster's pods on ``nodes``, read now in pages, as parsed JSON. A continue token the API server has
        expired (410 Gone: it compacts its history every 5 minutes by default) restarts the list from its first
        page, once; a second expiry is raised (``KubernetesUnavailable``: the next tick lists again)."""
        try:
            return self._list_pages(nodes, page_size)
        except _ContinueExpired:
            pass
        try:
            return self._list_pages(nodes, page_size)
        except _ContinueExpired as again:
            raise KubernetesUnavailable(
                410, again.reason, f"the pod list's continue token expired twice in a row: {again.detail}"
            ) from again

    def _list_pages(self, nodes: Collection[str], page_size: int) -> dict[str, list[dict[str, Any]]]:
        found: dict[str, list[dict[str, Any]]] = {node: [] for node in nodes}
        token: str | None = None
        while True:
            try:
                page = self._page(page_size, token)
            except KubernetesUnavailable as exc:
                if token is not None and exc.status == 410:
                    raise _ContinueExpired(exc.status, exc.reason, exc.detail) from exc
                raise
            for item in page.get("items") or []:
                node = (item.get("spec") or {}).get("nodeName")
                if node in found:
                    found[node].append(item)
            token = (page.get("metadata") or {}).get("continue") or None
            if token is None:
                break
        return found

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
        """A ``policy/v1`` Eviction; ``KubernetesThrottled`` when a PodDisruptionBudget says not now, or the API
        server is throttling (``eviction_refusal`` tells them apart)."""
        body = V1Eviction(
            api_version="policy/v1", kind="Eviction", metadata=V1ObjectMeta(name=name, namespace=namespace)
        )
        try:
            call(lambda: self._api.create_namespaced_pod_eviction(name, namespace, body, **self._bound))
        except KubernetesThrottled:
            raise  # not now: nothing changed
        except Exception:
            self._forget_node_of(name, namespace)  # gone already (404), or the answer lost after it was accepted
            raise
        self._forget_node_of(name, namespace)  # terminating now: the next read of its node must show it so

    def _forget_node_of(self, name: str, namespace: str) -> None:
        """The shared list no longer answers for the node of this pod: the next call naming it reads again."""
        listed = self._listed
        if listed is None:
            return
        stale = {
            node
            for node, items in listed.by_node.items()
            for item in items
            if (item.get("metadata") or {}).get("name") == name
            and (item.get("metadata") or {}).get("namespace") == namespace
        }
        if stale:
            kept = {node: items for node, items in listed.by_node.items() if node not in stale}
            self._listed = _PodList(listed.read_at, kept)


@dataclass(frozen=True)
class EvictionRefusal:
    """What a refused Eviction's ``Status`` says: its ``message`` and its causes (``details.causes``: each cause's
    ``reason``, the Go ``StatusCause.Type``, with its ``message``). The eviction REST code names a PodDisruptionBudget
    that allows no disruption in a ``DisruptionBudget`` cause; the NamespaceLifecycle admission plugin refuses any
    create in a namespace being deleted with 403 and a ``NamespaceTerminating`` cause."""

    message: str
    causes: tuple[tuple[str, str], ...] = ()

    def cause(self, reason: str) -> str | None:
        """The message of the first cause with this reason ("" when it has none); None when there is none."""
        return next((message for found, message in self.causes if found == reason), None)


def eviction_refusal(exc: KubernetesApiError) -> EvictionRefusal:
    """The Status a refused Eviction answered, read from the error's body (a body that is not a Status: its text)."""
    try:
        status = json.loads(exc.detail) if exc.detail else {}
    except ValueError:
        status = None
    if not isinstance(status, dict):
        return EvictionRefusal(exc.detail.strip())
    details = status.get("details")
    causes = details.get("causes") if isinstance(details, dict) else None
    read = tuple((str(c.get("reason") or ""), str(c.get("message") or "")) for c in causes or [] if isinstance(c, dict))
    return EvictionRefusal(str(status.get("message") or exc.reason), read)


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

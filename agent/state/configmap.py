"""KubernetesStateStore: the planner memory in one ConfigMap that every replica reads and the leader writes.

The document sits under the key ``planner-memory.json``. Writes are optimistic: each carries the
resourceVersion this store last read or wrote, so a write over a version it has not seen answers 409 and is
raised as ``StateConflict``; the next save reads the current version first. The ConfigMap is created on the
first save when it does not exist. Calls: get, create and update on that one ConfigMap.

The API's failures (``models.errors``, translated in ``kube.errors``) become ``StateUnavailable`` here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from agent.planning import PlannerMemory
from agent.state.codec import decode, encode
from kube.api import ConfigMaps
from kube.models import V1ConfigMap, V1ObjectMeta
from models import StateConflict, StateDocumentUnreadable, StateUnavailable
from models.errors import KubernetesApiError, KubernetesConflict, KubernetesNotFound

log = logging.getLogger(__name__)

KEY = "planner-memory.json"


class KubernetesStateStore:
    def __init__(self, config_maps: ConfigMaps, *, name: str, namespace: str, identity: str) -> None:
        self._config_maps = config_maps
        self.name = name
        self.namespace = namespace
        self._identity = identity
        self._known = False  # whether _exists and _version are what the API server last said
        self._exists = False
        self._version: str | None = None  # resourceVersion last read or written

    def load(self) -> PlannerMemory | None:
        config_map = self._read()
        if config_map is None:
            return None
        text = (config_map.data or {}).get(KEY)
        if text is None:
            return None
        try:
            return decode(text)
        except StateDocumentUnreadable as exc:
            log.warning(
                "ConfigMap %s/%s: saved planner memory ignored, the next save replaces it: %s",
                self.namespace,
                self.name,
                exc,
            )
            return None

    def save(self, memory: PlannerMemory, now: datetime) -> None:
        if not self._known:
            self._read()
        body = V1ConfigMap(
            api_version="v1",
            kind="ConfigMap",
            metadata=V1ObjectMeta(
                name=self.name,
                namespace=self.namespace,
                resource_version=self._version,
                labels={"app.kubernetes.io/name": "leadtime", "app.kubernetes.io/component": "state"},
            ),
            data={KEY: encode(memory, now, self._identity)},
        )
        try:
            if self._exists:
                written = self._call("update", lambda: self._config_maps.replace(self.name, self.namespace, body))
            else:
                written = self._call("create", lambda: self._config_maps.create(self.namespace, body))
        except StateUnavailable:
            self._known = False  # whatever happened (a conflict, a deleted ConfigMap, a lost answer): read first
            raise
        self._remember(written)

    # -- internals ----------------------------------------------------------------------------------------
    def _read(self) -> V1ConfigMap | None:
        try:
            config_map = self._call("get", lambda: self._config_maps.read(self.name, self.namespace))
        except _NotFound:
            self._known, self._exists, self._version = True, False, None
            return None
        self._remember(config_map)
        return config_map

    def _remember(self, config_map: V1ConfigMap) -> None:
        self._known, self._exists = True, True
        meta = config_map.metadata
        self._version = meta.resource_version if meta is not None else None

    def _call(self, verb: str, request: Callable[[], V1ConfigMap]) -> V1ConfigMap:
        where = f"ConfigMap {self.namespace}/{self.name}"
        try:
            return request()
        except KubernetesApiError as exc:
            if isinstance(exc, KubernetesNotFound) and verb == "get":
                raise _NotFound from None
            if isinstance(exc, KubernetesConflict):
                # Written by someone else since we read it (or created meanwhile): read again before writing.
                raise StateConflict(f"{where}: {verb} answered 409 {exc.reason}; it is read again next time") from None
            if exc.status is None:
                raise StateUnavailable(f"{where}: {exc}") from None
            raise StateUnavailable(f"{where}: {verb} answered {exc.status} {exc.reason}".strip()) from None


class _NotFound(Exception):
    """The ConfigMap does not exist (yet): nothing was saved."""

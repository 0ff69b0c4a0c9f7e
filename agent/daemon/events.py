"""Kubernetes Events about leadership, attached to the Lease, so ``kubectl describe lease`` tells the story.

Recording an Event is best effort: a failure is logged and never disturbs the daemon.
"""

from __future__ import annotations

import logging
from datetime import datetime

from kube.api import Events
from kube.models import CoreV1Event, V1EventSource, V1ObjectMeta, V1ObjectReference
from models.errors import KubernetesApiError
from models.redaction import redact

log = logging.getLogger(__name__)


class KubernetesEventRecorder:
    def __init__(self, events: Events, *, namespace: str, lease_name: str, identity: str) -> None:
        self._events = events
        self._namespace = namespace
        self._lease_name = lease_name
        self._identity = identity

    def record(self, now: datetime, reason: str, message: str, warning: bool = False) -> bool:
        event = CoreV1Event(
            metadata=V1ObjectMeta(generate_name=f"{self._lease_name}.", namespace=self._namespace),
            involved_object=V1ObjectReference(
                api_version="coordination.k8s.io/v1", kind="Lease", name=self._lease_name, namespace=self._namespace
            ),
            reason=reason,
            message=redact(message),
            type="Warning" if warning else "Normal",
            first_timestamp=now,
            last_timestamp=now,
            count=1,
            source=V1EventSource(component="leadtime", host=self._identity),
            reporting_component="leadtime",
            reporting_instance=self._identity,
        )
        try:
            self._events.create(self._namespace, event)
        except KubernetesApiError as exc:
            log.warning("could not record event %s: %s", reason, exc)
            return False
        return True

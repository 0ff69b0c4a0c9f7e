"""The leader's decisions as core/v1 Kubernetes Events, so ``kubectl describe`` and ``kubectl get events`` tell
what the agent did or refused, and why, with the numbers.

* A node decision (cordon, drain started / blocked / finished) is attached to the Node. The API server accepts
  Events about a cluster-scoped object only in the ``default`` namespace (or none), so they are written there;
  the involved object's uid is the node name, as the kubelet does, which ``kubectl describe node`` searches for.
* A drain decision about a TPU slice (the unit of a pool in ``slice_pools``: its name is its GKE node pool's, not
  a Node's) is attached to the state ConfigMap like a pool decision, its message starting with the slice's name
  and its annotations naming it (``leadtime.io/slice``). One Event per host of the slice instead would be up to
  64 Events per decision, past the bound on a tick's Events; while the slice drains, each of its hosts carries the
  drain's key, which ends with the slice's name, in its ``leadtime.io/drain-key`` annotation.
* A pool decision (scale-up, scale-down, budget trim, hold on missing data) is attached to the agent's state
  ConfigMap, which holds every pool's planner memory (recent changes, back-offs, blocks) and which the agent
  may already read; the message names the pool. Its uid (``kubectl describe`` searches by uid) is read again at
  each call that records a pool decision, one read per tick: an operator who deletes the ConfigMap to clear the
  planner memory has it created anew, with a new uid, by the leader's next save, and the decisions after that
  must name the new one or ``kubectl describe`` no longer shows them.
* Repeats of the same Event are patched (count, lastTimestamp), not created again (``EventCorrelator``).

Recording is best effort and bounded: each call has the configured request timeout; a refusal (403, 409, 422)
drops that Event; a throttle (429), a server error or a transport failure drops the rest of the tick's Events;
at most ``max_per_tick`` are written. Nothing here ever raises into the tick.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from datetime import datetime

from agent.daemon.event_correlator import Correlation, EventCorrelator, EventKey
from agent.decision_events import DecisionEvent, SubjectKind, as_slice
from kube.api import KubernetesApi
from kube.models import CoreV1Event, V1EventSource, V1ObjectMeta, V1ObjectReference
from models.errors import KubernetesApiError, KubernetesNotFound, KubernetesThrottled, KubernetesUnavailable
from models.redaction import redact

log = logging.getLogger(__name__)
COMPONENT = "leadtime"
NODE_EVENT_NAMESPACE = "default"
MAX_MESSAGE = 1024  # the events.k8s.io note limit; the same bound keeps core/v1 messages readable
ANNOTATION_PREFIX = "leadtime.io/"


CUT = "…"


def fit_note(message: str) -> str:
    """``message`` within ``MAX_MESSAGE`` characters. A longer one is cut in the middle, not at the end: its head and
    its tail from the first ``" -> "`` step that fits in half the note (a decision's chain down to ``-> target N``,
    which the reason's long middle pushed out of an Event cut at the end) are kept, with ``…`` between. The log
    line keeps the whole text."""
    if len(message) <= MAX_MESSAGE:
        return message
    room = MAX_MESSAGE - len(CUT)
    tail = message[-(room // 4) :]  # a message without a chain: its last quarter
    start = message.find(" -> ")
    while start != -1:
        if len(message) - start <= room // 2:
            tail = message[start:]
            break
        start = message.find(" -> ", start + 1)
    return message[: room - len(tail)] + CUT + tail


class _GiveUp(Exception):
    """The API is throttling, failing or unreachable: drop the rest of this tick's Events."""


class KubernetesDecisionRecorder:
    """Writes ``DecisionEvent`` values; pool decisions, and the drain decisions of the TPU slices of
    ``slice_pools`` (slice groups), go to ConfigMap ``pool_object`` in ``namespace``."""

    def __init__(
        self,
        api: KubernetesApi,
        *,
        namespace: str,
        pool_object: str,
        identity: str,
        max_per_tick: int = 50,
        correlator: EventCorrelator | None = None,
        slice_pools: Collection[str] = (),
    ) -> None:
        self._events = api.events
        self._config_maps = api.config_maps
        self._namespace = namespace
        self._pool_object = pool_object
        self._identity = identity
        self._max = max_per_tick
        self._correlator = correlator or EventCorrelator()
        self._pool_uid: str | None = None
        self._pool_uid_read = False  # whether _pool_uid is what the API server said during this ``record``
        self._slice_pools = frozenset(slice_pools)

    def record(self, now: datetime, events: Sequence[DecisionEvent]) -> int:
        """Write the tick's events; returns how many were written (created or patched)."""
        written = 0
        self._pool_uid_read = False  # read again at the first pool decision: the ConfigMap may have been made anew
        try:
            for event in events[: self._max]:
                written += self._write(now, event)
        except _GiveUp as exc:
            log.warning("decision events dropped for this tick: %s", exc)
        except Exception:  # an Event must never break a tick
            log.exception("decision events dropped for this tick")
        if len(events) > self._max:
            log.warning("decision events: %d over the limit of %d per tick dropped", len(events) - self._max, self._max)
        return written

    # -- internals -----------------------------------------------------------------------------------------
    def _write(self, now: datetime, event: DecisionEvent) -> int:
        if event.subject_kind is SubjectKind.NODE and event.pool_id in self._slice_pools:
            event = as_slice(event)
        reference = self._reference(event)
        namespace = reference.namespace or NODE_EVENT_NAMESPACE
        message = fit_note(redact(event.message))
        kind = "Warning" if event.warning else "Normal"
        key = EventKey(
            namespace, reference.kind or "", reference.name or "", reference.uid or "", kind, event.reason, message
        )
        correlation = self._correlator.observe(key, now)
        if correlation.previous is not None:
            previous = correlation.previous.name
            patch = {"count": correlation.count, "lastTimestamp": now, "message": message}
            try:
                patched = self._call(event, lambda: self._events.patch(previous, namespace, patch))
            except KubernetesNotFound:
                self._correlator.forget(key)  # the Event expired or was deleted: start a new one
                correlation = Correlation(None, 1, now)
            else:
                return self._remember(key, previous, correlation, patched)
        body = CoreV1Event(
            metadata=V1ObjectMeta(
                generate_name=f"{reference.name}.",
                namespace=namespace,
                annotations={
                    f"{ANNOTATION_PREFIX}pool": event.pool_id,
                    **{f"{ANNOTATION_PREFIX}{k.replace('_', '-')}": v for k, v in event.numbers.items()},
                },
            ),
            involved_object=reference,
            reason=event.reason,
            message=message,
            type=kind,
            first_timestamp=now,
            last_timestamp=now,
            count=1,
            source=V1EventSource(component=COMPONENT, host=self._identity),
            reporting_component=COMPONENT,
            reporting_instance=self._identity,
        )
        try:
            created = self._call(event, lambda: self._events.create(namespace, body))
        except KubernetesNotFound:
            return 0
        name = created.metadata.name if created is not None else None
        return self._remember(key, name, correlation, created)

    def _remember(self, key: EventKey, name: str | None, correlation: Correlation, answer: object) -> int:
        if answer is None or name is None:
            return 0
        self._correlator.written(key, name, correlation)
        return 1

    def _reference(self, event: DecisionEvent) -> V1ObjectReference:
        if event.subject_kind is SubjectKind.NODE:
            return V1ObjectReference(api_version="v1", kind="Node", name=event.subject, uid=event.subject)
        return V1ObjectReference(
            api_version="v1",
            kind="ConfigMap",
            name=self._pool_object,
            namespace=self._namespace,
            uid=self._pool_uid_now(),
        )

    def _pool_uid_now(self) -> str | None:
        """The state ConfigMap's uid, read once per ``record`` (it is created by the leader's first save, and again
        by the first save after it was deleted); None while it does not exist."""
        if not self._pool_uid_read:
            try:
                found = self._config_maps.read(self._pool_object, self._namespace)
            except KubernetesNotFound:
                self._pool_uid, self._pool_uid_read = None, True
                return None
            except KubernetesApiError as exc:
                what = exc.status if exc.status is not None else exc
                raise _GiveUp(f"cannot read ConfigMap {self._namespace}/{self._pool_object}: {what}") from None
            self._pool_uid = found.metadata.uid if found.metadata is not None else None
            self._pool_uid_read = True
        return self._pool_uid

    def _call(self, event: DecisionEvent, request: Callable[[], CoreV1Event]) -> CoreV1Event | None:
        """The API's answer; ``None`` when it refused this Event; raises ``KubernetesNotFound`` on 404 (the
        caller decides) and ``_GiveUp`` when the API throttles, fails or cannot be reached."""
        try:
            return request()
        except KubernetesNotFound:
            raise
        except (KubernetesThrottled, KubernetesUnavailable) as exc:
            what = f"HTTP {exc.status} {exc.reason}" if exc.status is not None else exc.reason
            raise _GiveUp(f"{event.reason} for {event.subject}: {what}") from None
        except KubernetesApiError as exc:
            log.warning(
                "decision event %s for %s refused: HTTP %s %s", event.reason, event.subject, exc.status, exc.reason
            )
            return None

"""FakeKubeApi: a small in-process HTTP server that speaks the Kubernetes REST protocol for what the agent uses.

The real ``kubernetes`` client is pointed at it (``Configuration.host = fake.url``). It serves nodes, pods (with
the Eviction subresource refusing with 429 when a PodDisruptionBudget would be violated, and with 500 when more
than one selects the pod), PodDisruptionBudgets, Leases (409 Conflict on a stale resourceVersion), ConfigMaps and
Events. Every request is logged as an RBAC tuple (verb, API group, resource, subresource, namespace, name), and
faults can be injected: the next N matching calls fail with a chosen status, or the server stops accepting
connections and later restarts on the same port.

A paged list's ``continue`` token carries the list's resourceVersion and expires when the history behind it is
compacted (``compact()``, which the API server does every 5 minutes by default): a list continued with it answers
410 Gone, reason ``Expired``, with an inconsistent token in its ``metadata.continue``, as the API server does.
``compact_before_continued_lists(n)`` compacts just before each of the next ``n`` continued lists arrive.

An accepted eviction deletes the pod gracefully, as the API server does: a pod on a node gets
``metadata.deletionTimestamp`` (the eviction's time plus its grace period, ``spec.terminationGracePeriodSeconds``,
30 when unset) and ``deletionGracePeriodSeconds``, and stays listed (Terminating) until its kubelet finishes it.
The fake's kubelets finish a terminating pod when ``clock()`` reaches its ``deletionTimestamp`` (``clock`` is wall
time unless a test hands the fake its own, e.g. a ``SimulatedClock``'s ``now``); a grace period of 0, a pod on
no node and a finished pod are deleted at once. ``finish_terminating`` ends terminations now, and
``stop_kubelet(node)`` stands for a node whose kubelet is gone: its pods stay Terminating, and 50 s later (the node
monitor's grace period) the node lifecycle controller marks the node's conditions, ``Ready`` among them, Unknown;
``start_kubelet(node)`` brings it back: it posts ``Ready`` True and finishes its pods again. ``hang_pods(node)``
stands for a live kubelet that cannot finish its pods (a container stuck in the kernel, a runtime down): they stay
Terminating, the node's conditions as they are.

Simplifications, on purpose: strategic-merge patches are applied as JSON merge patches (lists are replaced),
a PDB counts running, non-deleted pods as healthy (no readiness), and its expected pod count is
``status.expectedPods`` when a test sets it (the owning controller's scale), else the number of matching pods.

Its parts: ``store`` (the REST vocabulary: resources, request records, Status errors, continue tokens; the objects
and their resourceVersions), ``selectors`` (label and field selectors), ``patches`` (merge and JSON patches, a
Lease's MicroTime), ``evictions`` (the kubelets that end terminating pods, the Eviction subresource and its
PodDisruptionBudgets) and ``server`` (``FakeKubeApi``: faults, direct access for tests, and each request's
dispatch: lists and their pages, creates, updates, patches, deletes).
"""

from tests.fakes.kube_api.evictions import DEFAULT_TERMINATION_GRACE_SECONDS, MULTIPLE_PDBS
from tests.fakes.kube_api.selectors import field_selector_matches, label_selector_matches, selector_object_matches
from tests.fakes.kube_api.server import FakeKubeApi
from tests.fakes.kube_api.store import CONTINUE_EXPIRED, RESOURCES, ApiError, Obj, RequestRecord

__all__ = [
    "CONTINUE_EXPIRED",
    "DEFAULT_TERMINATION_GRACE_SECONDS",
    "MULTIPLE_PDBS",
    "RESOURCES",
    "ApiError",
    "FakeKubeApi",
    "Obj",
    "RequestRecord",
    "field_selector_matches",
    "label_selector_matches",
    "selector_object_matches",
]

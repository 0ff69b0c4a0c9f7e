"""The words a drain's results use for what keeps its pods from being evicted, as plain strings.

``actuators.drain_evictions`` writes them into a drain's detail and ``agent.decision_events`` reads them back to name
the Event: they live here, apart from the eviction code, so that reading them imports neither the Kubernetes client
nor a cloud SDK (the replay daemon and the commands start without them).
"""

from __future__ import annotations

# The Eviction API's 500 for a pod selected by several PodDisruptionBudgets (a misconfiguration: never retried).
MULTIPLE_BUDGETS = "more than one PodDisruptionBudget"
BUDGET_CAUSE = "DisruptionBudget"
NAMESPACE_TERMINATING_CAUSE = "NamespaceTerminating"
THROTTLED = "the Kubernetes API server is throttling requests (HTTP 429 naming no PodDisruptionBudget)"
# How a pod waited for because its namespace is being deleted is told (after the admission plugin's message).
NAMESPACE_GOING = "the pod goes with it"

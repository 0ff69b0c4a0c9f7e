"""Evicting a unit's pods through the Eviction API, and what each answer means for the drain.

    accepted, or 404 (the pod is gone)                    -> evicted: on its way out
    429 with a ``DisruptionBudget`` cause                 -> waiting: the budget (named) allows no disruption now
    429 without one (API priority and fairness)           -> waiting: the API server is throttling; no eviction is sent
                                                             again before its Retry-After (``retry_after_s``)
    403 with a ``NamespaceTerminating`` cause             -> waiting: its namespace is being deleted, the pod with it
                                                             (kubectl drain waits for such a pod too)
    500 "more than one PodDisruptionBudget"               -> rejected: a misconfiguration no retry fixes
    401, or 403 "cannot create resource" (RBAC)           -> PermanentActuatorError: the role lacks pods/eviction
    another 400/403/422 (an admission webhook denied it) -> rejected: the pod may not be evicted; the unit serves again
    5xx, no answer                                        -> TransientActuatorError: retried, given up at the timeout

Each refusal is told by its Status ``message`` (``kube.api.eviction_refusal``), never its raw body. Sources: the
Eviction API ("How API-initiated eviction works"), the eviction REST code (kubernetes
``pkg/registry/core/pod/storage/eviction.go``: a ``DisruptionBudget`` cause naming the budget), the NamespaceLifecycle
admission plugin (``NamespaceTerminating``), kubectl's drain (``pkg/drain/drain.go``, ``evictPods``), API priority
and fairness (429 with Retry-After), and the RBAC authorizer's "cannot create resource" message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from actuators.drain_words import (
    BUDGET_CAUSE,
    MULTIPLE_BUDGETS,
    NAMESPACE_GOING,
    NAMESPACE_TERMINATING_CAUSE,
    THROTTLED,
)
from actuators.pod_rules import pod_name, terminating
from actuators.vendor_errors import from_kubernetes, from_status
from kube.api import Pods, eviction_refusal
from kube.models import V1Pod
from models import PermanentActuatorError
from models.errors import KubernetesApiError, KubernetesForbidden, KubernetesNotFound, KubernetesThrottled

PodId = tuple[str, str]
# How the RBAC authorizer words a verb its role does not grant: 'User "..." cannot create resource "pods/eviction"'.
_RBAC_DENIAL = "cannot create resource"
_DEFAULT_RETRY_AFTER_S = 1.0  # API priority and fairness' own Retry-After when a 429 gives none


@dataclass
class EvictionRound:
    """One step's evictions: the pods evicted, those not evicted now and why, why the drain cannot go on
    (``rejected``, "" when it can), and how long the API server asked to be left alone (``retry_after_s``)."""

    evicted: list[PodId] = field(default_factory=list)
    waiting: dict[PodId, str] = field(default_factory=dict)
    rejected: str = ""
    retry_after_s: float | None = None


def evict_pods(
    pods_api: Pods, pool_id: str, pods: Sequence[V1Pod], check_may_write: Callable[[], None], throttled: bool
) -> EvictionRound:
    """Evict each of ``pods`` not terminating already (a terminating pod is waited for, never evicted again); none
    while ``throttled`` (the API server's Retry-After has not passed) or once one answers that it is throttling."""
    done = EvictionRound()
    for pod in pods:
        who = pod_name(pod)
        if terminating(pod):
            continue
        if throttled or done.retry_after_s is not None:
            done.waiting[who] = THROTTLED
            continue
        check_may_write()
        try:
            pods_api.evict(who[1], who[0])
        except KubernetesNotFound:
            done.evicted.append(who)
        except KubernetesApiError as exc:
            _refused(pool_id, who, exc, done)
            if done.rejected:
                return done
        else:
            done.evicted.append(who)
    return done


def _refused(pool_id: str, who: PodId, exc: KubernetesApiError, done: EvictionRound) -> None:
    """Record (or raise) what a refused eviction of ``who`` means (see the module's table)."""
    refusal = eviction_refusal(exc)
    name = "/".join(who)
    if isinstance(exc, KubernetesThrottled):
        budget = refusal.cause(BUDGET_CAUSE)
        if budget is not None:
            done.waiting[who] = budget or refusal.message  # "The disruption budget NAME needs ..."
        else:
            done.waiting[who] = THROTTLED
            done.retry_after_s = exc.retry_after or _DEFAULT_RETRY_AFTER_S
        return
    if exc.status == 500 and MULTIPLE_BUDGETS in refusal.message:
        why = f"pod {who} is selected by {MULTIPLE_BUDGETS}, so the Eviction API refuses it"
        done.rejected = why + (f"; {done.evicted} evicted before" if done.evicted else "")
        return
    if (namespace_going := refusal.cause(NAMESPACE_TERMINATING_CAUSE)) is not None:
        done.waiting[who] = f"{namespace_going or 'its namespace is being deleted'}: {NAMESPACE_GOING}"
        return
    if exc.status == 401 or (isinstance(exc, KubernetesForbidden) and _RBAC_DENIAL in refusal.message):
        raise PermanentActuatorError(
            pool_id,
            f"evicting {name} refused (HTTP {exc.status}): {refusal.message}; grant the agent's role create on "
            "pods/eviction (deploy/ has the role)",
        ) from exc
    if exc.status is not None and 400 <= exc.status < 500 and exc.status not in (408, 409, 410):
        done.rejected = f"evicting {name} refused (HTTP {exc.status}): {refusal.message}"
        done.rejected += f"; {done.evicted} evicted before" if done.evicted else ""
        return
    if exc.status is None:
        raise from_kubernetes(pool_id, exc) from exc
    raise from_status(pool_id, exc.status, f"evicting {name}: {exc.reason}: {refusal.message}") from exc

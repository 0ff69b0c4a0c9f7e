"""What one tick decided, as events a person can read next to the object they concern: pure, one place.

``decision_events(plan, results, recommend)`` turns a tick's plan and the outcomes of its actions into
``DecisionEvent`` values; the daemon writes them as Kubernetes Events (``agent.daemon.decision_recorder``). Each
names its subject (the unit a drain takes out, or a pool when the decision is about the pool as a whole), a short
CamelCase reason, a message with the numbers, and the numbers again as fields. A drained unit is a node, or a
whole TPU slice for a slice group (``actuators.slice_drain``): its name is then the slice's, not a Node's, and the
recorder, which knows the slice groups, attaches the event to a slice's record instead (``SubjectKind.SLICE``).

* Pool decisions: ``ScaleUp`` / ``ScaleDown`` (the cloud accepted the resize), ``ScaleUpFailed`` /
  ``ScaleDownFailed``, ``ScaleUpRejected`` / ``ScaleDownRejected`` (re-validation on fresh state refused it),
  ``BudgetTrimmed`` (a budget cap cut or kept units) and ``HeldMissingData`` (no trustworthy demand: held).
  Every pool event is rendered from the pool's decision record (``CapacityPlan.decisions``): a resize's reason
  is the record's chain, and its numbers carry the chain's stages (``need_chips``, ``rounded_units`` ...
  ``target_units``) next to ``from_units`` and ``to_units``.
* Node decisions, for pools that shrink by drains: ``Cordoned`` and ``DrainStarted`` when a drain begins, not for
  a drain its first step rejected: nothing cordoned (an AWS group at its minimum size cannot lose the node), or
  the node cordoned and uncordoned again in the same step (a pod that must not be disrupted, one given
  accelerator work since the idle check, one selected by two PodDisruptionBudgets; the drainer's detail names
  the pods it evicted before giving up). Only ``DrainRejected`` is told, with that detail, and the pool's event is
  a ``ScaleDownRejected`` when no drain of the resize began. Then ``DrainWaiting`` while evicted pods shut down
  within their grace periods, ``DrainBlocked`` (a warning) while a PodDisruptionBudget refuses an eviction, the
  API server throttles evictions, or a pod waits for its namespace's deletion, the cause named (the drainer
  reports such a drain as started, not settled), ``DrainFinished``, ``DrainFailed`` (gave up, node uncordoned),
  ``DrainRejected`` (a pod must not be disrupted) and ``DrainCancelled`` (demand came back: a scale-up ended the
  drain of an idle node, uncordoned, instead of buying a new one).
* Dry-run (``recommend``): an action that was recorded, not carried out, gets the reason ``RecommendScaleUp``,
  ``RecommendScaleDown`` or ``RecommendDrain``, and every message starts with ``dry-run:``, holds included.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from actuators.drain_words import NAMESPACE_GOING, THROTTLED
from models import DRAIN_KEY_MARK, ActionResult, ActionStatus, CapacityPlan, PoolDecision, Resize, SkipReason

_ACCEPTED = (ActionStatus.DONE, ActionStatus.STARTED)


class SubjectKind(StrEnum):
    NODE = "node"  # a drained unit: a node, or a TPU slice until the recorder tells it apart (``as_slice``)
    POOL = "pool"
    SLICE = "slice"  # a TPU slice of a slice group: every node of one GKE node pool


@dataclass(frozen=True)
class DecisionEvent:
    """One decision about ``subject`` (a node name, or a pool id when ``subject_kind`` is POOL)."""

    subject_kind: SubjectKind
    subject: str
    pool_id: str
    reason: str
    message: str
    warning: bool = False
    numbers: dict[str, str] = field(default_factory=dict)


def decision_events(
    plan: CapacityPlan | None, results: Sequence[ActionResult], recommend: bool
) -> tuple[DecisionEvent, ...]:
    """The events of one tick, in the order the decisions were taken: resizes, drains, then holds."""
    events: list[DecisionEvent] = []
    resizes = plan.resizes if plan is not None else ()
    planned = {r.key: r for r in resizes}
    by_key = {r.key: r for r in results}
    for resize in resizes:
        decision = plan.decisions.get(resize.pool_id) if plan is not None else None
        result = by_key.get(resize.key)
        events.extend(_resize_events(resize, result, results, decision))
        events.extend(_taken_back_events(resize, result))
    for result in results:
        if DRAIN_KEY_MARK in result.key:
            events.extend(_drain_events(result, planned))
    if plan is not None:
        for pool_id, decision in sorted(plan.decisions.items()):
            events.extend(_held_events(pool_id, decision))
    if recommend:
        events = [_as_recommendation(e) for e in events]
    return tuple(events)


def _held_events(pool_id: str, decision: PoolDecision) -> Iterable[DecisionEvent]:
    """A pool's budget cuts and its holds on missing data or a budget, from its decision record."""
    numbers = _stages(decision)
    for cut in decision.budget_cuts:
        yield _pool(pool_id, "BudgetTrimmed", cut.detail, True, numbers)
    for hold in decision.holds:
        if hold.reason is SkipReason.MISSING_DATA:
            yield _pool(pool_id, "HeldMissingData", f"held: {hold.detail}", True, numbers)
        elif hold.reason is SkipReason.BUDGET:
            yield _pool(pool_id, "BudgetTrimmed", hold.detail, True, numbers)


def _stages(decision: PoolDecision | None) -> dict[str, str]:
    """The decision's chain as event fields (units; the need in chips)."""
    if decision is None:
        return {}
    numbers = {f"{stage}_units": f"{value:g}" for stage, value in decision.stages().items() if stage != "need"}
    return {"need_chips": f"{decision.need_chips:g}", **numbers}


def _resize_events(
    resize: Resize, result: ActionResult | None, results: Sequence[ActionResult], decision: PoolDecision | None
) -> Iterable[DecisionEvent]:
    verb = "ScaleUp" if resize.is_scale_up else "ScaleDown"
    words = "scale up" if resize.is_scale_up else "scale down"
    change = f"from {resize.from_units} to {resize.to_units} units"
    numbers = {"from_units": str(resize.from_units), "to_units": str(resize.to_units), **_stages(decision)}
    drains = [r for r in results if r.key.startswith(resize.key + DRAIN_KEY_MARK)]
    begun = [r for r in drains if not _not_begun(r)]
    if drains and not begun:  # every drain rejected at its first step: no node left cordoned, the pool unchanged
        why = "; ".join(r.detail for r in drains)
        yield _pool(resize.pool_id, f"{verb}Rejected", f"did not {words} {change}: {why}", True, numbers)
        return
    if begun:
        nodes = ", ".join(_node_of(r.key) for r in begun)
        status = ActionStatus.RECORDED if all(r.status is ActionStatus.RECORDED for r in begun) else None
        if status is ActionStatus.RECORDED:
            yield _pool(
                resize.pool_id,
                f"Recommend{verb}",
                f"would {words} {change} by draining {nodes}: {resize.reason}",
                numbers=numbers,
            )
        else:
            yield _pool(resize.pool_id, verb, f"{words} {change} by draining {nodes}: {resize.reason}", numbers=numbers)
        return
    if result is None:
        return
    if result.status in _ACCEPTED:
        yield _pool(resize.pool_id, verb, f"{words} {change}: {resize.reason}", numbers=numbers)
    elif result.status is ActionStatus.RECORDED:
        yield _pool(resize.pool_id, f"Recommend{verb}", f"would {words} {change}: {resize.reason}", numbers=numbers)
    elif result.status is ActionStatus.REJECTED:
        yield _pool(resize.pool_id, f"{verb}Rejected", f"did not {words} {change}: {result.detail}", True, numbers)
    else:
        why = result.error or result.detail or "failed"
        yield _pool(resize.pool_id, f"{verb}Failed", f"could not {words} {change}: {why}", True, numbers)


def _taken_back_events(resize: Resize, result: ActionResult | None) -> Iterable[DecisionEvent]:
    """The draining nodes a scale-up took back: their drains ended and they serve again."""
    if result is None:
        return
    change = f"{resize.from_units} to {resize.to_units} units"
    numbers = {"from_units": str(resize.from_units), "to_units": str(resize.to_units)}
    for node in result.taken_back:
        text = f"drain ended, uncordoned to serve again: pool {resize.pool_id} scales up from {change}"
        yield _node(node, resize.pool_id, "DrainCancelled", text, numbers=numbers)


def _drain_events(result: ActionResult, planned: dict[str, Resize]) -> Iterable[DecisionEvent]:
    node = _node_of(result.key)
    pool_id = result.pool_id
    resize = planned.get(result.key.split(DRAIN_KEY_MARK, maxsplit=1)[0])
    if result.status is ActionStatus.RECORDED:
        why = f": {resize.reason}" if resize is not None else ""
        yield _node(node, pool_id, "RecommendDrain", f"would cordon and drain it to shrink pool {pool_id}{why}")
        return
    if resize is not None and not _not_begun(result):
        # a drain this tick began (a drain continued from an earlier tick has no plan entry)
        change = f"{resize.from_units} to {resize.to_units} units"
        numbers = {"from_units": str(resize.from_units), "to_units": str(resize.to_units)}
        yield _node(node, pool_id, "Cordoned", f"cordoned to shrink pool {pool_id} from {change}", numbers=numbers)
        yield _node(
            node, pool_id, "DrainStarted", f"evicting pods to shrink pool {pool_id}: {resize.reason}", numbers=numbers
        )
    if result.status is ActionStatus.STARTED and (causes := _blocked_by(result.detail)):
        yield _node(node, pool_id, "DrainBlocked", f"pool {pool_id}: {result.detail} ({'; '.join(causes)})", True)
    elif result.status is ActionStatus.STARTED:  # evicted pods still shutting down within their grace periods
        yield _node(node, pool_id, "DrainWaiting", f"pool {pool_id}: {result.detail}")
    elif result.status is ActionStatus.DONE:
        yield _node(node, pool_id, "DrainFinished", f"pool {pool_id}: {result.detail}")
    elif result.status is ActionStatus.REJECTED:
        yield _node(node, pool_id, "DrainRejected", f"pool {pool_id}: {result.detail}", True)
    elif result.status is ActionStatus.FAILED:
        yield _node(node, pool_id, "DrainFailed", f"pool {pool_id}: {result.error or result.detail}", True)


def _blocked_by(detail: str) -> list[str]:
    """What keeps a drain's pods from being evicted, as the drainer's detail tells it (``actuators.drain_words``):
    a PodDisruptionBudget (named in the detail), the API server's throttling, a namespace being deleted."""
    causes = ["PodDisruptionBudget"] * ("disruption budget" in detail.lower())
    causes += ["the Kubernetes API server is throttling evictions"] * (THROTTLED in detail)
    causes += ["a namespace being deleted, which takes its pods"] * (NAMESPACE_GOING in detail)
    return causes


def _not_begun(result: ActionResult) -> bool:
    """The first step of a drain (its release planned this tick) that rejected it: the drain is over, its node not
    left cordoned (never cordoned, or uncordoned in that step), so no drain began."""
    return result.status is ActionStatus.REJECTED


def _node_of(key: str) -> str:
    return key.split(DRAIN_KEY_MARK, maxsplit=1)[1]


def _pool(
    pool_id: str, reason: str, text: str, warning: bool = False, numbers: dict[str, str] | None = None
) -> DecisionEvent:
    return DecisionEvent(SubjectKind.POOL, pool_id, pool_id, reason, f"pool {pool_id}: {text}", warning, numbers or {})


def _node(
    node: str, pool_id: str, reason: str, text: str, warning: bool = False, numbers: dict[str, str] | None = None
) -> DecisionEvent:
    return DecisionEvent(SubjectKind.NODE, node, pool_id, reason, text, warning, numbers or {})


def as_slice(event: DecisionEvent) -> DecisionEvent:
    """A drained unit's event about a TPU slice (its subject is the slice's name): the message starts with the slice
    (after a dry-run's mark) and its numbers name it."""
    mark = "dry-run: " if event.message.startswith("dry-run: ") else ""
    message = f"{mark}slice {event.subject}: {event.message.removeprefix(mark)}"
    numbers = {"slice": event.subject, **event.numbers}
    return DecisionEvent(SubjectKind.SLICE, event.subject, event.pool_id, event.reason, message, event.warning, numbers)


def _as_recommendation(event: DecisionEvent) -> DecisionEvent:
    return DecisionEvent(
        event.subject_kind,
        event.subject,
        event.pool_id,
        event.reason,
        f"dry-run: {event.message}",
        event.warning,
        event.numbers,
    )

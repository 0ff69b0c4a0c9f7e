"""Capacity plans and their outcomes: every decision, and every decision not to act, with its reason (the
per-pool record of each is a ``PoolDecision``, in ``models.decision``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from models.budget import BudgetSnapshot
from models.decision import PoolDecision, SkipReason


@dataclass(frozen=True)
class Resize:
    """Set a pool to an absolute number of units. ``key`` makes repeated submissions idempotent.

    ``forced`` marks a release that a budget's hard stop asked for (``budgets[].commit_horizon``): the money left
    no longer pays for the units held, so busy units go too (their work goes back to the queue), idle ones first.
    """

    pool_id: str
    from_units: int
    to_units: int
    reason: str
    key: str
    forced: bool = False

    @property
    def is_scale_up(self) -> bool:
        return self.to_units > self.from_units


DRAIN_KEY_MARK = "/drain/"  # a drain's key is "<key of the planned release>/drain/<node>"


def drain_key(release_key: str, node: str) -> str:
    """The key of draining ``node`` as part of the release whose key is ``release_key``."""
    return f"{release_key}{DRAIN_KEY_MARK}{node}"


@dataclass(frozen=True)
class Drain:
    """Cordon and evict one idle node before its pool shrinks by exactly that node (chosen at plan time)."""

    pool_id: str
    node: str
    reason: str
    key: str


@dataclass(frozen=True)
class Skip:
    """A decision not to act on a pool, with the reason a person would want to read."""

    pool_id: str
    reason: SkipReason
    detail: str


@dataclass(frozen=True)
class CapacityPlan:
    """What the planner decided at ``now``: resizes and drains to carry out, skips to record."""

    now: datetime
    resizes: tuple[Resize, ...] = ()
    drains: tuple[Drain, ...] = ()
    skips: tuple[Skip, ...] = ()
    targets: dict[str, int] = field(default_factory=dict)
    budgets: tuple[BudgetSnapshot, ...] = ()  # each cap's spend so far and its projection with this plan
    decisions: dict[str, PoolDecision] = field(default_factory=dict)  # why each pool's target is what it is

    @property
    def is_empty(self) -> bool:
        return not self.resizes and not self.drains


class ActionStatus(StrEnum):
    DONE = "done"
    STARTED = "started"  # accepted; the operation completes later (units in flight)
    RECORDED = "recorded"  # dry-run: written down, not carried out
    REJECTED = "rejected"  # re-validation on fresh state found the action no longer valid
    FAILED = "failed"


@dataclass(frozen=True)
class UnfinishedPod:
    """A pod still terminating on a unit its drain removed after the drain's timeout (``ActionResult.unfinished``):
    no kubelet was finishing it. ``kubelet_gone``: its node's kubelet stopped posting the node's status (``Ready``
    Unknown), so nothing was left to stop its containers; else its kubelet was alive and did not stop them within
    the pod's grace period and ``actuators.pod_rules.STUCK_AFTER`` (a stuck pod)."""

    namespace: str
    name: str
    node: str
    kubelet_gone: bool


@dataclass(frozen=True)
class ActionResult:
    """The outcome of one action."""

    key: str
    pool_id: str
    status: ActionStatus
    at: datetime
    detail: str = ""
    error: str | None = None
    taken_back: tuple[str, ...] = ()  # a scale-up's draining nodes whose drains it ended: they serve again
    # a failed call whose answer was not had (a timeout, no answer, an error after sending): the cloud may carry it out
    unclear: bool = False
    # a drain that removed its unit with pods still terminating: their work may be lost (``agent.drain_records``)
    unfinished: tuple[UnfinishedPod, ...] = ()

"""What the drains of ``agent.drains`` remember and report: a drain in progress (``PendingDrain``), the drains a leader
settled, which the planner memory carries to the next leader (``SettledDrains``), the outcome of drain calls the
executor acts on (``DrainOutcome``), and the warnings about a pool's nodes (a node a drain left
cordoned that a dry run cannot continue, or left cordoned while the cloud deleted it, which a dry run does not
uncordon, idle nodes that cannot be read, an idle node no drain can empty, a unit a
drain removed with pods that never finished terminating, and the end of the warning about a node left cordoned while
the cloud deleted it, once the cloud stopped deleting it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from actuators.drain_mark_names import DRAIN_MARKS, LEFT_DELETING_ANNOTATION
from actuators.pod_rules import (
    DO_NOT_DISRUPT,
    LOCAL_STORAGE,
    NO_CONTROLLER,
    SAFE_TO_EVICT,
    SAFE_TO_EVICT_LOCAL_VOLUMES,
    STUCK_AFTER,
)
from models import ActionResult, AlertEvent, AlertKind, Severity, UnfinishedPod
from models.durations import format_duration

# The Eviction API's words for a pod selected by several PodDisruptionBudgets, which a drain's rejection quotes.
MULTIPLE_BUDGETS = "more than one PodDisruptionBudget"
# How many drains settled the planner memory keeps, all pools together, the latest (``SettledDrains``): a replica that
# leads again after another led drops the removals it remembers whose drains that one settled. Bounded by count, not
# by age: a replica standing by keeps its removals for as long as another leads. About 135 bytes each in the document
# with GKE's node names, so about 270 KB at most, well under the 1 MiB a ConfigMap's data may hold.
SETTLED_KEPT = 2000


@dataclass(frozen=True)
class PendingDrain:
    pool_id: str
    node: str
    key: str
    # A release of idle nodes (not forced: started here, or taken over unmarked): it may be taken back for a scale-up.
    idle: bool = field(default=False, compare=False)
    # When this agent started the drain (None: taken over, its start unknown).
    started: datetime | None = field(default=None, compare=False)
    # A forced release's drain, which may evict accelerator work. A drain taken over says so on its nodes, where
    # the drainer reads it.
    forced: bool = field(default=False, compare=False)


class SettledDrains:
    """The keys of the drains a leader settled (done, failed or rejected) that another replica may remember as its
    removals, per pool, each with when: what the planner memory carries (``PlannerMemory.drains_settled``), so that a
    replica that leads again after another led knows which of the removals it remembers that one settled
    (``NodeDrains.recall_settled``). Only drains taken over are added (``NodeDrains`` says which): another replica
    remembers a removal only of a drain it stepped, and a drain this replica started and settled without another
    leading in between (a dry run's would-be drains among them) was stepped by no other. At most ``SETTLED_KEPT``
    are kept over all pools, the latest, the oldest dropped first; never dropped for their age, as the removals a
    replica standing by remembers are kept for as long as another leads."""

    def __init__(self) -> None:
        self._by_pool: dict[str, dict[str, datetime]] = {}

    def add(self, pool_id: str, key: str, at: datetime) -> None:
        self._by_pool.setdefault(pool_id, {})[key] = at

    def recall(self, record: Mapping[str, Mapping[str, datetime]]) -> None:
        """Add what the planner memory says was settled (by this replica or another), the later time where both
        know a key."""
        for pool_id, keys in record.items():
            mine = self._by_pool.setdefault(pool_id, {})
            for key, at in keys.items():
                mine[key] = max(at, mine.get(key, at))

    def keys(self) -> set[str]:
        return {key for keys in self._by_pool.values() for key in keys}

    def record(self) -> dict[str, dict[str, datetime]]:
        """What the planner memory keeps: the latest ``SETTLED_KEPT`` drains settled, all pools together (by when,
        then pool and key); the older ones are dropped here too."""
        entries = sorted((at, pool_id, key) for pool_id, keys in self._by_pool.items() for key, at in keys.items())
        kept: dict[str, dict[str, datetime]] = {}
        for at, pool_id, key in entries[-SETTLED_KEPT:]:
            kept.setdefault(pool_id, {})[key] = at
        self._by_pool = {pool_id: dict(keys) for pool_id, keys in kept.items()}
        return kept


@dataclass
class DrainOutcome:
    """Results of drain calls; ``permanent`` names pools whose drainer failed for good (stop touching them),
    ``failing`` pools where a drain failed in a way a later one may not (an error a retry may fix, or a drain given
    up at the drain timeout), with since when and the error, ``finished`` pools where a drain removed its
    node, and ``alerts`` what the steps had to tell, each once (``unfinished_pods_alert``)."""

    results: list[ActionResult] = field(default_factory=list)
    permanent: dict[str, str] = field(default_factory=dict)
    failing: dict[str, tuple[datetime, str]] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)
    alerts: list[AlertEvent] = field(default_factory=list)

    def extend(self, other: DrainOutcome) -> None:
        self.results.extend(other.results)
        self.alerts.extend(other.alerts)
        self.permanent.update(other.permanent)
        for pool_id, (since, error) in other.failing.items():
            if pool_id not in self.failing or since < self.failing[pool_id][0]:
                self.failing[pool_id] = (since, error)
        self.finished |= other.finished


def left_cordoned_alert(now: datetime, left: PendingDrain) -> AlertEvent:
    """A warning about a node a drain left cordoned that this agent, in dry-run mode, cannot continue: one condition
    per node, raised every tick while the cluster records the drain, so it ends once the node is uncordoned."""
    node, key = left.node, left.key
    summary = (
        f"Node {node} of pool {left.pool_id} is cordoned for a drain an agent in enforce mode started (key {key}). "
        "In dry-run mode nothing continues the drain or ends it at cloud.drain_timeout: the node stays unschedulable "
        "and billed. Switch back to enforce mode until the drain finishes, or uncordon its nodes and remove their "
        "drain marks (commands in the details)."
    )
    details = {
        "drain key": key,
        "find its nodes": "kubectl get nodes -o custom-columns='NAME:.metadata.name,"
        f"DRAIN:.metadata.annotations.leadtime\\.io/drain-key' | grep -F '{key}'",
        "uncordon each": "kubectl uncordon NAME && kubectl annotate node NAME "
        + " ".join(f"{mark}-" for mark in DRAIN_MARKS),
    }
    subject = f"node {node} of {left.pool_id} left cordoned"
    return AlertEvent(AlertKind.ACTUATOR_FAILURE, Severity.WARNING, now, subject, summary, details)


def left_deleting_alert(now: datetime, left: PendingDrain) -> AlertEvent:
    """A warning about a node an agent in enforce mode left cordoned when its drain ended while the cloud still
    deleted it (``LEFT_DELETING_ANNOTATION``, the drain's key), which this agent, in dry-run mode, neither asks the
    cloud about nor uncordons: one condition per node, raised every tick while the node is so marked and cordoned, so
    it ends once the node is uncordoned or leaves the cluster."""
    node, key = left.node, left.key
    summary = (
        f"Node {node} of pool {left.pool_id} is cordoned after a drain (key {key}) that ended while the cloud was "
        f"deleting its instance (marked {LEFT_DELETING_ANNOTATION}). In dry-run mode the agent does not ask the cloud "
        "about it or uncordon it: if the cloud no longer deletes the instance, the node stays unschedulable and "
        "billed. Check the instance in its instance group (details): once the cloud deletes it, its Node object "
        "goes; if the cloud no longer deletes it (running, no current action), uncordon the node and remove the mark "
        "(details), or delete the instance; in enforce mode the leader uncordons it itself."
    )
    details = {
        "drain key": key,
        "check the instance": (
            "its current action and last errors in its managed instance group (gcloud compute instance-groups "
            f"managed list-instances GROUP --zone ZONE), and the zone's operations on it (gcloud compute operations "
            f"list --filter='targetLink~{node}')"
        ),
        "uncordon it": f"kubectl uncordon {node} && kubectl annotate node {node} {LEFT_DELETING_ANNOTATION}-",
    }
    subject = f"node {node} of {left.pool_id} left cordoned while deleted"
    return AlertEvent(AlertKind.ACTUATOR_FAILURE, Severity.WARNING, now, subject, summary, details)


def unfinished_pods_alert(now: datetime, drained: PendingDrain, result: ActionResult) -> AlertEvent:
    """A warning about a unit its drain removed after the drain's timeout with pods still terminating
    (``result.unfinished``): pods a dead kubelet left behind, or stuck on a live kubelet that did not stop their
    containers. Their work may be lost, and a kubelet that cannot stop containers points at a broken node or
    container runtime. A one-off event, raised by the drain step that removed the unit and never again (the drain is
    settled), so it is told once per removal and never resolved. A unit whose pods ran on nodes named otherwise is a
    TPU slice (``actuators.slice_drain``): the only unit of several nodes."""
    pods = result.unfinished
    unit, pool_id = drained.node, drained.pool_id
    nodes = sorted({pod.node for pod in pods})
    noun = "node" if nodes == [unit] else "slice"
    gone = [pod for pod in pods if pod.kubelet_gone]
    stuck = [pod for pod in pods if not pod.kubelet_gone]
    why = []
    if gone:
        why.append(
            f"{_pods(gone)} {'was' if len(gone) == 1 else 'were'} left by a kubelet that stopped posting its node's "
            "status (Ready Unknown): the node died, hung or lost its network"
        )
    if stuck:
        why.append(
            f"{_pods(stuck)} {'was' if len(stuck) == 1 else 'were'} stuck terminating on a live kubelet for longer "
            f"than {'its' if len(stuck) == 1 else 'their'} grace period and {format_duration(STUCK_AFTER)}: the "
            "kubelet could not stop the containers, which usually means a broken node or container runtime (a process "
            "hung in the GPU driver after an Xid error or on an NFS mount, a container runtime that is down)"
        )
    summary = (
        f"{noun.capitalize()} {unit} of pool {pool_id} was removed by its drain (key {drained.key}) with pods still "
        "terminating once its drain timeout (cloud.drain_timeout, aws.drain_timeout for an AWS group) had passed: "
        f"{'; '.join(why)}. Work they had not saved (a "
        "checkpoint on SIGTERM) may be lost: check the jobs that owned them. If it happens again in this pool, look "
        "at its nodes' image, driver and hardware (details)."
    )
    details = {"drain key": drained.key}
    if gone:
        details["left by a dead kubelet"] = _pods(gone, on=True)
        details["check the node"] = (
            "why it stopped reporting: the instance's serial console and the cloud's logs of it (a kernel panic, a "
            "GPU fault, the network)"
        )
    if stuck:
        details["stuck on a live kubelet"] = _pods(stuck, on=True)
        details["check the runtime"] = (
            "the kubelet's and the container runtime's logs of the node, and its kernel log (dmesg: NVIDIA Xid "
            "errors, processes in uninterruptible sleep), in the cloud's logging: the node itself is gone"
        )
    details["check the work"] = (
        "the controllers of the pods (a Job's retries, a StatefulSet's replacement) and whether the work restarted "
        "from its last checkpoint: kubectl get pod -n NAMESPACE NAME -o yaml while it is still listed"
    )
    details["drain"] = result.detail
    subject = f"{noun} {unit} of {pool_id} removed with pods still terminating"
    return AlertEvent(AlertKind.DRAIN_UNFINISHED_PODS, Severity.WARNING, now, subject, summary, details)


def deletion_stopped_alert(now: datetime, drained: PendingDrain, uncordoned: str) -> AlertEvent:
    """The end of the ``drain-deletion-overdue`` warning about a node (``agent.drains.deletion_overdue_alert``: same
    kind and subject): the cloud no longer deletes the node its drain left cordoned (its instance runs again, not
    being deleted), and the agent uncordoned it (``uncordoned``: what the drainer did). The deletion the drain sent
    was not carried out, which a person may want to know the cause of."""
    node, pool_id = drained.node, drained.pool_id
    summary = (
        f"The cloud no longer deletes node {node} of pool {pool_id}: its instance runs again, not being deleted, so "
        f"the deletion its drain (key {drained.key}) sent was not carried out. The node, left cordoned when the drain "
        "ended, is uncordoned: it serves again, and is released again when it is idle. The instance's last errors in "
        "its instance group say why the deletion failed."
    )
    details = {
        "drain key": drained.key,
        "check the instance": (
            "its last errors in its managed instance group (gcloud compute instance-groups managed list-instances "
            "GROUP --zone ZONE), and the zone's operations on it (gcloud compute operations list "
            f"--filter='targetLink~{node}')"
        ),
        "uncordoned": uncordoned,
    }
    subject = f"node {node} of {pool_id} still being deleted"
    return AlertEvent(AlertKind.DRAIN_DELETION_OVERDUE, Severity.INFO, now, subject, summary, details, resolved=True)


def _pods(pods: list[UnfinishedPod], on: bool = False) -> str:
    """The pods as namespace/name, each with its node when ``on``."""
    return ", ".join(f"{p.namespace}/{p.name}" + f" on {p.node}" * on for p in pods)


# What happens to a pool whose idle nodes cannot be read (``agent.drains``: none of its units is known idle): the
# planner releases none of them for idleness, and still plans its scale-ups (a budget's hard stop may still release
# units). "Holding the pool's size", as this said before, was contradicted by the scale-ups planned beside it.
IDLE_UNREAD = (
    "Idle nodes cannot be read: the pool is not shrunk for idleness (none of its units is known idle); it is still "
    "scaled up when demand needs more"
)


def idle_nodes_alert(now: datetime, pool_id: str, summary: str, exc: Exception) -> AlertEvent:
    """A warning about the pool's nodes, under a subject of its own: it must not silence, nor be silenced by, the
    executor's alerts about the pool's changes."""
    subject = f"idle nodes of {pool_id}"
    return AlertEvent(AlertKind.ACTUATOR_FAILURE, Severity.WARNING, now, subject, summary, {"error": str(exc)})


def held_idle_alert(now: datetime, pool_id: str, node: str, why: str) -> AlertEvent:
    """A warning about an idle node of the pool that its drainer holds back from drains (``TellsHeldUnits``): one
    condition per node, raised every tick while it is held (the notifier sends it once per dedup window), so the
    operator learns why an idle unit is still paid for and what frees it (``held_advice``)."""
    advice = held_advice(why)
    summary = (
        f"Node {node} of pool {pool_id} runs no accelerator work, but a drain cannot empty it: {why}. It is not "
        "released and stays billed. It is offered for a release again at the next tick once you "
        f"{'; and '.join(advice)}."
    )
    subject = f"idle node {node} of {pool_id} not drained"
    return AlertEvent(AlertKind.ACTUATOR_FAILURE, Severity.WARNING, now, subject, summary, {"why": why})


def held_advice(why: str) -> list[str]:
    """What frees a node held back for ``why`` (a drain's rejection, or ``pod_rules.must_stay``'s reasons), one piece
    of advice per reason it gives: each lifts that reason only (safe-to-evict "true" lifts neither blocking
    annotation, and a node held after a rejection stays held while the pod is unchanged, whatever else changes)."""
    advice = []
    if DO_NOT_DISRUPT in why:
        advice.append(
            f"remove the annotation {DO_NOT_DISRUPT} from the pod when it may be disrupted "
            f"(kubectl annotate pod NAME {DO_NOT_DISRUPT}-)"
        )
    if f'{SAFE_TO_EVICT}: "false"' in why:
        advice.append(
            f'remove the pod\'s annotation {SAFE_TO_EVICT}: "false", or set it to "true", when its eviction is safe '
            f"(kubectl annotate --overwrite pod NAME {SAFE_TO_EVICT}=true)"
        )
    if NO_CONTROLLER in why:
        advice.append(
            "run a pod no controller recreates under one (a Deployment, a Job, a StatefulSet), or delete it "
            f'(an eviction would delete it; annotating it {SAFE_TO_EVICT}: "true" lets a drain do so)'
        )
    if LOCAL_STORAGE in why:
        advice.append(
            f"list the local volumes whose data may be lost in the pod's {SAFE_TO_EVICT_LOCAL_VOLUMES} "
            '(e.g. "scratch,cache"), or move that data elsewhere and delete the pod'
        )
    if MULTIPLE_BUDGETS in why:
        advice.append(
            "leave the pod under one PodDisruptionBudget, then restart it (delete it: its controller recreates it) "
            "or relabel it: the node is held while the pod is unchanged, so fixing the budgets alone does not free it"
        )
    if not advice:  # an eviction an admission webhook refused, or a reason not known here
        advice.append(
            "change what refuses the pod's eviction, then restart or relabel the pod: the node is held while the pod "
            "is unchanged"
        )
    return advice

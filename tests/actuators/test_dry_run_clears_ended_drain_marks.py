"""A dry run takes off the marks a drain left on a node a person uncordoned, and makes no other write: on the fake
Kubernetes and GKE APIs with the real client. Left on through a dry-run term, the marks of a budget's hard stop read
as that forced drain once someone cordons the node again and the agent is switched back to enforce mode (a new
process): its running training Job was evicted and the node deleted."""

from __future__ import annotations

from datetime import datetime, timedelta

from actuators import DryRunDrainer
from actuators.drain_mark_names import DRAIN_ANNOTATION
from actuators.kubernetes_drain import KubernetesNodeDrainer
from agent.daemon.guard import LeaderOnlyDrainer
from agent.drains import NodeDrains
from models import ActionStatus
from tests.actuators import kubernetes_drain_rig
from tests.actuators.kubernetes_drain_rig import Cluster, _cordoned
from tests.actuators.test_kubernetes_drain_ended_marks import _held_by_a_budget, _kubectl_cordon, _marks, _pools, _ticks
from tests.fakes import kube_objects as objs

cluster = kubernetes_drain_rig.cluster  # the fake Kubernetes and GKE APIs, a pool "a" of three nodes
WINDOW = timedelta(minutes=10)


def _new_process(c: Cluster) -> KubernetesNodeDrainer:
    return KubernetesNodeDrainer(c.api, c.clock, {"a": "a100"}, c.actuator, timedelta(minutes=15))


class _Leading:
    def __init__(self, leading: bool) -> None:
        self.leading = leading

    def is_leader(self, now: datetime) -> bool:
        return self.leading


def test_a_hard_stop_a_person_ended_during_a_dry_run_term_does_not_evict_a_job_once_enforcing(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    c.kube.put("pods", objs.pod("train-0", node, accelerators=8, owner_kind="Job", labels={"app": "train"}))
    c.kube.put("poddisruptionbudgets", objs.pdb("train", {"app": "train"}, min_available=1), group="policy")
    key = "hard-stop-1/drain/" + node
    assert c.drainer.drain("a", node, key, forced=True).status is ActionStatus.STARTED  # held by the budget

    dry = NodeDrains({"a": DryRunDrainer(_new_process(c), c.clock)}, WINDOW)  # switched to dry-run: a restart
    dry.observe(_pools(c), c.clock.now())
    _kubectl_cordon(c, node, False)  # a person ends the hard stop, as the alert says
    for _ in range(3):
        dry.observe(_pools(c), c.clock.now())
        c.clock.advance(timedelta(minutes=1))
    assert _marks(c, node) == {}
    assert not _cordoned(c, node)

    c.kube.delete("poddisruptionbudgets", "train", "default", group="policy")
    c.clock.advance(timedelta(days=2))
    _kubectl_cordon(c, node, True)  # maintenance, the job still running
    enforce = NodeDrains({"a": _new_process(c)}, WINDOW)  # switched back to enforce mode: a restart
    _ticks(c, enforce, 3)
    assert c.kube.get("pods", "train-0", "default") is not None
    assert c.gke.calls("POST", "deleteInstances") == 0
    assert _cordoned(c, node)  # the person's cordon stays


def test_a_dry_run_writes_only_the_removal_of_an_ended_drains_marks(cluster: Cluster) -> None:
    c = cluster
    ended, going = c.nodes[0], c.nodes[1]
    _held_by_a_budget(c, "web")
    for node in (ended, going):
        assert c.drainer.drain("a", node, "rel-1/drain/" + node).status is ActionStatus.STARTED
    _kubectl_cordon(c, ended, False)
    dry = DryRunDrainer(_new_process(c), c.clock)
    patches = c.kube.calls("patch", "nodes")
    evictions = c.kube.calls("create", "pods", "eviction")
    assert dry.draining_nodes("a") == {going: "rel-1/drain/" + going}
    assert c.kube.calls("patch", "nodes") == patches + 1  # the marks of the ended drain, nothing else
    assert _marks(c, ended) == {}
    assert not _cordoned(c, ended)
    assert _marks(c, going) == {DRAIN_ANNOTATION: "rel-1/drain/" + going}  # a drain in progress is left as it is
    assert _cordoned(c, going)
    assert dry.drain("a", c.nodes[2], "rel-2/drain/" + c.nodes[2]).status is ActionStatus.RECORDED
    assert c.kube.calls("patch", "nodes") == patches + 1
    assert c.kube.calls("create", "pods", "eviction") == evictions
    assert not _cordoned(c, c.nodes[2])


def test_a_dry_run_replica_that_does_not_lead_leaves_the_marks(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    _held_by_a_budget(c, "web")
    key = "rel-1/drain/" + node
    assert c.drainer.drain("a", node, key).status is ActionStatus.STARTED
    _kubectl_cordon(c, node, False)
    leadership = _Leading(False)
    dry = LeaderOnlyDrainer(DryRunDrainer(_new_process(c), c.clock), leadership, c.clock)
    patches = c.kube.calls("patch", "nodes")
    assert dry.draining_nodes("a") == {}
    assert c.kube.calls("patch", "nodes") == patches
    assert _marks(c, node) == {DRAIN_ANNOTATION: key}
    leadership.leading = True
    assert dry.draining_nodes("a") == {}
    assert _marks(c, node) == {}

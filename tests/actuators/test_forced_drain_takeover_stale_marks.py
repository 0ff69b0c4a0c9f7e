"""A forced drain (a budget's hard stop) taken over by a process that did not start it is continued as forced only if
a step of it ran within the drain timeout (``leadtime.io/drain-forced-at``): on the fake Kubernetes and GKE APIs with
the real client. Older marks may be those of a drain a person ended with ``kubectl uncordon`` while no agent ran,
left on a node someone cordoned since: the drain is then continued unforced, and finding accelerator work it evicts
nothing, takes its marks off and leaves the cordon as it is (it may be that person's)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from actuators.drain_mark_names import DRAIN_ANNOTATION, FORCED_ANNOTATION
from actuators.kubernetes_drain import KubernetesNodeDrainer
from agent.drains import NodeDrains
from models import ActionStatus
from tests.actuators import kubernetes_drain_rig
from tests.actuators.kubernetes_drain_rig import Cluster, _cordoned
from tests.actuators.test_kubernetes_drain_ended_marks import _kubectl_cordon, _marks, _ticks
from tests.fakes import kube_objects as objs

cluster = kubernetes_drain_rig.cluster  # the fake Kubernetes and GKE APIs, a pool "a" of three nodes
WINDOW = timedelta(minutes=10)
TIMEOUT = timedelta(minutes=15)


def _new_process(c: Cluster) -> KubernetesNodeDrainer:
    return KubernetesNodeDrainer(c.api, c.clock, {"a": "a100"}, c.actuator, TIMEOUT)


def _hard_stop_held_by_a_budget(c: Cluster, node: str) -> str:
    c.kube.put("pods", objs.pod("train-0", node, accelerators=8, owner_kind="Job", labels={"app": "train"}))
    c.kube.put("poddisruptionbudgets", objs.pdb("train", {"app": "train"}, min_available=1), group="policy")
    key = "hard-stop-1/drain/" + node
    assert c.drainer.drain("a", node, key, forced=True).status is ActionStatus.STARTED
    return key


def test_a_hard_stop_ended_and_recordoned_while_no_agent_ran_evicts_nothing(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    _hard_stop_held_by_a_budget(c, node)
    _kubectl_cordon(c, node, False)  # the agent is down; a person ends the hard stop
    c.clock.advance(timedelta(days=2))
    _kubectl_cordon(c, node, True)  # and someone cordons the node for maintenance, still with no agent running
    c.kube.delete("poddisruptionbudgets", "train", "default", group="policy")
    results = _ticks(c, NodeDrains({"a": _new_process(c)}, WINDOW), 3)
    assert c.kube.get("pods", "train-0", "default") is not None
    assert c.gke.calls("POST", "deleteInstances") == 0
    assert _cordoned(c, node)  # the cordon is left as it is: it may be the person's
    assert _marks(c, node) == {}
    assert results[0][0] is ActionStatus.REJECTED
    assert f"uncordon {node} if no one else cordoned it" in results[0][1]


def test_a_forced_mark_without_the_time_of_a_step_is_not_continued_as_forced(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    c.kube.put("pods", objs.pod("train-0", node, accelerators=8, owner_kind="Job", labels={"app": "train"}))
    key = "hard-stop-1/drain/" + node  # as an earlier release marks a forced drain
    c.api.nodes.patch(node, {"spec": {"unschedulable": True}, "metadata": {"annotations": {DRAIN_ANNOTATION: key}}})
    c.api.nodes.patch(node, {"metadata": {"annotations": {FORCED_ANNOTATION: key}}})
    result = _new_process(c).drain("a", node, key)
    assert result.status is ActionStatus.REJECTED
    assert c.kube.get("pods", "train-0", "default") is not None
    assert _cordoned(c, node)


@pytest.mark.parametrize("since_last_step", [timedelta(minutes=1), TIMEOUT])
def test_a_forced_drain_taken_over_within_the_timeout_goes_on_forced(
    cluster: Cluster, since_last_step: timedelta
) -> None:
    c = cluster
    node = c.nodes[1]
    key = _hard_stop_held_by_a_budget(c, node)
    c.kube.delete("poddisruptionbudgets", "train", "default", group="policy")
    c.clock.advance(since_last_step)  # the agent stopped; a new leader takes the drain over
    assert _new_process(c).drain("a", node, key).status is ActionStatus.STARTED
    assert _terminating(c)  # evicted: shutting down within its grace period


def test_a_forced_drain_taken_over_past_the_timeout_is_not_forced(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    key = _hard_stop_held_by_a_budget(c, node)
    c.kube.delete("poddisruptionbudgets", "train", "default", group="policy")
    c.clock.advance(TIMEOUT + timedelta(seconds=1))
    assert _new_process(c).drain("a", node, key).status is ActionStatus.REJECTED
    assert not _terminating(c)


def _terminating(c: Cluster) -> bool:
    pod = c.kube.get("pods", "train-0", "default")
    return pod is not None and bool(pod["metadata"].get("deletionTimestamp"))

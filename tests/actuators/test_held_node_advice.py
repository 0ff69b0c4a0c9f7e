"""The warning about an idle node no drain can empty says, for each reason it gives, what lifts that reason, and doing
so frees the node.

The warning gave the same advice whatever the reason: to annotate the pod safe-to-evict "true", which does not lift
karpenter.sh/do-not-disrupt, and that the node is offered again once the pods are 'gone or changed'. Each case here
follows the advice the warning gives and checks that the node is then released, and that the warning gives no advice
for a reason it does not name. The agent's drains through the daemon's leader-only wrapper, with the real clients
against the fake Kubernetes and GKE APIs."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.actuators import kubernetes_drain_rig as rig
from tests.actuators.kubernetes_drain_rig import Cluster
from tests.actuators.test_drains_held_back import _bare, _do_not_evict, _drains, _scratch, _ticks
from tests.fakes import kube_objects as objs

cluster = rig.cluster
DO_NOT_DISRUPT = {"karpenter.sh/do-not-disrupt": "true"}


@dataclass(frozen=True)
class Case:
    put: Callable[[Cluster, str], None]  # the pods that keep the node from being drained
    advice: str  # what the warning says to do, and only for this reason
    follow: Callable[[Cluster, str], None]  # doing it


def _put(build: Callable[[str], dict[str, Any]]) -> Callable[[Cluster, str], None]:
    def put(c: Cluster, node: str) -> None:
        c.kube.put("pods", build(node))

    return put


def _annotate(name: str, change: Callable[[dict[str, str]], object]) -> Callable[[Cluster, str], None]:
    def follow(c: Cluster, node: str) -> None:
        pod = copy.deepcopy(c.kube.get("pods", name, "default"))
        assert pod is not None
        change(pod["metadata"].setdefault("annotations", {}))
        c.kube.put("pods", pod)

    return follow


def _db(c: Cluster, node: str) -> None:
    c.kube.put("pods", objs.pod("zz-db", node, labels={"app": "db"}, owner_kind="StatefulSet"))


def _two_budgets(c: Cluster, node: str) -> None:
    _db(c, node)
    c.kube.put("poddisruptionbudgets", objs.pdb("db", {"app": "db"}, max_unavailable=1), group="policy")
    c.kube.put("poddisruptionbudgets", objs.pdb("db-too", {"app": "db"}, max_unavailable=1), group="policy")


def _one_budget_and_restart(c: Cluster, node: str) -> None:
    c.kube.delete("poddisruptionbudgets", "db-too", "default", group="policy")
    c.kube.delete("pods", "zz-db", "default")  # its StatefulSet recreates it: a new pod
    _db(c, node)


CASES = {
    "do-not-disrupt": Case(
        _put(lambda node: objs.pod("debug-shell", node, owner_kind="ReplicaSet", annotations=DO_NOT_DISRUPT)),
        "remove the annotation karpenter.sh/do-not-disrupt from the pod",
        _annotate("debug-shell", lambda a: a.pop("karpenter.sh/do-not-disrupt")),
    ),
    "safe-to-evict false": Case(
        _put(_do_not_evict),
        'remove the pod\'s annotation cluster-autoscaler.kubernetes.io/safe-to-evict: "false", or set it to "true"',
        _annotate("debug-shell", lambda a: a.update({"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"})),
    ),
    "bare pod": Case(
        _put(_bare),
        "run a pod no controller recreates under one (a Deployment, a Job, a StatefulSet), or delete it",
        lambda c, node: c.kube.delete("pods", "debug-shell", "default"),
    ),
    "local storage": Case(
        _put(_scratch),
        "list the local volumes whose data may be lost in the pod's "
        "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes",
        _annotate(
            "debug-shell",
            lambda a: a.update({"cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes": "scratch"}),
        ),
    ),
    "two budgets": Case(
        _two_budgets,
        "leave the pod under one PodDisruptionBudget, then restart it (delete it: its controller recreates it) or "
        "relabel it",
        _one_budget_and_restart,
    ),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_the_warning_says_what_frees_the_node_for_its_reason(cluster: Cluster, case: Case) -> None:
    c = cluster
    node = c.nodes[1]
    case.put(c, node)
    drains = _drains(c)
    run = _ticks(c, drains, node, 4)
    summary = run.alerts[-1][0].summary

    advice = summary.split(". It is not released and stays billed. ")[1]
    assert case.advice in advice
    assert [other.advice for other in CASES.values() if other.advice in advice] == [case.advice]

    case.follow(c, node)
    after = _ticks(c, drains, node, 6)
    assert after.alerts[0] == []
    assert (after.rejected, after.done) == (0, 1)
    assert c.gke.calls("POST", "deleteInstances") == 1

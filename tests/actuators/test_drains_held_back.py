"""An idle node that no drain can empty is held back from drains and told about, not drained window after window.

A node running no accelerator work but holding a pod that must not be disrupted (a bare pod, safe-to-evict "false",
local storage) was offered as idle, so every stabilization window a release cordoned it, had its drain rejected and
uncordoned it: 18 rejected drains and 36 cordon patches in 6 hours of 5-minute ticks, and no alert. A pod under two
PodDisruptionBudgets, which only the Eviction API's 500 shows, did the same and had the node's other pods evicted
18 times. The agent's drains (``NodeDrains``), through the daemon's leader-only wrapper, against the fake Kubernetes
and GKE APIs with the real clients; each tick releases a node idle for the window, as the planner does."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest

from agent.daemon.guard import LeaderOnlyDrainer
from agent.drains import NodeDrains
from models import ActionStatus, AlertEvent, AlertKind, Resize, Severity
from tests.actuators import kubernetes_drain_rig as rig
from tests.actuators.kubernetes_drain_rig import Cluster, _cordoned, _evictions
from tests.fakes import kube_objects as objs

cluster = rig.cluster
WINDOW = timedelta(minutes=10)
TICK = timedelta(minutes=5)


class _Leads:
    def is_leader(self, now: datetime) -> bool:
        return True


@dataclass
class _Run:
    """What ticks of the agent's drains did to one node."""

    rejected: int = 0
    done: int = 0
    offered: int = 0  # ticks at which the node was among the pool's idle nodes
    alerts: list[list[AlertEvent]] = field(default_factory=list)  # per tick, those about the node


def _ticks(c: Cluster, drains: NodeDrains, node: str, count: int, run: _Run | None = None) -> _Run:
    run = run or _Run()
    for tick in range(count):
        c.clock.advance(TICK)
        now = c.clock.now()
        if c.kube.get("pods", f"web-{node}", "default") is None and not _cordoned(c, node):  # its ReplicaSet's new pod
            c.kube.put("pods", objs.pod(f"web-{node}", node, labels={"app": "web"}, owner_kind="ReplicaSet"))
        seen, alerts = drains.observe({"a": c.actuator.list_pools()[0]}, now)
        run.alerts.append([a for a in alerts if node in a.subject])
        state = seen["a"]
        run.offered += node in state.idle_nodes
        idle_long = [n for n, since in zip(state.idle_nodes, state.idle_since, strict=True) if now - since >= WINDOW]
        if node in idle_long:
            out = drains.scale_down(Resize("a", 3, 2, "idle", f"r{now:%H%M}-{tick}"), now, [node])
        else:
            out = drains.continue_pending(now)
        run.rejected += sum(r.status is ActionStatus.REJECTED for r in out.results)
        run.done += sum(r.status is ActionStatus.DONE for r in out.results)
    return run


def _patches(c: Cluster, node: str) -> int:
    return sum(1 for r in c.kube.requests if (r.verb, r.resource, r.name) == ("patch", "nodes", node))


def _drains(c: Cluster) -> NodeDrains:
    return NodeDrains({"a": LeaderOnlyDrainer(c.drainer, _Leads(), c.clock)}, WINDOW)


def _bare(node: str) -> dict[str, Any]:
    return objs.pod("debug-shell", node)


def _do_not_evict(node: str) -> dict[str, Any]:
    annotations = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
    return objs.pod("debug-shell", node, owner_kind="ReplicaSet", annotations=annotations)


def _scratch(node: str) -> dict[str, Any]:
    return objs.pod("debug-shell", node, owner_kind="Job", volumes=[objs.empty_dir("scratch")])


BLOCKERS: dict[str, tuple[Callable[[str], dict[str, Any]], str]] = {
    "bare pod": (_bare, "no controller recreates it"),
    "safe-to-evict false": (_do_not_evict, 'annotated cluster-autoscaler.kubernetes.io/safe-to-evict: "false"'),
    "local storage": (_scratch, "local storage emptyDir 'scratch' would be lost"),
}


@pytest.mark.parametrize("blocker", list(BLOCKERS.values()), ids=list(BLOCKERS))
def test_an_idle_node_with_a_pod_that_must_stay_is_not_offered_and_is_told(
    cluster: Cluster, blocker: tuple[Callable[[str], dict[str, Any]], str]
) -> None:
    c = cluster
    node = c.nodes[1]
    build, reason = blocker
    c.kube.put("pods", build(node))
    drains = _drains(c)

    run = _ticks(c, drains, node, 72)  # 6 hours

    assert (run.offered, run.rejected, _patches(c, node), _evictions(c, f"web-{node}")) == (0, 0, 0, 0)
    assert all(len(tick) == 1 for tick in run.alerts)  # raised every tick; the notifier sends it once per window
    alert = run.alerts[-1][0]
    assert (alert.kind, alert.severity) == (AlertKind.ACTUATOR_FAILURE, Severity.WARNING)
    assert alert.subject == f"idle node {node} of a not drained"
    assert f"default/debug-shell ({reason})" in alert.summary
    assert f"Node {node} of pool a runs no accelerator work" in alert.summary

    c.kube.delete("pods", "debug-shell", "default")  # a person removes it: the node is released
    after = _ticks(c, drains, node, 6)
    assert after.alerts[0] == []
    assert after.done == 1
    assert c.gke.calls("POST", "deleteInstances") == 1


def test_a_node_rejected_for_a_pod_under_two_budgets_is_held_until_the_pod_changes(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    c.kube.put("pods", objs.pod("zz-db", node, labels={"app": "db"}, owner_kind="StatefulSet"))
    c.kube.put("poddisruptionbudgets", objs.pdb("db", {"app": "db"}, max_unavailable=1), group="policy")
    c.kube.put("poddisruptionbudgets", objs.pdb("db-too", {"app": "db"}, max_unavailable=1), group="policy")
    drains = _drains(c)

    run = _ticks(c, drains, node, 72)  # 6 hours

    assert run.rejected == 1
    assert _evictions(c, f"web-{node}") == 1  # once, before the 500: not once per window
    assert _patches(c, node) == 2  # one cordon, one uncordon
    assert not _cordoned(c, node)
    told = [tick for tick in run.alerts if tick]
    assert len(told) == 72 - run.alerts.index(told[0])  # from the rejection on, every tick
    assert "pod ('default', 'zz-db') is selected by more than one PodDisruptionBudget" in told[-1][0].summary

    c.kube.delete("poddisruptionbudgets", "db-too", "default", group="policy")
    still = _ticks(c, drains, node, 6)  # the pod is unchanged: nothing tells the agent the budget is gone
    assert (still.rejected, still.offered, all(still.alerts)) == (0, 0, True)

    c.kube.delete("pods", "zz-db", "default")  # restarted by its StatefulSet: a new pod, the hold ends
    c.kube.put("pods", objs.pod("zz-db", node, labels={"app": "db"}, owner_kind="StatefulSet"))
    after = _ticks(c, drains, node, 8)
    assert after.alerts[0] == []
    assert (after.rejected, after.done) == (0, 1)
    assert _evictions(c, "zz-db") == 2  # the one refused with the 500, and this one
    assert c.gke.calls("POST", "deleteInstances") == 1

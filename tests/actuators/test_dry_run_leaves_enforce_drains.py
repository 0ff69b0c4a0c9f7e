"""A drain an agent in enforce mode left waiting on a disruption budget, then the Deployment switched back to dry-run
(docs/install.md step 6), on the fake Kubernetes and GKE APIs with the real drainer wrapped as the daemon wraps it in
dry-run mode (``DryRunDrainer`` inside ``LeaderOnlyDrainer``): the dry-run agent does not take the drain over, counts
the cordoned node in the pool (not gone), sends nothing, and warns once per node (one condition, raised every tick
while the node stays cordoned) with what to do; the condition ends once a person uncordons the node."""

from __future__ import annotations

from datetime import datetime, timedelta

from actuators import DryRunDrainer
from actuators.drain_mark_names import DRAIN_ANNOTATION
from actuators.dry_run import sends_drains
from agent.conditions import ConditionTracker
from agent.daemon.guard import LeaderOnlyDrainer
from agent.drains import NodeDrains
from models import ActionStatus, AlertEvent, AlertKind, PoolState, Severity
from tests.actuators import kubernetes_drain_rig
from tests.actuators.kubernetes_drain_rig import Cluster, _cordoned
from tests.fakes import kube_objects as objs

MINUTE = timedelta(minutes=1)
cluster = kubernetes_drain_rig.cluster  # the fake Kubernetes and GKE APIs, a pool "a" of three nodes


class _Leading:
    def is_leader(self, now: datetime) -> bool:
        return True


def _dry_run(c: Cluster) -> NodeDrains:
    """The drains of a dry-run daemon's loop, its drainer wrapped as ``agent.daemon.wiring`` wraps it."""
    drainer = LeaderOnlyDrainer(DryRunDrainer(c.drainer, c.clock), _Leading(), c.clock)
    return NodeDrains({"a": drainer}, stabilization=10 * MINUTE)


def _left_by_enforce(c: Cluster, node: str) -> None:
    """The enforce leader's drain of ``node``, held up by a budget that allows no eviction, before the switch."""
    c.kube.put(
        "poddisruptionbudgets", objs.pdb("web", {"app": "web"}, min_available=3, expected_pods=3), group="policy"
    )
    assert c.drainer.drain("a", node, "a@t0->2/drain/" + node).status is ActionStatus.STARTED
    assert _cordoned(c, node)


def _pool(c: Cluster) -> dict[str, PoolState]:
    return {s.pool_id: s for s in c.actuator.list_pools()}


def _uncordon(c: Cluster, node: str) -> None:
    """What ``kubectl uncordon NODE`` and ``kubectl annotate node NODE leadtime.io/drain-key-`` leave."""
    found = c.kube.get("nodes", node)
    assert found is not None
    found["spec"]["unschedulable"] = False
    found["metadata"]["annotations"].pop(DRAIN_ANNOTATION)
    c.kube.put("nodes", found)


def test_a_dry_run_agent_counts_the_cordoned_node_sends_nothing_and_says_what_to_do(cluster: Cluster) -> None:
    node = cluster.nodes[1]
    _left_by_enforce(cluster, node)
    drains = _dry_run(cluster)
    writes_before = len([r for r in cluster.kube.requests if r.verb in ("patch", "create", "delete")])
    read = _pool(cluster)["a"]
    assert (read.ready_units, read.target_units) == (3, 3)  # the node pool still holds (and bills) the node

    for _ in range(60):  # an hour of dry-run ticks: four times the drain timeout (15 minutes) that never runs
        cluster.clock.advance(MINUTE)
        seen, alerts = drains.observe(_pool(cluster), cluster.clock.now())
        state = seen["a"]
        assert (state.ready_units, state.target_units, state.draining_units) == (3, 3, 0)  # cordoned, not gone
        assert node not in state.idle_nodes
        assert [a.subject for a in alerts] == [f"node {node} of a left cordoned"]
        assert drains.pending == ()
        assert drains.continue_pending(cluster.clock.now()).results == []

    [alert] = alerts
    assert (alert.kind, alert.severity) == (AlertKind.ACTUATOR_FAILURE, Severity.WARNING)
    assert alert.summary.startswith(
        f"Node {node} of pool a is cordoned for a drain an agent in enforce mode started (key a@t0->2/drain/{node}). "
        "In dry-run mode nothing continues the drain or ends it at cloud.drain_timeout"
    )
    assert "Switch back to enforce mode until the drain finishes, or uncordon its nodes" in alert.summary
    assert alert.details["find its nodes"].endswith(f"| grep -F 'a@t0->2/drain/{node}'")
    assert alert.details["uncordon each"] == (
        "kubectl uncordon NAME && kubectl annotate node NAME leadtime.io/drain-key- leadtime.io/drain-forced- "
        "leadtime.io/drain-forced-at- leadtime.io/drain-started-at- leadtime.io/drain-left-deleting-"
    )  # every mark the drainer writes (two of them before)
    assert len([r for r in cluster.kube.requests if r.verb in ("patch", "create", "delete")]) == writes_before
    assert _cordoned(cluster, node)  # only a person (or an enforce agent) can end it
    assert cluster.gke.calls("POST", "deleteInstances") == 0

    _uncordon(cluster, node)
    cluster.clock.advance(MINUTE)
    seen, alerts = drains.observe(_pool(cluster), cluster.clock.now())
    assert alerts == ()
    assert node in seen["a"].idle_nodes  # serves again: an idle node like the others


def test_the_warning_is_one_condition_per_node_that_ends_once_the_node_is_uncordoned(cluster: Cluster) -> None:
    first, second = cluster.nodes[0], cluster.nodes[2]
    _left_by_enforce(cluster, first)
    assert cluster.drainer.drain("a", second, "a@t0->1/drain/" + second).status is ActionStatus.STARTED
    drains = _dry_run(cluster)
    conditions = ConditionTracker(resolve_after=5 * MINUTE, window=timedelta(hours=1))
    raised: list[AlertEvent] = []
    for minute in range(30):
        cluster.clock.advance(MINUTE)
        if minute == 10:
            _uncordon(cluster, first)
        _, alerts = drains.observe(_pool(cluster), cluster.clock.now())
        raised += alerts
        for end in conditions.update(cluster.clock.now(), alerts):
            raised.append(end)

    subjects = {(a.subject, a.resolved) for a in raised}
    assert subjects == {
        (f"node {first} of a left cordoned", False),
        (f"node {first} of a left cordoned", True),  # ended once uncordoned
        (f"node {second} of a left cordoned", False),  # still cordoned: still told
    }
    assert conditions.active == ((AlertKind.ACTUATOR_FAILURE, f"node {second} of a left cordoned"),)


def test_only_a_dry_run_drainer_says_its_drains_do_not_reach_the_cluster(cluster: Cluster) -> None:
    leading = _Leading()
    assert sends_drains(cluster.drainer)
    assert sends_drains(LeaderOnlyDrainer(cluster.drainer, leading, cluster.clock))
    assert not sends_drains(DryRunDrainer(cluster.drainer, cluster.clock))
    assert not sends_drains(LeaderOnlyDrainer(DryRunDrainer(cluster.drainer, cluster.clock), leading, cluster.clock))

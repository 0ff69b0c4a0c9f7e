"""A node an agent in enforce mode left cordoned when its drain ended while the cloud still deleted it
(``leadtime.io/drain-left-deleting``), then the Deployment switched to dry-run, on the fake Kubernetes and GKE APIs
with the real drainer wrapped as the daemon wraps it in dry-run mode (``DryRunDrainer`` inside
``LeaderOnlyDrainer``). The cloud keeps the instance: the enforce leader would uncordon the node; the dry-run leader
neither asks the cloud nor uncordons it, and said nothing of it (the node stayed cordoned and paid for, with no
alert). It now warns once per node (one condition, raised every tick while the node stays so), saying to uncordon it
and remove the mark, and writes nothing; the condition ends once a person uncordons the node."""

from __future__ import annotations

from datetime import datetime, timedelta

from actuators import DryRunDrainer
from actuators.drain_mark_names import LEFT_DELETING_ANNOTATION
from agent.conditions import ConditionTracker
from agent.daemon.guard import LeaderOnlyDrainer
from agent.drains import NodeDrains
from models import AlertEvent, AlertKind, PoolState, Severity
from tests.actuators import kubernetes_drain_rig
from tests.actuators.kubernetes_drain_rig import Cluster, _cordoned

MINUTE = timedelta(minutes=1)
WRITES = ("patch", "create", "update", "delete")
cluster = kubernetes_drain_rig.cluster  # the fake Kubernetes and GKE APIs, a pool "a" of three nodes


class _Leading:
    def is_leader(self, now: datetime) -> bool:
        return True


def _left_deleting(c: Cluster, node: str, key: str) -> None:
    """What the enforce leader's drain that ended while the cloud deleted ``node`` left: the node cordoned, its drain
    marks replaced by the left-deleting mark. The cloud has since stopped deleting the instance (it runs)."""
    found = c.kube.get("nodes", node)
    assert found is not None
    found["spec"]["unschedulable"] = True
    found["metadata"].setdefault("annotations", {})[LEFT_DELETING_ANNOTATION] = key
    c.kube.put("nodes", found)


def _writes(c: Cluster) -> int:
    return len([r for r in c.kube.requests if r.verb in WRITES])


def test_a_dry_run_leader_warns_of_a_node_left_deleting_at_each_tick_and_writes_nothing(cluster: Cluster) -> None:
    node, key = cluster.nodes[1], f"a@t0->2/drain/{cluster.nodes[1]}"
    _left_deleting(cluster, node, key)
    dry_run = DryRunDrainer(cluster.drainer, cluster.clock)
    drains = NodeDrains({"a": LeaderOnlyDrainer(dry_run, _Leading(), cluster.clock)}, stabilization=10 * MINUTE)
    states: dict[str, PoolState] = {s.pool_id: s for s in cluster.actuator.list_pools()}
    writes, reads = _writes(cluster), cluster.gke.calls("POST", "listManagedInstances")
    conditions = ConditionTracker(resolve_after=5 * MINUTE, window=timedelta(hours=1))
    raised: list[AlertEvent] = []

    for _ in range(30):  # half an hour of dry-run ticks
        cluster.clock.advance(MINUTE)
        _, alerts = drains.observe(states, cluster.clock.now())
        assert [a.subject for a in alerts] == [f"node {node} of a left cordoned while deleted"]  # none before
        assert drains.continue_pending(cluster.clock.now()).results == []
        raised += [*alerts, *conditions.update(cluster.clock.now(), alerts)]

    [alert] = alerts
    assert (alert.kind, alert.severity) == (AlertKind.ACTUATOR_FAILURE, Severity.WARNING)
    assert alert.summary.startswith(
        f"Node {node} of pool a is cordoned after a drain (key {key}) that ended while the cloud was deleting its "
        f"instance (marked {LEFT_DELETING_ANNOTATION}). In dry-run mode the agent does not ask the cloud about it or "
        "uncordon it"
    )
    assert "if the cloud no longer deletes it (running, no current action), uncordon the node and remove the mark" in (
        alert.summary
    )
    assert alert.details["uncordon it"] == (
        f"kubectl uncordon {node} && kubectl annotate node {node} leadtime.io/drain-left-deleting-"
    )
    assert alert.details["drain key"] == key
    assert _writes(cluster) == writes and dry_run.recorded == []  # never uncordoned, no cancel recorded
    assert cluster.gke.calls("POST", "listManagedInstances") == reads  # the cloud is not asked about it
    assert _cordoned(cluster, node)

    found = cluster.kube.get("nodes", node)
    assert found is not None
    found["spec"]["unschedulable"] = False  # kubectl uncordon
    cluster.kube.put("nodes", found)
    for _ in range(10):
        cluster.clock.advance(MINUTE)
        _, alerts = drains.observe(states, cluster.clock.now())
        assert alerts == ()
        raised += conditions.update(cluster.clock.now(), alerts)
    assert {(a.subject, a.resolved) for a in raised} == {
        (f"node {node} of a left cordoned while deleted", False),
        (f"node {node} of a left cordoned while deleted", True),  # ended once uncordoned
    }
    assert conditions.active == ()
    assert LEFT_DELETING_ANNOTATION not in (cluster.kube.get("nodes", node) or {})["metadata"]["annotations"]

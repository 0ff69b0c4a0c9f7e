"""A held idle node stays held while the same drainer surveys the daemon's other pools.

One KubernetesNodeDrainer serves every GKE node pool of the daemon. Its holds were keyed by unit alone and each
survey dropped those not among its own pool's units, so the survey of pool b ended the hold of pool a's node at every
tick: with a pod under two PodDisruptionBudgets, 18 rejected drains and 18 evictions of the node's web pod in 6 hours
of 5-minute ticks, as before holds existed. The agent's drains (``NodeDrains``) over both pools, through the daemon's
leader-only wrapper, with the real clients against the fake Kubernetes and GKE APIs."""

from __future__ import annotations

from datetime import timedelta

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.kubernetes_drain import KubernetesNodeDrainer
from agent.daemon.guard import LeaderOnlyDrainer
from agent.drains import NodeDrains
from config.cloud import NodePoolMapping
from models import ActionStatus, Resize
from tests.actuators import kubernetes_drain_rig as rig
from tests.actuators.kubernetes_drain_rig import CLUSTER, Cluster, _cordoned, _evictions
from tests.actuators.test_drains_held_back import TICK, WINDOW, _Leads
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients

cluster = rig.cluster


def test_a_hold_on_one_pool_survives_the_survey_of_another(cluster: Cluster) -> None:
    c = cluster
    c.gke.add_pool("h100", nodes=1)
    other = next(i.name for m in c.gke.pools["h100"].migs for i in m.instances)
    c.kube.put("nodes", objs.node(other, "h100"))
    c.kube.put("pods", objs.pod(f"train-{other}", other, accelerators=1, owner_kind="Job"))  # pool b is busy
    clients = google_clients(c.gke.url)
    mappings = [NodePoolMapping(pool="a", node_pool="a100"), NodePoolMapping(pool="b", node_pool="h100")]
    actuator = GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, mappings, c.clock)
    drainer = KubernetesNodeDrainer(c.api, c.clock, {"a": "a100", "b": "h100"}, actuator, timedelta(minutes=15))
    guarded = LeaderOnlyDrainer(drainer, _Leads(), c.clock)
    drains = NodeDrains({"a": guarded, "b": guarded}, WINDOW)
    node = c.nodes[1]
    for busy in c.nodes:
        if busy != node:
            c.kube.put("pods", objs.pod(f"train-{busy}", busy, accelerators=1, owner_kind="Job"))
    c.kube.put("pods", objs.pod("zz-db", node, labels={"app": "db"}, owner_kind="StatefulSet"))
    c.kube.put("poddisruptionbudgets", objs.pdb("db", {"app": "db"}, max_unavailable=1), group="policy")
    c.kube.put("poddisruptionbudgets", objs.pdb("db-too", {"app": "db"}, max_unavailable=1), group="policy")

    rejected, told = 0, 0
    for tick in range(72):  # 6 hours
        c.clock.advance(TICK)
        now = c.clock.now()
        if c.kube.get("pods", f"web-{node}", "default") is None and not _cordoned(c, node):
            c.kube.put("pods", objs.pod(f"web-{node}", node, labels={"app": "web"}, owner_kind="ReplicaSet"))
        seen, alerts = drains.observe({p.pool_id: p for p in actuator.list_pools()}, now)
        told += any(a.subject == f"idle node {node} of a not drained" for a in alerts)
        state = seen["a"]
        idle_long = [n for n, since in zip(state.idle_nodes, state.idle_since, strict=True) if now - since >= WINDOW]
        if node in idle_long:
            out = drains.scale_down(Resize("a", 3, 2, "idle", f"r{tick}"), now, [node])
        else:
            out = drains.continue_pending(now)
        rejected += sum(r.status is ActionStatus.REJECTED for r in out.results)

    assert (rejected, _evictions(c, f"web-{node}")) == (1, 1)
    assert drainer.held_units("a").keys() == {node}
    assert drainer.held_units("b") == {}
    assert told == 72 - 3  # from the rejection (the third tick: idle for the window) on, every tick

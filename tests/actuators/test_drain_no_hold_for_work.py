"""A drain rejected because work started on its node does not hold the node.

A release found a node idle, the scheduler bound a training pod to it before the drain cordoned it, and the drain was
rejected ('no longer idle: ... started on it'). That rejection names the new pod, so the drainer held the node as it
holds one rejected for a pod that must not be disrupted, and a held node goes last in a forced release's order: a
budget's hard stop then took a node running an 8-GPU job before the node running the new 1-GPU pod. Only rejections
the pods' own rules cause hold a node now. The agent's drains with the real clients against the fake Kubernetes and
GKE APIs, on six nodes (the tick's survey shares one list of pods, which the scheduler may overtake)."""

from __future__ import annotations

from datetime import timedelta

from agent.drains import NodeDrains
from models import ActionStatus, PoolState, Resize
from tests.actuators import test_drains_no_longer_idle as six
from tests.actuators.test_drains_no_longer_idle import WINDOW, Pool
from tests.fakes import kube_objects as objs

pool = six.pool
TICK = timedelta(minutes=5)


def test_work_started_on_a_node_does_not_put_it_last_in_a_forced_release(pool: Pool) -> None:
    node, *busy = pool.nodes
    for other in busy:
        pool.kube.put("pods", objs.pod(f"train-{other}", other, accelerators=8, owner_kind="Job"))
    drainer = pool.drainer()
    drains = NodeDrains({"a": drainer}, WINDOW)
    pool.observe(drains)
    pool.clock.advance(WINDOW + TICK)
    assert pool.observe(drains).idle_nodes == (node,)
    # the scheduler binds a 1-GPU pod to the node after the tick's survey, before the drain cordons it
    pool.kube.put("pods", objs.pod("train-1", node, accelerators=1, owner_kind="Job"))

    out = drains.scale_down(Resize("a", 6, 5, "idle", "r1"), pool.clock.now(), [node])

    assert [r.status for r in out.results] == [ActionStatus.REJECTED]
    assert out.results[0].detail.startswith("no longer idle: default/train-1 started on it")
    pool.clock.advance(TICK)
    now = pool.clock.now()
    _, alerts = drains.observe({"a": PoolState("a", now, 6, 6)}, now)
    assert drainer.held_units("a") == {}
    assert not any(node in a.subject for a in alerts)
    assert drainer.pool_nodes("a")[0] == node  # fewest accelerators: a hard stop takes it before an 8-GPU job
    assert pool.evictions() == 0

    pool.kube.delete("pods", "train-1", "default")  # the pod finishes: the node is idle and offered anew
    pool.clock.advance(TICK)
    assert pool.observe(drains).idle_nodes == (node,)

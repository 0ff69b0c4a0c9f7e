"""A held idle node stays held through status writes to the pod its drain was rejected for, and is offered again once
the pod is relabelled.

A node whose drain was rejected for a pod under two PodDisruptionBudgets is held while that pod is unchanged. The pod
was told unchanged by its resourceVersion, which every status write changes too (the kubelet's readiness flips and
container restarts): with one such write an hour, the hold ended each time and the node was cordoned, its web pod
evicted and its drain rejected again (7 rejections and 7 evictions in 6 hours). A pod is now the same while its uid,
labels and annotations are. The agent's drains through the daemon's leader-only wrapper, with the real clients against
the fake Kubernetes and GKE APIs."""

from __future__ import annotations

import copy

from tests.actuators import kubernetes_drain_rig as rig
from tests.actuators.kubernetes_drain_rig import Cluster, _evictions
from tests.actuators.test_drains_held_back import _drains, _ticks
from tests.fakes import kube_objects as objs

cluster = rig.cluster


def _under_two_budgets(c: Cluster, node: str) -> None:
    c.kube.put("pods", objs.pod("zz-db", node, labels={"app": "db"}, owner_kind="StatefulSet"))
    c.kube.put("poddisruptionbudgets", objs.pdb("db", {"app": "db"}, max_unavailable=1), group="policy")
    c.kube.put("poddisruptionbudgets", objs.pdb("db-too", {"app": "db"}, max_unavailable=1), group="policy")


def test_status_writes_to_the_held_pod_keep_the_hold(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    _under_two_budgets(c, node)
    drains = _drains(c)
    rejected = _ticks(c, drains, node, 12).rejected
    assert rejected == 1

    for hour in range(6):  # the kubelet writes the pod's status once an hour: readiness flips, a container restarts
        pod = copy.deepcopy(c.kube.get("pods", "zz-db", "default"))
        assert pod is not None
        version = pod["metadata"].get("resourceVersion")
        pod.setdefault("status", {})["conditions"] = [{"type": "Ready", "status": "True" if hour % 2 else "False"}]
        restarted = {"name": "main", "image": "db:1", "imageID": "", "restartCount": hour + 1, "ready": bool(hour % 2)}
        pod["status"]["containerStatuses"] = [restarted]
        c.kube.put("pods", pod)
        written = c.kube.get("pods", "zz-db", "default")
        assert written is not None and written["metadata"].get("resourceVersion") != version
        run = _ticks(c, drains, node, 12)
        rejected += run.rejected
        assert (run.offered, all(run.alerts)) == (0, True)

    assert (rejected, _evictions(c, f"web-{node}")) == (1, 1)


def test_relabelling_the_held_pod_ends_the_hold(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    _under_two_budgets(c, node)
    drains = _drains(c)
    assert _ticks(c, drains, node, 12).rejected == 1

    pod = copy.deepcopy(c.kube.get("pods", "zz-db", "default"))
    assert pod is not None
    pod["metadata"]["labels"] = {"app": "db-main"}  # the operator moves it out of both budgets' selection
    c.kube.put("pods", pod)
    after = _ticks(c, drains, node, 6)

    assert after.alerts[0] == []
    assert (after.rejected, after.done) == (0, 1)
    assert c.gke.calls("POST", "deleteInstances") == 1

"""``leadtime recommend`` tells the idle nodes a drain cannot empty, as the daemon alerts on them. The pool is read
from the fake GKE and Compute Engine APIs, its nodes and pods from the fake Kubernetes API, with the real clients
(``test_recommend_budget_drains``'s fixtures).

A node running no accelerator work but holding a bare pod (nothing recreates it, so no drain may evict it) is held
back from drains: the daemon warns about it every tick ('idle node NODE of POOL not drained'), an idle node still
paid for that only a person can free. Recommend read the idle nodes through the daemon's own drainers and dropped
those alerts: its report said nothing of the node, nor of a pool whose idle nodes could not be read (held at its
size). They are now in the report's warnings and its alerts, the latter saying what the plan does with the pool: it
is not shrunk for idleness, and still scaled up (the daemon's alert said its size was held). A pool whose drains in
progress could not be read for the same refusal is told in the same warning.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.fakes import kube_objects as objs
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.prometheus.server import PrometheusServer
from tests.prometheus.test_recommend_budget_drains import _config, _recommend

pytestmark = pytest.mark.xdist_group("prometheus")


def test_an_idle_node_no_drain_can_empty_is_told(
    prometheus: PrometheusServer, gke_api: FakeGkeApi, kube_api: FakeKubeApi, tmp_path: Path
) -> None:
    gke_api.add_pool("a100", nodes=3)
    nodes = [i.name for m in gke_api.pools["a100"].migs for i in m.instances]
    for name in nodes:
        kube_api.put("nodes", objs.node(name, "a100"))
    held = nodes[0]
    kube_api.put("pods", objs.pod("debug-shell", held))  # a bare pod, no accelerator work

    document = _recommend(_config(tmp_path, prometheus, gke_api, kube_api.url), tmp_path / "out")

    (warning,) = [w for w in document["warnings"] if held in w]
    assert f"Node {held} of pool a100 runs no accelerator work, but a drain cannot empty it" in warning
    assert "default/debug-shell (no controller recreates it)" in warning
    assert "stays billed" in warning
    (alert,) = [a for a in document["alerts"] if held in a["summary"]]
    assert alert["kind"] == "actuator-failure"
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert f"Node {held} of pool a100 runs no accelerator work" in report
    # only read: no node patched, cordoned or evicted
    assert {r.verb for r in kube_api.requests} <= {"get", "list"}


def test_idle_nodes_that_cannot_be_read_are_told(
    prometheus: PrometheusServer, gke_api: FakeGkeApi, kube_api: FakeKubeApi, tmp_path: Path
) -> None:
    gke_api.add_pool("a100", nodes=3)
    for instance in [i.name for m in gke_api.pools["a100"].migs for i in m.instances]:
        kube_api.put("nodes", objs.node(instance, "a100"))
    kube_api.fail_next(100, 403, verb="list", resource="pods")  # a role that may list nodes but not pods

    document = _recommend(_config(tmp_path, prometheus, gke_api, kube_api.url), tmp_path / "out")

    (warning,) = [w for w in document["warnings"] if w.startswith("idle nodes of a100: ")]
    # what the plan does with the pool: it is not shrunk, and it is scaled up (before: "holding the pool's size",
    # beside this very scale-up)
    (pool,) = document["pools"]
    assert pool["action"] == "scale-up" and pool["recommended_units"] > pool["current_units"] == 3
    assert warning.startswith(
        "idle nodes of a100: Idle nodes cannot be read: the pool is not shrunk for idleness (none of its units is "
        "known idle); it is still scaled up when demand needs more ("
    )
    assert "403" in warning and "holding" not in warning
    assert [w for w in document["warnings"] if "drains in progress" in w] == []  # the nodes were read
    (alert,) = [a for a in document["alerts"] if a["subject"] == "idle nodes of a100"]
    assert alert["summary"].startswith("Idle nodes cannot be read: the pool is not shrunk for idleness")


def test_drains_and_idle_nodes_failing_apart_are_told_apart(
    prometheus: PrometheusServer, gke_api: FakeGkeApi, kube_api: FakeKubeApi, tmp_path: Path
) -> None:
    """Two reads failing for two causes: each warning says its own error and its own consequence."""
    _pool_of_three(gke_api, kube_api, "a100")
    kube_api.fail_next(1, 401, verb="list", resource="nodes")  # the drains in progress: the first list of nodes
    kube_api.fail_next(100, 403, verb="list", resource="pods")  # the idle nodes: their pods

    document = _recommend(_config(tmp_path, prometheus, gke_api, kube_api.url), tmp_path / "out")

    told = [w for w in document["warnings"] if "a100" in w and ("drains" in w or "idle" in w)]
    assert len(told) == 2
    (drains,) = [w for w in told if w.startswith("pool a100: the drains in progress could not be read (")]
    assert "401" in drains and "counted as staying" in drains and "idle" not in drains
    (idle,) = [w for w in told if w.startswith("idle nodes of a100: Idle nodes cannot be read: ")]
    assert "403" in idle and "draining" not in idle


def test_two_pools_whose_idle_nodes_cannot_be_read_are_told_apart_in_the_alerts(
    prometheus: PrometheusServer, gke_api: FakeGkeApi, kube_api: FakeKubeApi, tmp_path: Path
) -> None:
    """recommendation.json's alerts gave kind and summary only: two pools whose idle nodes could not be read gave two
    identical entries naming neither pool. Each now has its subject and details (the error), redacted."""
    path = _config(tmp_path, prometheus, gke_api, kube_api.url)
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    doc["pools"].append({**doc["pools"][0], "id": "h100"})
    doc["budgets"][0]["pools"] = ["a100", "h100"]
    doc["cloud"]["node_pools"].append({"pool": "h100", "node_pool": "h100"})
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    for pool in ("a100", "h100"):
        _pool_of_three(gke_api, kube_api, pool)
    kube_api.fail_next(100, 403, verb="list", resource="pods")

    document = _recommend(path, tmp_path / "out")

    told = [a for a in document["alerts"] if a["summary"].startswith("Idle nodes cannot be read")]
    assert [a["subject"] for a in told] == ["idle nodes of a100", "idle nodes of h100"]
    for alert, pool in zip(told, ("a100", "h100"), strict=True):
        assert alert["kind"] == "actuator-failure"
        assert alert["details"]["error"].startswith(f"pool '{pool}': HTTP 403")
    assert all(set(a) == {"kind", "subject", "summary", "details"} for a in document["alerts"])


def _pool_of_three(gke_api: FakeGkeApi, kube_api: FakeKubeApi, pool: str) -> None:
    gke_api.add_pool(pool, nodes=3)
    for instance in [i.name for m in gke_api.pools[pool].migs for i in m.instances]:
        kube_api.put("nodes", objs.node(instance, pool))

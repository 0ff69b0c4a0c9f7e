"""``leadtime recommend`` tells the idle nodes a drain cannot empty, as the daemon alerts on them. The pool is read
from the fake GKE and Compute Engine APIs, its nodes and pods from the fake Kubernetes API, with the real clients
(``test_recommend_budget_drains``'s fixtures).

A node running no accelerator work but holding a bare pod (nothing recreates it, so no drain may evict it) is held
back from drains: the daemon warns about it every tick ('idle node NODE of POOL not drained'), an idle node still
paid for that only a person can free. Recommend read the idle nodes through the daemon's own drainers and dropped
those alerts: its report said nothing of the node, nor of a pool whose idle nodes could not be read (held at its
size). They are now in the report's warnings and its alerts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

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
    assert "Idle nodes cannot be read; holding the pool's size (" in warning and "403" in warning
    assert [w for w in document["warnings"] if "drains in progress" in w] == []  # the nodes were read

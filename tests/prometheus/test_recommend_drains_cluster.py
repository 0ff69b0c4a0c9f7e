"""``leadtime recommend`` reads the drains in progress only from the cluster it recommends for. Run from a workstation,
it reaches the cluster of the kubeconfig's current context, and its drainers count every node carrying a pool's label
as the pool's. The pools are read from the fake GKE and Compute Engine APIs, the nodes from the fake Kubernetes API
(reached through a kubeconfig the test writes), with the real clients.

Before, the context was not looked at: with the pool's 4 instances in GKE and another cluster's 4 nodes of a node pool
of the same name, 2 of them being drained, reached through a context of that other cluster, the report counted the
pool's 2 of 4 units as being drained (2 current units, 2 draining) and warned of nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from actuators.drain_mark_names import DRAIN_ANNOTATION
from tests.fakes import kube_objects as objs
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.prometheus.server import PrometheusServer
from tests.prometheus.test_recommend_budget_drains import _config, _recommend

pytestmark = pytest.mark.xdist_group("prometheus")


def _other_cluster_draining(gke: FakeGkeApi, kube: FakeKubeApi) -> None:
    """The pool's 4 instances in GKE, and on the Kubernetes API 4 nodes of another cluster whose node pool has the
    same name (the label ``cloud.google.com/gke-nodepool`` a GKE node carries), the last 2 cordoned by a drain."""
    gke.add_pool("a100", nodes=4)
    for i in range(4):
        node = objs.node(f"gke-other-a100-{i}", "a100", unschedulable=i >= 2)
        if i >= 2:
            node["metadata"]["annotations"] = {DRAIN_ANNOTATION: f"release-{i}"}
        kube.put("nodes", node)


def _kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cluster: str, server: str) -> None:
    """A kubeconfig whose current context ``dev`` names the cluster entry ``cluster`` (as gcloud or a person named
    it) at ``server``, with no credentials (the fake API takes none)."""
    path = tmp_path / "kubeconfig"
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": server}}],
        "users": [{"name": "me", "user": {"token": "t"}}],
        "contexts": [{"name": "dev", "context": {"cluster": cluster, "user": "me"}}],
        "current-context": "dev",
    }
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    monkeypatch.setenv("KUBECONFIG", str(path))


def test_a_context_of_another_gke_cluster_is_not_read(
    prometheus: PrometheusServer,
    gke_api: FakeGkeApi,
    kube_api: FakeKubeApi,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _other_cluster_draining(gke_api, kube_api)
    _kubeconfig(tmp_path, monkeypatch, f"gke_{gke_api.project}_{gke_api.location}_other", kube_api.url)

    document = _recommend(_config(tmp_path, prometheus, gke_api, None), tmp_path / "out")

    (pool,) = document["pools"]
    # the pool's 4 units stay (2 current, 2 draining before)
    assert (pool["current_units"], pool["billed_units"], pool["draining_units"]) == (4, 4, 0)
    (warning,) = [w for w in document["warnings"] if "drains in progress" in w]
    assert warning.startswith("drains in progress not read: the kubeconfig's current context 'dev' (cluster ")
    assert f"is GKE cluster {gke_api.project}/{gke_api.location}/other, not the cluster configured" in warning
    assert f"cloud.cluster={gke_api.cluster}" in warning and "kubectl config use-context" in warning
    assert "a100 are counted as staying" in warning
    assert kube_api.requests == []


def test_a_context_of_the_configured_cluster_is_read(
    prometheus: PrometheusServer,
    gke_api: FakeGkeApi,
    kube_api: FakeKubeApi,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _other_cluster_draining(gke_api, kube_api)  # the same nodes, now reached through the configured cluster's name
    _kubeconfig(tmp_path, monkeypatch, f"gke_{gke_api.project}_{gke_api.location}_{gke_api.cluster}", kube_api.url)

    document = _recommend(_config(tmp_path, prometheus, gke_api, None), tmp_path / "out")

    (pool,) = document["pools"]
    assert (pool["current_units"], pool["draining_units"]) == (2, 2)
    assert [w for w in document["warnings"] if "drains in progress" in w] == []


def test_a_context_whose_name_says_no_cluster_is_read_and_told(
    prometheus: PrometheusServer,
    gke_api: FakeGkeApi,
    kube_api: FakeKubeApi,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _other_cluster_draining(gke_api, kube_api)
    _kubeconfig(tmp_path, monkeypatch, "lab", kube_api.url)

    document = _recommend(_config(tmp_path, prometheus, gke_api, None), tmp_path / "out")

    (pool,) = document["pools"]
    assert (pool["current_units"], pool["draining_units"]) == (2, 2)
    (warning,) = [w for w in document["warnings"] if "drains in progress" in w]
    assert warning.startswith(
        f"drains in progress read through the kubeconfig's current context 'dev' (cluster 'lab', server {kube_api.url})"
    )
    assert f"cloud.cluster={gke_api.cluster}" in warning and "daemon.kubernetes.api_url" in warning

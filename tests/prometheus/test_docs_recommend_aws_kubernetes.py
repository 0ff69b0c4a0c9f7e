"""What docs/aws.md says ``leadtime recommend`` needs of Kubernetes on AWS: it lists nodes and pods, cluster-wide,
which the ClusterRole ``leadtime-read`` of ``deploy/base/rbac-read.yaml`` grants; without an API it still writes the
report, with the warning the page quotes. The AWS pools are read from the fake AWS API (the hybrid example's groups,
``test_recommend_aws_pools``'s fixtures), the nodes from the fake Kubernetes API, with the real clients.

docs/aws.md said recommend read the AWS pools "through the same adapters and the same read calls" and named no
Kubernetes access; an AWS-only configuration without one warned "drains in progress not read: cannot reach a
Kubernetes API ..." where the page said nothing of it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.fakes import kube_objects as objs
from tests.fakes.aws_api import FakeAwsApi
from tests.fakes.kube_api import FakeKubeApi
from tests.prometheus.server import PrometheusServer
from tests.prometheus.test_recommend_aws_pools import _config, _recommend, aws  # noqa: F401 (fixture)

pytestmark = pytest.mark.xdist_group("prometheus")
ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "aws.md"
RBAC = ROOT / "deploy" / "base" / "rbac-read.yaml"


def _granted(role: str) -> set[tuple[str, str]]:
    """``(verb, resource)`` of the core API group that the ClusterRole ``role`` of deploy/base/rbac-read.yaml grants."""
    (found,) = [
        d for d in yaml.safe_load_all(RBAC.read_text()) if d["kind"] == "ClusterRole" and d["metadata"]["name"] == role
    ]
    return {
        (v, r) for rule in found["rules"] if rule["apiGroups"] == [""] for r in rule["resources"] for v in rule["verbs"]
    }


def test_the_calls_recommend_makes_are_the_ones_the_page_names_and_leadtime_read_grants(
    prometheus: PrometheusServer,
    aws: FakeAwsApi,  # noqa: F811
    kube_api: FakeKubeApi,
    tmp_path: Path,
) -> None:
    # a node of the on-demand node group, by the label EKS gives its nodes: its idle read lists the pods
    kube_api.put("nodes", objs.node("ip-10-0-0-1", "-", labels={"eks.amazonaws.com/nodegroup": "p4d-on-demand"}))
    config = _config(tmp_path, prometheus, aws, None)
    document = yaml.safe_load(config.read_text())
    document["daemon"] = {**document.get("daemon", {}), "kubernetes": {"api_url": kube_api.url}}
    config.write_text(yaml.safe_dump(document))

    report = _recommend(config, tmp_path / "out")

    assert [w for w in report["warnings"] if "drains in progress" in w] == []
    calls = {(r.verb, r.resource) for r in kube_api.requests}
    assert {r.namespace for r in kube_api.requests} == {""}  # cluster-wide
    assert calls == {("list", "nodes"), ("list", "pods")} <= _granted("leadtime-read")
    page = " ".join(PAGE.read_text().split())
    assert "`list` on `nodes` and `pods`, cluster-wide" in page
    assert "the ClusterRole `leadtime-read` of `deploy/base/rbac-read.yaml`" in page
    assert "`daemon.kubernetes.api_url` when set" in page


def test_without_an_api_the_report_is_written_with_the_warning_the_page_quotes(
    prometheus: PrometheusServer,
    aws: FakeAwsApi,  # noqa: F811
    tmp_path: Path,
) -> None:
    report = _recommend(_config(tmp_path, prometheus, aws, None), tmp_path / "out")  # the suite's kubeconfig is missing

    (warning,) = [w for w in report["warnings"] if "drains in progress" in w]
    quoted = "drains in progress not read: "
    assert warning.startswith(quoted + "cannot reach a Kubernetes API")
    assert f"`{quoted}...`" in PAGE.read_text()
    assert "counted as staying" in warning and "counted as staying" in " ".join(PAGE.read_text().split())

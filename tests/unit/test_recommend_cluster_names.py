"""The kubeconfig cluster names ``leadtime recommend`` reads a cluster from (``agent.commands.recommend_cluster``): as
gcloud (``gke_PROJECT_LOCATION_CLUSTER``), ``aws eks update-kubeconfig`` (the cluster's ARN) and eksctl
(``NAME.REGION.eksctl.io``) write them, checked against the hybrid example's ``cloud`` (example-project, us-central1,
ml-tpu) and ``aws`` (us-east-1, ml-gpu) sections."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.commands.recommend_cluster import is_configured, named_cluster
from config import load_settings

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "examples" / "hybrid-aws-gke.yaml"


@pytest.mark.parametrize(
    ("entry", "named", "ours"),
    [
        ("gke_example-project_us-central1_ml-tpu", ("gke", "example-project/us-central1/ml-tpu"), True),
        ("gke_example-project_us-central1_ml_tpu_b", ("gke", "example-project/us-central1/ml_tpu_b"), False),
        ("gke_other-project_us-central1_ml-tpu", ("gke", "other-project/us-central1/ml-tpu"), False),
        ("arn:aws:eks:us-east-1:123456789012:cluster/ml-gpu", ("eks", "us-east-1/ml-gpu"), True),
        ("arn:aws:eks:us-west-2:123456789012:cluster/ml-gpu", ("eks", "us-west-2/ml-gpu"), False),
        ("ml-gpu.us-east-1.eksctl.io", ("eks", "us-east-1/ml-gpu"), True),
        ("staging.us-east-1.eksctl.io", ("eks", "us-east-1/staging"), False),
        ("kind-dev", None, False),
    ],
)
def test_names(entry: str, named: tuple[str, str] | None, ours: bool) -> None:
    assert named_cluster(entry) == named
    assert (named is not None and is_configured(*named, load_settings(EXAMPLE))) is ours

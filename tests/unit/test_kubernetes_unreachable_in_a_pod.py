"""In a pod that finds no service account token, the advice for an unreachable Kubernetes API is the pod's token,
as the shipped manifests mount it: not a kubeconfig (never read in a pod), not 'run in a pod' (it is), and leader
election off only together with what a pod needs for it to be accepted (LEADTIME_SINGLE_REPLICA=true, one replica
replaced by Recreate)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.daemon.live_settings import SINGLE_REPLICA_ENV, check_live_settings
from config.daemon import KubernetesApiSettings
from config.loader import settings_from_mapping
from kube.connect import KubernetesNeeds, kubernetes_api_client
from models import ConfigError, KubernetesUnconfigured

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "config" / "examples" / "hybrid-aws-gke.yaml"
POD = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
ELECTION_OFF = "daemon.leader_election.enabled: false"


@pytest.fixture
def pod(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A pod's environment with no token mounted (the in-cluster loader reads os.environ and the token file)."""
    assert not Path("/var/run/secrets/kubernetes.io/serviceaccount/token").exists()
    for key, value in POD.items():
        monkeypatch.setenv(key, value)
    return dict(POD)


def _said(environ: dict[str, str], needs: KubernetesNeeds) -> str:
    with pytest.raises(KubernetesUnconfigured) as caught:
        kubernetes_api_client(KubernetesApiSettings(), environ, needs)
    return str(caught.value)


def _pod_spec() -> dict[str, Any]:
    deployment = yaml.safe_load((ROOT / "deploy" / "base" / "deployment.yaml").read_text())
    return dict(deployment["spec"]["template"]["spec"])


def test_in_a_pod_the_advice_is_the_service_account_token_as_the_manifests_mount_it(pod: dict[str, str]) -> None:
    said = _said(pod, KubernetesNeeds(drained_pools=("a100-spot",)))
    spec = _pod_spec()
    assert "no service account token" in said
    assert f"serviceAccountName: {spec['serviceAccountName']}" in said
    assert spec["automountServiceAccountToken"] is True and "automountServiceAccountToken: true" in said
    assert "kubeconfig" not in said.lower()
    assert "run in a pod" not in said
    assert "leader election" not in said and ELECTION_OFF not in said
    assert "to drain the idle nodes of pools a100-spot" in said


def test_in_a_pod_election_off_is_offered_only_with_what_a_pod_needs_for_it(pod: dict[str, str]) -> None:
    said = _said(pod, KubernetesNeeds(leader_election=True))
    assert "for a single local replica" not in said
    offer = f"set {ELECTION_OFF} together with {SINGLE_REPLICA_ENV}=true in the pod, replicas: 1 and strategy Recreate"
    assert offer in said
    # The offer is what the daemon accepts in a pod, and election off alone is what it refuses.
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["prometheus"] = {"url": "http://127.0.0.1:9"}
    raw["daemon"] = {"leader_election": {"enabled": False}}
    settings = settings_from_mapping(raw, "daemon.yaml")
    check_live_settings(settings, "daemon.yaml", {**pod, SINGLE_REPLICA_ENV: "true"})
    with pytest.raises(ConfigError, match=r"leader_election\.enabled"):
        check_live_settings(settings, "daemon.yaml", pod)


def test_in_a_pod_with_drains_election_off_is_said_not_to_be_enough(pod: dict[str, str]) -> None:
    said = _said(pod, KubernetesNeeds(leader_election=True, drained_pools=("a100-spot",)))
    assert f"with {ELECTION_OFF} the agent would still need it to drain a100-spot" in said
    assert SINGLE_REPLICA_ENV not in said
    assert "kubeconfig" not in said.lower()

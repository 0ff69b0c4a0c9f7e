"""When no Kubernetes API can be reached, the error says what the API is needed for and only advice that helps:
turning leader election off is offered only when election is why it is needed, and pools drained through the API
are named with what to do about them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agent.cli import main
from config.daemon import KubernetesApiSettings
from kube.connect import KubernetesNeeds, kubernetes_api_client
from models import KubernetesUnconfigured

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "examples" / "hybrid-aws-gke.yaml"
ELECTION_OFF = "daemon.leader_election.enabled: false"
CONNECT = ("daemon.kubernetes.api_url", "kubeconfig", "run in a pod")


@pytest.fixture
def nowhere(tmp_path: Path) -> dict[str, str]:
    """Not in a pod, and a kubeconfig that does not exist."""
    return {"KUBECONFIG": str(tmp_path / "no-kubeconfig")}


def _unreachable(environ: dict[str, str], needs: KubernetesNeeds) -> str:
    with pytest.raises(KubernetesUnconfigured) as caught:
        kubernetes_api_client(KubernetesApiSettings(), environ, needs)
    return str(caught.value)


def test_drains_alone_name_the_pools_and_never_advise_turning_election_off(nowhere: dict[str, str]) -> None:
    said = _unreachable(nowhere, KubernetesNeeds(drained_pools=("a100-spot", "v5e-slices")))
    assert ELECTION_OFF not in said
    assert "leader election" not in said
    assert "to drain the idle nodes of pools a100-spot, v5e-slices before they shrink" in said
    assert all(way in said for way in CONNECT)
    assert "leadtime run --replay TRACE" in said


def test_election_alone_offers_turning_it_off_for_a_single_local_replica(nowhere: dict[str, str]) -> None:
    said = _unreachable(nowhere, KubernetesNeeds(leader_election=True))
    assert "needed for leader election" in said
    assert f"or set {ELECTION_OFF} for a single local replica" in said
    assert "drain" not in said
    assert all(way in said for way in CONNECT)


def test_election_and_drains_say_that_turning_election_off_is_not_enough(nowhere: dict[str, str]) -> None:
    said = _unreachable(nowhere, KubernetesNeeds(leader_election=True, drained_pools=("a100-spot",)))
    assert "needed for leader election (daemon.leader_election.enabled: true) and to drain" in said
    assert f"or set {ELECTION_OFF} for a single local replica" not in said
    assert "would still need it to drain a100-spot" in said
    assert f"leadtime run --replay TRACE with {ELECTION_OFF}" in said


def test_run_with_election_off_names_the_drained_pools(
    tmp_path: Path, nowhere: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The hybrid example's AWS and GKE pools shrink by drains; election is already off, so it is not the advice."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("LEADTIME_SLACK_WEBHOOK_URL", raising=False)
    monkeypatch.setenv("KUBECONFIG", nowhere["KUBECONFIG"])
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["prometheus"] = {"url": "http://127.0.0.1:9"}
    raw["daemon"] = {"leader_election": {"enabled": False}}
    config = tmp_path / "daemon.yaml"
    config.write_text(yaml.safe_dump(raw))
    assert main(["run", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("leadtime: cannot reach a Kubernetes API")
    assert ELECTION_OFF not in err
    assert "to drain the idle nodes of pools aws-p4d-spot, aws-p4d-on-demand, gke-v5e-slices before they shrink" in err

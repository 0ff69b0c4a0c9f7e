"""``validate-config --for run`` on a workstation (docs/install.md step 3) notes that leader election off is refused
in a pod: the shipped Deployment runs 2 replicas without LEADTIME_SINGLE_REPLICA, so a file that passed the check
put the pod in CrashLoopBackOff. A note on stderr, not a failure: the same file is right for a local replica."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from agent.daemon.live_settings import SINGLE_REPLICA_ENV, check_live_settings
from config import load_settings
from models import ConfigError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "config" / "examples" / "hybrid-aws-gke.yaml"
POD = {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}


def _config(tmp_path: Path, election: bool) -> Path:
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["prometheus"] = {"url": "http://127.0.0.1:9"}
    raw["daemon"] = {"leader_election": {"enabled": election}}
    config = tmp_path / "my-config.yaml"
    config.write_text(yaml.safe_dump(raw))
    return config


def _shipped_pod_environment() -> tuple[int, dict[str, str]]:
    deployment: dict[str, Any] = yaml.safe_load((ROOT / "deploy" / "base" / "deployment.yaml").read_text())
    [container] = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "leadtime"]
    env = {e["name"]: str(e.get("value", "")) for e in container.get("env", [])}
    return int(deployment["spec"]["replicas"]), {**env, **POD}


@pytest.fixture(autouse=True)
def workstation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv(SINGLE_REPLICA_ENV, raising=False)
    monkeypatch.delenv("LEADTIME_SLACK_WEBHOOK_URL", raising=False)


def test_election_off_passes_on_a_workstation_with_the_rule_of_the_pod(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, election=False)
    assert main(["validate-config", "--for", "run", str(config)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"{config}: ok for run")
    assert "daemon.leader_election.enabled is false" in err
    assert f"refused in a Kubernetes pod unless the pod sets {SINGLE_REPLICA_ENV}=true" in err
    assert "the shipped Deployment runs 2 replicas" in err
    # What the note says of the pod: the shipped Deployment's pod refuses the same file.
    replicas, pod = _shipped_pod_environment()
    assert replicas == 2 and SINGLE_REPLICA_ENV not in pod
    with pytest.raises(ConfigError, match=SINGLE_REPLICA_ENV):
        check_live_settings(load_settings(config), str(config), pod)


def test_no_note_with_election_on_or_in_a_pod_that_declares_one_replica(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["validate-config", "--for", "run", str(_config(tmp_path, election=True))]) == 0
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", POD["KUBERNETES_SERVICE_HOST"])
    monkeypatch.setenv(SINGLE_REPLICA_ENV, "true")
    assert main(["validate-config", "--for", "run", str(_config(tmp_path, election=False))]) == 0
    assert capsys.readouterr().err == ""

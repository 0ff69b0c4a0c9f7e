"""A rehearsal (``leadtime run --replay``) in a pod that finds no service account token needs the Kubernetes API
only for leader election, and a pod may run one with election off: the advice is election off alone, not
LEADTIME_SINGLE_REPLICA=true and a change of the Deployment, which only a live run in a pod needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from agent.daemon.live_settings import SINGLE_REPLICA_ENV

ROOT = Path(__file__).resolve().parents[2]
LEADTIME = Path(sys.executable).parent / "leadtime"
TRACE = ROOT / "data" / "helios-earth" / "demand_5min.csv.gz"
POD = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
ELECTION_OFF = "daemon.leader_election.enabled: false"


def _run(tmp_path: Path, *replay: str) -> subprocess.CompletedProcess[str]:
    """``leadtime run`` with leader election on (the default), in a pod's environment with no token mounted."""
    assert not Path("/var/run/secrets/kubernetes.io/serviceaccount/token").exists()
    settings = yaml.safe_load((ROOT / "config/examples/helios-earth.yaml").read_text())
    settings["forecast"] = {"model": "last-value"}
    settings["daemon"] = {"endpoints": {"bind_address": "127.0.0.1", "port": 9}}
    config = tmp_path / "leadtime.yaml"
    config.write_text(json.dumps(settings))
    environ = {k: v for k, v in os.environ.items() if k != SINGLE_REPLICA_ENV} | POD
    command = [str(LEADTIME), "run", "--config", str(config), *replay]
    return subprocess.run(command, env=environ, capture_output=True, text=True, timeout=120, check=False)


def test_a_rehearsal_in_a_pod_without_a_token_is_told_to_turn_election_off_only(tmp_path: Path) -> None:
    done = _run(tmp_path, "--replay", str(TRACE))
    assert done.returncode == 2, done.stderr
    said = " ".join(done.stderr.split())
    assert "for leader election" in said and "no service account token" in said
    assert f"or set {ELECTION_OFF}: a rehearsal (run --replay) acts on no cluster and needs no election" in said
    assert SINGLE_REPLICA_ENV not in said
    assert "Deployment" not in said and "replicas: 1" not in said

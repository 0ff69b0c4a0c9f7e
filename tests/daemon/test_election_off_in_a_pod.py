"""Leader election off in a Kubernetes pod is refused by ``leadtime run`` and ``validate-config --for run`` (exit
2, naming daemon.leader_election.enabled): nothing else stops two replicas from both planning and resizing the same
pools. Outside a pod (a local run) it is accepted, and so is one replica whose pod says so explicitly
(LEADTIME_SINGLE_REPLICA=true)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agent.cli import main

IN_A_POD = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}


def _config(tmp_path: Path, election: bool) -> Path:
    pool = {"id": "west", "kind": "on-prem", "chips_per_unit": 8, "min_units": 2, "max_units": 2,
            "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": ["train"]}  # fmt: skip
    body = {
        "demand_classes": [{"name": "train"}],
        "pools": [pool],
        "prometheus": {"url": "http://127.0.0.1:9"},
        "ledger": {"path": str(tmp_path / "ledger.sqlite")},
        "daemon": {"leader_election": {"enabled": election}},
    }
    path = tmp_path / "leadtime.yaml"
    path.write_text(yaml.safe_dump(body), encoding="utf-8")
    return path


def _in_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in IN_A_POD.items():
        monkeypatch.setenv(name, value)


def test_validate_for_run_refuses_election_off_in_a_pod(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _in_a_pod(monkeypatch)
    monkeypatch.delenv("LEADTIME_SINGLE_REPLICA", raising=False)
    assert main(["validate-config", str(_config(tmp_path, election=False)), "--for", "run"]) == 2
    err = capsys.readouterr().err
    assert "daemon.leader_election.enabled: leader election is off, and this runs in a Kubernetes pod" in err
    assert "Set daemon.leader_election.enabled: true" in err
    assert "replicas: 1 and strategy Recreate" in err and "LEADTIME_SINGLE_REPLICA=true" in err


@pytest.mark.parametrize("declared", ["", "false", "no"])
def test_anything_but_an_explicit_single_replica_is_refused(
    declared: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _in_a_pod(monkeypatch)
    monkeypatch.setenv("LEADTIME_SINGLE_REPLICA", declared)
    assert main(["validate-config", str(_config(tmp_path, election=False)), "--for", "run"]) == 2
    assert "daemon.leader_election.enabled" in capsys.readouterr().err


@pytest.mark.parametrize("declared", ["true", "True", "1"])
def test_one_replica_declared_in_the_pod_passes(
    declared: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _in_a_pod(monkeypatch)
    monkeypatch.setenv("LEADTIME_SINGLE_REPLICA", declared)
    assert main(["validate-config", str(_config(tmp_path, election=False)), "--for", "run"]) == 0
    assert "ok for run" in capsys.readouterr().out


def test_election_on_in_a_pod_and_off_outside_one_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("LEADTIME_SINGLE_REPLICA", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(["validate-config", str(_config(tmp_path, election=False)), "--for", "run"]) == 0
    assert "LEADTIME_SINGLE_REPLICA=true" in capsys.readouterr().err  # passes, with a note on what a pod needs
    _in_a_pod(monkeypatch)
    assert main(["validate-config", str(_config(tmp_path, election=True)), "--for", "run"]) == 0
    assert main(["validate-config", str(_config(tmp_path, election=False))]) == 0  # only run is refused
    assert capsys.readouterr().err == ""


def test_run_stops_before_connecting(tmp_path: Path) -> None:
    """The daemon itself refuses at start, before it opens its ledger or serves anything."""
    env = {k: v for k, v in os.environ.items() if k != "LEADTIME_SINGLE_REPLICA"} | IN_A_POD
    done = subprocess.run(
        [sys.executable, "-m", "agent.cli", "run", "--config", str(_config(tmp_path, election=False))],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "daemon.leader_election.enabled: leader election is off" in done.stderr
    assert not (tmp_path / "ledger.sqlite").exists()

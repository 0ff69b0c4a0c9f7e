"""``leadtime run`` refuses a configuration with every problem ``validate-config --for run`` tells, in the same
lines: a webhook variable without a URL is no longer told alone, leaving a missing prometheus section for the next
restart of a pod in CrashLoopBackOff."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agent.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "examples" / "hybrid-aws-gke.yaml"


@pytest.mark.parametrize("webhook_file", [False, True], ids=["variable", "file"])
def test_run_tells_every_problem_validate_config_tells(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], webhook_file: bool
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("LEADTIME_SLACK_WEBHOOK_URL", "not-a-url")
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["daemon"] = {"leader_election": {"enabled": False}, "kubernetes": {"api_url": "http://127.0.0.1:9"}}
    if webhook_file:
        raw["alerts"] = {"slack_webhook_url_file": str(tmp_path / "not-mounted")}
    config = tmp_path / "daemon.yaml"
    config.write_text(yaml.safe_dump(raw))  # no prometheus section, and a webhook that cannot be used
    assert main(["validate-config", "--for", "run", str(config)]) == 2
    told = capsys.readouterr().err
    key = "alerts.slack_webhook_url_file" if webhook_file else "alerts.slack_webhook_url_env"
    assert "prometheus:" in told and f"{key}:" in told
    assert main(["run", "--config", str(config)]) == 2
    assert capsys.readouterr().err == told

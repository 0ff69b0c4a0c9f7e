"""``validate-config --for run`` checks the Slack webhook source as ``leadtime run`` reads it: a missing
``alerts.slack_webhook_url_file`` or an environment variable without an http(s) URL is refused by both, with the
same message naming the configuration file and the key, and never the secret."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agent.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "examples" / "hybrid-aws-gke.yaml"
ENV = "LEADTIME_SLACK_WEBHOOK_URL"
SECRET_PATH = "T0LEAD/B0TIME/s3cr3tw3bh00k"


def _daemon_config(tmp_path: Path, alerts: dict[str, str] | None = None) -> Path:
    """The hybrid example with what a live daemon needs; nothing listens on port 9, so nothing is reached."""
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["prometheus"] = {"url": "http://127.0.0.1:9"}
    raw["daemon"] = {"leader_election": {"enabled": False}, "kubernetes": {"api_url": "http://127.0.0.1:9"}}
    if alerts is not None:
        raw["alerts"] = alerts
    path = tmp_path / "daemon.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.fixture(autouse=True)
def _not_in_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv(ENV, raising=False)


def _refused_alike(config: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """validate-config --for run and run both exit 2 with the same message; the message."""
    capsys.readouterr()
    assert main(["validate-config", "--for", "run", str(config)]) == 2
    said = capsys.readouterr()
    assert "ok for run" not in said.out
    assert main(["run", "--config", str(config)]) == 2
    assert capsys.readouterr().err == said.err
    return said.err


def test_a_missing_webhook_file_is_refused_for_run_naming_the_file_and_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    absent = tmp_path / "slack" / "webhook-url"
    config = _daemon_config(tmp_path, {"slack_webhook_url_file": str(absent)})
    err = _refused_alike(config, capsys)
    assert err.startswith(f"leadtime: invalid configuration {config}:\n")
    assert f"alerts.slack_webhook_url_file: cannot read the webhook URL file {absent}" in err


def test_a_webhook_variable_without_a_scheme_is_refused_for_run_without_quoting_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, f"hooks.slack.com/services/{SECRET_PATH}")
    config = _daemon_config(tmp_path)
    err = _refused_alike(config, capsys)
    assert err.startswith(f"leadtime: invalid configuration {config}:\n")
    assert f"alerts.slack_webhook_url_env: the environment variable {ENV} does not hold an http(s) webhook URL" in err
    assert [piece for piece in SECRET_PATH.split("/") if piece in err] == []


def test_every_problem_for_run_is_told_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A missing prometheus section and a bad webhook variable: one run of the check names both."""
    monkeypatch.setenv(ENV, "not-a-url")
    raw = yaml.safe_load(_daemon_config(tmp_path).read_text())
    del raw["prometheus"]
    config = tmp_path / "two-problems.yaml"
    config.write_text(yaml.safe_dump(raw))
    assert main(["validate-config", "--for", "run", str(config)]) == 2
    err = capsys.readouterr().err
    assert "  - prometheus: leadtime run reads demand from Prometheus" in err
    assert "  - alerts.slack_webhook_url_env:" in err


@pytest.mark.parametrize("where", ["file", "environment"])
def test_a_readable_webhook_url_passes_for_run(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"https://hooks.slack.com/services/{SECRET_PATH}"
    alerts: dict[str, str] | None = None
    if where == "file":
        mounted = tmp_path / "webhook-url"
        mounted.write_text(url + "\n")
        alerts = {"slack_webhook_url_file": str(mounted)}
    else:
        monkeypatch.setenv(ENV, url)
    config = _daemon_config(tmp_path, alerts)
    assert main(["validate-config", "--for", "run", str(config)]) == 0
    assert "ok for run" in capsys.readouterr().out


def test_the_webhook_is_not_checked_without_for_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """simulate, backtest and recommend send no alert to Slack: a file mounted only in the cluster is fine there."""
    config = _daemon_config(tmp_path, {"slack_webhook_url_file": str(tmp_path / "absent")})
    assert main(["validate-config", str(config)]) == 0
    assert main(["validate-config", "--for", "recommend", str(config)]) == 0

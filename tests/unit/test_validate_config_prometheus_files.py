"""``validate-config --for run`` and ``--for recommend`` read the files Prometheus is queried with as its client
reads them: a bearer token file or (for an https URL) a CA file that cannot be read is refused naming the key and
the file, by ``run`` too with the same lines, and a token is never quoted."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agent.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "examples" / "hybrid-aws-gke.yaml"
TOKEN = "s3cr3t-pr0m-t0ken"


@pytest.fixture(autouse=True)
def _not_in_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("LEADTIME_SLACK_WEBHOOK_URL", raising=False)


def _daemon_config(tmp_path: Path, prometheus: dict[str, str]) -> Path:
    """The hybrid example with what a live daemon needs; nothing listens on port 9, so nothing is reached."""
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["prometheus"] = {"url": "http://127.0.0.1:9", **prometheus}
    raw["daemon"] = {"leader_election": {"enabled": False}, "kubernetes": {"api_url": "http://127.0.0.1:9"}}
    path = tmp_path / "daemon.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _refused(config: Path, purpose: str, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["validate-config", "--for", purpose, str(config)]) == 2
    said = capsys.readouterr()
    assert "ok for" not in said.out
    assert said.err.startswith(f"leadtime: invalid configuration {config}:\n")
    if purpose == "run":
        assert main(["run", "--config", str(config)]) == 2
        assert capsys.readouterr().err == said.err
    return said.err


@pytest.mark.parametrize("purpose", ["run", "recommend"])
def test_a_missing_bearer_token_file_is_refused_naming_the_key_and_the_file(
    purpose: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    absent = tmp_path / "token" / "prometheus"
    err = _refused(_daemon_config(tmp_path, {"bearer_token_file": str(absent)}), purpose, capsys)
    assert f"  - prometheus.bearer_token_file: cannot read the bearer token file {absent}: FileNotFoundError" in err


def test_an_empty_bearer_token_file_is_refused_as_the_client_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "token"
    empty.write_text("\n")
    err = _refused(_daemon_config(tmp_path, {"bearer_token_file": str(empty)}), "run", capsys)
    assert f"  - prometheus.bearer_token_file: the bearer token file {empty} is empty;" in err


@pytest.mark.parametrize("purpose", ["run", "recommend"])
def test_a_missing_ca_file_of_an_https_prometheus_is_refused(
    purpose: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    absent = tmp_path / "ca" / "bundle.pem"
    config = _daemon_config(tmp_path, {"url": "https://127.0.0.1:9", "ca_file": str(absent)})
    err = _refused(config, purpose, capsys)
    assert f"  - prometheus.ca_file: cannot read the CA file {absent}: FileNotFoundError" in err


@pytest.mark.parametrize("purpose", ["run", "recommend"])
def test_readable_files_pass_and_the_token_is_not_quoted(
    purpose: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token, bundle = tmp_path / "token", tmp_path / "bundle.pem"
    token.write_text(TOKEN + "\n")
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    config = _daemon_config(
        tmp_path, {"url": "https://127.0.0.1:9", "bearer_token_file": str(token), "ca_file": str(bundle)}
    )
    assert main(["validate-config", "--for", purpose, str(config)]) == 0
    said = capsys.readouterr()
    assert f"ok for {purpose}" in said.out
    assert TOKEN not in said.out + said.err


def test_the_files_are_not_read_without_a_command_that_queries_prometheus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """simulate and the plain check query no Prometheus: a file mounted only in the cluster is fine there; nor is
    the CA file of an http URL ever used."""
    absent = str(tmp_path / "absent")
    config = _daemon_config(tmp_path, {"bearer_token_file": absent})
    assert main(["validate-config", str(config)]) == 0
    assert main(["validate-config", "--for", "simulate", str(config)]) == 0
    http_ca = _daemon_config(tmp_path, {"ca_file": absent})
    assert main(["validate-config", "--for", "run", str(http_ca)]) == 0
    assert "ok for run" in capsys.readouterr().out

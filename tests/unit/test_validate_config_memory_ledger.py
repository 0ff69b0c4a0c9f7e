"""A memory ledger keeps no spend across restarts: with a budget, ``leadtime run`` and ``validate-config --for
run`` refuse it alike (the cap would start over at every restart); without budgets, and for the commands that
start from nothing anyway, it is accepted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "examples" / "hybrid-aws-gke.yaml"
BUDGET = {"name": "gpu-month", "pools": ["aws-p4d-on-demand"], "monthly_cap_usd": 5000}


@pytest.fixture(autouse=True)
def _not_in_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("LEADTIME_SLACK_WEBHOOK_URL", raising=False)


def _daemon_config(tmp_path: Path, backend: str, budgets: list[dict[str, Any]]) -> Path:
    """The hybrid example with what a live daemon needs; nothing listens on port 9, so nothing is reached."""
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["prometheus"] = {"url": "http://127.0.0.1:9"}
    raw["daemon"] = {"leader_election": {"enabled": False}, "kubernetes": {"api_url": "http://127.0.0.1:9"}}
    raw["ledger"] = {"backend": backend, "path": str(tmp_path / "ledger.sqlite")}
    raw["budgets"] = budgets
    path = tmp_path / "daemon.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_a_memory_ledger_with_a_budget_is_refused_for_run_as_run_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _daemon_config(tmp_path, "memory", [BUDGET])
    assert main(["validate-config", "--for", "run", str(config)]) == 2
    said = capsys.readouterr()
    assert "ok for run" not in said.out
    assert said.err.startswith(f"leadtime: invalid configuration {config}:\n")
    assert (
        "  - ledger.backend: memory keeps no spend across restarts: a budget's cap would start over at every "
        "restart (budgets: gpu-month); use sqlite or postgresql" in said.err
    )
    assert main(["run", "--config", str(config)]) == 2
    assert capsys.readouterr().err == said.err


@pytest.mark.parametrize(("backend", "budgets"), [("memory", []), ("sqlite", [BUDGET])])
def test_a_memory_ledger_without_budgets_or_a_sqlite_one_with_them_passes_for_run(
    backend: str, budgets: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _daemon_config(tmp_path, backend, budgets)
    assert main(["validate-config", "--for", "run", str(config)]) == 0
    assert "ok for run" in capsys.readouterr().out


@pytest.mark.parametrize("purpose", ["any", "simulate", "recommend"])
def test_a_memory_ledger_with_a_budget_is_accepted_where_nothing_restarts(
    purpose: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _daemon_config(tmp_path, "memory", [BUDGET])
    assert main(["validate-config", "--for", purpose, str(config)]) == 0
    assert "ok" in capsys.readouterr().out

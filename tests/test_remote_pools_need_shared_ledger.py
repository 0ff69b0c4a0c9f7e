"""A budget's ``remote_pools`` are counted from the ledger the other agents write, which only a PostgreSQL ledger
is: with a SQLite file or memory no other agent records their spend, the shared cap would count it as 0 USD and
this agent spend what they already have. ``leadtime run`` (and ``validate-config --for run``) refuses the file,
naming ``budgets[i].remote_pools`` and what to do; commands that run no other agent (simulate, a rehearsal) or
change nothing (recommend) accept it, so ``validate-config`` without ``--for`` passes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main

SQLITE = {"backend": "sqlite"}
MEMORY = {"backend": "memory"}
POSTGRESQL = {"backend": "postgresql", "url": "postgresql://leadtime@127.0.0.1:5432/leadtime"}


def _config(tmp_path: Path, ledger: dict[str, Any]) -> Path:
    pool = {"id": "west", "kind": "on-prem", "chips_per_unit": 8, "min_units": 2, "max_units": 2,
            "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": ["train"]}  # fmt: skip
    body = {
        "demand_classes": [{"name": "train"}],
        "pools": [pool],
        "budgets": [
            {"name": "own", "pools": ["west"], "monthly_cap_usd": 1000},
            {"name": "team", "pools": ["west"], "remote_pools": ["east", "north"], "monthly_cap_usd": 38016},
        ],
        "prometheus": {"url": "http://127.0.0.1:9"},
        "ledger": {**ledger, "path": str(tmp_path / "ledger.sqlite")},
        "daemon": {"leader_election": {"enabled": False}},
    }
    path = tmp_path / "leadtime.yaml"
    path.write_text(yaml.safe_dump(body), encoding="utf-8")
    return path


@pytest.mark.parametrize(("ledger", "backend"), [(SQLITE, "sqlite"), (MEMORY, "memory")])
def test_run_refuses_remote_pools_on_a_ledger_no_other_agent_writes(
    ledger: dict[str, Any], backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _config(tmp_path, ledger)

    # --for run is the daemon's own check (check_live_settings), which leadtime run makes before connecting; run
    # itself is not started here, as without the check it would start a daemon that runs until signalled.
    assert main(["validate-config", str(cfg), "--for", "run"]) == 2

    err = capsys.readouterr().err
    assert "budgets[1].remote_pools: budget 'team' counts the spend of pools other agents run (east, north)" in err
    assert f"ledger.backend is {backend}, which no other agent writes" in err
    assert "Set ledger.backend: postgresql with the url of the ledger those agents write" in err
    assert "budgets[0]" not in err  # the budget without remote pools is not named
    assert not (tmp_path / "ledger.sqlite").exists()  # refused before any ledger was opened


@pytest.mark.parametrize("ledger", [SQLITE, MEMORY])
def test_without_run_the_file_passes(
    ledger: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _config(tmp_path, ledger)

    assert main(["validate-config", str(cfg)]) == 0
    assert main(["validate-config", str(cfg), "--for", "simulate"]) == 0
    assert main(["validate-config", str(cfg), "--for", "recommend"]) == 0
    assert "remote_pools" not in capsys.readouterr().err


def test_a_postgresql_ledger_passes_for_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _config(tmp_path, POSTGRESQL)

    assert main(["validate-config", str(cfg), "--for", "run"]) == 0
    assert "ok for run" in capsys.readouterr().out

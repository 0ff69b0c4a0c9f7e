"""Spend under an id no configured pool has, on a ledger an agent shares with others: when a budget of the agent
shares pools another agent runs (``remote_pools``), the id may be the old id of one of them, renamed there, and its
spend counts in the budget once ``budgets[].remote_previous_ids`` lists it. The warning at start and the
``leadtime ledger budgets`` report name that setting with the pool and the id; "nothing to do" is said only of spend
in none of the agent's budgets."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.budget_watch import BudgetWatch
from agent.cli import main
from agent.ledger.sqlite import SqliteLedger
from config import settings_from_mapping
from models import LedgerEntry

NOW = datetime(2024, 3, 15, 12, tzinfo=UTC)
OWN, REMOTE, OLD = "b-h100", "a100-prod", "a100"
POOL = {"id": OWN, "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 40, "lead_time": "10m",
        "serves": ["train"], "price_per_unit_hour_usd": 10.0}  # fmt: skip
ADVICE = f"budgets[].remote_previous_ids: {{{REMOTE}: [{OLD}]}}"


def _body(path: Path, **budget: Any) -> dict[str, Any]:
    return {
        "demand_classes": [{"name": "train"}],
        "pools": [POOL],
        "budgets": [{"name": "shared", "monthly_cap_usd": 150_000, "pools": [OWN], **budget}],
        "ledger": {"path": str(path)},
    }


def _ledger(path: Path) -> None:
    """98,650 USD under the other agent's pool's old id, before its rename, and 1,000 USD since."""
    with SqliteLedger(path, fresh_if_empty=True) as ledger:
        ledger.record(
            LedgerEntry(OLD, datetime(2024, 3, 1, tzinfo=UTC), datetime(2024, 3, 15, tzinfo=UTC), 10, 98_650.0)
        )
        ledger.record(LedgerEntry(REMOTE, datetime(2024, 3, 15, tzinfo=UTC), NOW, 10, 1_000.0))


def _warning(path: Path, body: dict[str, Any], caplog: pytest.LogCaptureFixture) -> str:
    settings = settings_from_mapping(body)
    caplog.set_level(logging.WARNING, logger="agent.ledger.meter")
    with SqliteLedger(path) as ledger:
        BudgetWatch(settings, {p.pool_id: p for p in settings.pool_specs()}, ledger, holder="east").spend(NOW)
    (warning,) = [r.getMessage() for r in caplog.records if "no configured pool has" in r.getMessage()]
    return warning


def _report(path: Path, body: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    config = tmp_path / "leadtime.yaml"
    config.write_text(yaml.safe_dump(body), encoding="utf-8")
    assert main(["ledger", "budgets", "--config", str(config), "--at", NOW.isoformat()]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("not counted:")]
    return line


def test_spend_a_remote_pool_may_have_had_names_remote_previous_ids(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ledger.sqlite"
    _ledger(path)
    body = _body(path, remote_pools=[REMOTE])

    for message in (_warning(path, body, caplog), _report(path, body, tmp_path, capsys)):
        assert f"{OLD} (98,650.00 USD)" in message
        assert ADVICE in message
        assert "budget shared" in message
        assert message.endswith("another deployment's in none of this agent's budgets: nothing to do")


def test_the_id_the_advice_names_counts_once_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ledger.sqlite"
    _ledger(path)
    config = tmp_path / "leadtime.yaml"
    config.write_text(
        yaml.safe_dump(_body(path, remote_pools=[REMOTE], remote_previous_ids={REMOTE: [OLD]})), encoding="utf-8"
    )

    assert main(["ledger", "budgets", "--config", str(config), "--at", NOW.isoformat()]) == 0

    lines = capsys.readouterr().out.splitlines()
    (row,) = [line.split() for line in lines if line.startswith("shared ")]
    assert float(row[-2]) == pytest.approx(99_650.0, abs=0.005)
    assert not [line for line in lines if line.startswith("not counted:")]


def test_several_remote_pools_are_named_as_the_pool_it_may_have_been(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ledger.sqlite"
    _ledger(path)

    warning = _warning(path, _body(path, remote_pools=[REMOTE, "c-v100"]), caplog)

    assert f"budgets[].remote_previous_ids: {{<pool>: [{OLD}]}}, <pool> the one of {REMOTE}, c-v100" in warning


def test_without_remote_pools_the_spend_is_in_none_of_the_budgets(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ledger.sqlite"
    _ledger(path)

    warning = _warning(path, _body(path), caplog)

    assert f"{OLD} (98,650.00 USD)" in warning and f"{REMOTE} (1,000.00 USD)" in warning
    assert "remote_previous_ids" not in warning
    assert warning.endswith("another deployment's in none of this agent's budgets: nothing to do")

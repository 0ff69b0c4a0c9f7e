"""``leadtime ledger budgets`` and ``import-billing`` on a SQLite ledger file, as an operator runs them: the budget
report's period in the budget's own dates, and the ledger file the configuration names (never a new one)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from agent.ledger.sqlite import SqliteLedger
from models import LedgerEntry

QUARTER = timedelta(minutes=15)
POOL = {"id": "a100", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 4, "price_per_chip_hour_usd": 3.0,
        "lead_time": "10m", "serves": ["c"]}  # fmt: skip


def _config(tmp_path: Path, budgets: list[dict[str, Any]], ledger: dict[str, Any]) -> Path:
    body = {"demand_classes": [{"name": "c"}], "pools": [POOL], "budgets": budgets, "ledger": ledger}
    path = tmp_path / "leadtime.yaml"
    path.write_text(yaml.safe_dump(body), encoding="utf-8")
    return path


def _report(out: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.startswith("in-")}


def test_each_budget_period_is_printed_in_the_budget_s_own_dates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 2026-02-28 16:00 UTC is 2026-03-01 01:00 in Tokyo (UTC+9) and 2026-02-28 11:00 in New York (UTC-5): the
    # entry is March spend for the Tokyo budget and February spend for the other two.
    path = tmp_path / "ledger.sqlite"
    at = datetime(2026, 2, 28, 16, tzinfo=UTC)
    with SqliteLedger(path) as ledger:
        ledger.record(LedgerEntry("a100", at, at + QUARTER, 1, 6.0))
    budgets = [
        {"name": f"in-{name}", "pools": ["a100"], "monthly_cap_usd": 1000, "timezone": zone}
        for name, zone in (("utc", "UTC"), ("tokyo", "Asia/Tokyo"), ("new-york", "America/New_York"))
    ]
    budgets.append(  # a period from the 15th: Tokyo's 2026-03-15 00:00 is 2026-03-14 15:00 UTC
        {"name": "in-tokyo-15th", "pools": ["a100"], "monthly_cap_usd": 1000, "timezone": "Asia/Tokyo",
         "period_start_day": 15}
    )  # fmt: skip
    cfg = _config(tmp_path, budgets, {"path": str(path)})

    assert main(["ledger", "budgets", "--config", str(cfg), "--at", "2026-03-02T06:00Z"]) == 0
    report = _report(capsys.readouterr().out)
    assert {name: (line[0], line[2]) for name, line in report.items()} == {
        "in-utc": ("2026-03-01..2026-04-01", "0.00"),
        "in-tokyo": ("2026-03-01..2026-04-01", "6.00"),
        "in-new-york": ("2026-03-01..2026-04-01", "0.00"),
        "in-tokyo-15th": ("2026-02-15..2026-03-15", "6.00"),
    }

    # 2026-03-01 03:00 UTC: still February in New York (22:00 on the 28th), March in Tokyo and UTC.
    assert main(["ledger", "budgets", "--config", str(cfg), "--at", "2026-03-01T03:00:00+00:00"]) == 0
    report = _report(capsys.readouterr().out)
    assert {name: (line[0], line[2]) for name, line in report.items()} == {
        "in-utc": ("2026-03-01..2026-04-01", "0.00"),
        "in-tokyo": ("2026-03-01..2026-04-01", "6.00"),
        "in-new-york": ("2026-02-01..2026-03-01", "6.00"),
        "in-tokyo-15th": ("2026-02-15..2026-03-15", "6.00"),
    }

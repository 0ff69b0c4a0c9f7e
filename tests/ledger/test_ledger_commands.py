"""``leadtime ledger budgets`` and ``import-billing`` on a SQLite ledger file, as an operator runs them: the budget
report's period in the budget's own dates, and the ledger file the configuration names (never a new one)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from agent.ledger.billed import BilledCost
from agent.ledger.sqlite import SqliteLedger
from models import LedgerEntry
from tests.ledger.billing_export_rig import A100_BILL, HOUR, T0, as_json, export_rows

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
    # an hourly cap alone: no month's spend to be complete (the daemon judges monthly caps only)
    budgets.append({"name": "in-tokyo-hourly", "pools": ["a100"], "hourly_cap_usd": 100, "timezone": "Asia/Tokyo"})
    cfg = _config(tmp_path, budgets, {"path": str(path)})

    assert main(["ledger", "budgets", "--config", str(cfg), "--at", "2026-03-02T06:00Z"]) == 0
    out = capsys.readouterr().out
    report = _report(out)
    # the ledger began on 2026-02-28 16:00 UTC: after Tokyo's March (15:00 UTC) and the period of the 15th began,
    # before the UTC and New York March periods
    late = [line for line in out.splitlines() if line.startswith("incomplete:")]
    assert [line.split()[2] for line in late] == ["in-tokyo's", "in-tokyo-15th's"]
    assert all("a100 (first record 2026-02-28 16:00 UTC)" in line for line in late)
    assert "2026-02-28 15:00 UTC" in late[0] and "2026-02-14 15:00 UTC" in late[1] and "import-billing" in late[1]
    assert {name: (line[0], line[2]) for name, line in report.items()} == {
        "in-utc": ("2026-03-01..2026-04-01", "0.00"),
        "in-tokyo": ("2026-03-01..2026-04-01", "6.00"),
        "in-new-york": ("2026-03-01..2026-04-01", "0.00"),
        "in-tokyo-15th": ("2026-02-15..2026-03-15", "6.00"),
        "in-tokyo-hourly": ("2026-03-01..2026-04-01", "6.00"),
    }

    # 2026-03-01 03:00 UTC: still February in New York (22:00 on the 28th), March in Tokyo and UTC.
    assert main(["ledger", "budgets", "--config", str(cfg), "--at", "2026-03-01T03:00:00+00:00"]) == 0
    report = _report(capsys.readouterr().out)
    assert {name: (line[0], line[2]) for name, line in report.items()} == {
        "in-utc": ("2026-03-01..2026-04-01", "0.00"),
        "in-tokyo": ("2026-03-01..2026-04-01", "6.00"),
        "in-new-york": ("2026-02-01..2026-03-01", "6.00"),
        "in-tokyo-15th": ("2026-02-15..2026-03-15", "6.00"),
        "in-tokyo-hourly": ("2026-03-01..2026-04-01", "6.00"),
    }


@pytest.mark.parametrize("relative", [False, True])
def test_import_billing_refuses_a_ledger_file_that_does_not_exist_and_creates_none(
    relative: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # From a workstation, the default relative ledger.path names a file in the working directory, not the
    # daemon's: the bill must not go into a new ledger there.
    monkeypatch.chdir(tmp_path)
    ledger: dict[str, Any] = {"billing": {"cluster": "prod", "pools": {"a100": "gpu-a100-pool"}}}
    missing = Path("leadtime-ledger.sqlite") if relative else tmp_path / "daemon" / "ledger.sqlite"
    if not relative:
        ledger["path"] = str(missing)
    budgets = [{"name": "in-utc", "pools": ["a100"], "monthly_cap_usd": 1000}]
    cfg = _config(tmp_path, budgets, ledger)
    export = tmp_path / "billing.json"
    export.write_text(as_json(export_rows()), encoding="utf-8")

    assert main(["ledger", "import-billing", "--config", str(cfg), str(export)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"ledger.path: there is no ledger file at {missing}" in captured.err
    assert str(missing.absolute()) in captured.err
    assert not missing.exists()
    assert not (tmp_path / "daemon").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["billing.json", "leadtime.yaml"]

    # Once the daemon's file exists there, the same import stores the bill in it.
    with SqliteLedger(missing) as daemon_ledger:
        daemon_ledger.record(LedgerEntry("a100", T0, T0 + QUARTER, 1, 6.0))
    assert main(["ledger", "import-billing", "--config", str(cfg), str(export)]) == 0
    assert "stored 4 billed interval(s)" in capsys.readouterr().out
    with SqliteLedger(missing, read_only=True) as daemon_ledger:
        assert daemon_ledger.billed(["a100"], T0, T0 + 4 * HOUR) == pytest.approx(4 * sum(A100_BILL))


def test_a_budget_is_incomplete_while_one_of_its_pools_has_no_early_record_and_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The GPU pool's bill was imported from the period's start; the TPU slice pool was recorded from the 20th only."""
    path = tmp_path / "ledger.sqlite"
    month, restart = datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 20, 9, tzinfo=UTC)
    with SqliteLedger(path) as ledger:
        ledger.record_many(
            [LedgerEntry("a100", restart, restart, 1, 0.0), LedgerEntry("v5e", restart, restart, 8, 0.0)]
        )
        ledger.record_billed([BilledCost("a100", month, restart, 1000.0)])
    slices = {**POOL, "id": "v5e"}
    body = {
        "demand_classes": [{"name": "c"}],
        "pools": [POOL, slices],
        "budgets": [{"name": "accel", "pools": ["a100", "v5e"], "monthly_cap_usd": 250_000}],
        "ledger": {"path": str(path)},
    }
    cfg = tmp_path / "leadtime.yaml"
    cfg.write_text(yaml.safe_dump(body), encoding="utf-8")

    assert main(["ledger", "budgets", "--config", str(cfg), "--at", "2026-03-20T10:00Z"]) == 0
    [late] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("incomplete:")]
    assert "budget accel's ledger holds these of its pools only from after its period started" in late
    assert "v5e (first record 2026-03-20 09:00 UTC)" in late
    assert "a100" not in late
    assert "cannot tell it from one whose records were lost" in late

"""``leadtime ledger import-billing`` leaves out the billed intervals not over at the import.

A row whose usage interval has not ended (today's row of a daily export, imported at noon) bills part of the
interval's usage; stored, its bill would replace the estimate of every entry the agent records in the interval,
those recorded after the import too, and that later spend would never be counted. The command takes its time
from its clock (a simulated one here), says on stderr which rows it left out, stores the rest, and stores the
interval once an import runs after it ends. The ledger is a real SQLite file, the export a file in the shape of
the Cloud Billing usage cost export (docs/billing-reconciliation.md).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from agent.cli import build_parser
from agent.commands.ledger import import_billing
from agent.ledger.billed import BilledCost
from agent.ledger.billing_export import Matched, not_over
from agent.ledger.sqlite import SqliteLedger
from models import LedgerEntry
from models.clock import SimulatedClock

DAY = datetime(2026, 3, 2, tzinfo=UTC)
QUARTER = timedelta(minutes=15)
UNIT_HOUR = 8.0  # 8 chips at 1 USD a chip-hour
YESTERDAY_BILL = 1800.0  # for 10 units all day, estimated at 1,920
MORNING_BILL = 960.0  # what the day's row billed by noon: 10 units from midnight


def _config(tmp_path: Path, ledger: Path) -> Path:
    pool = {"id": "a100", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 16,
            "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": ["train"]}  # fmt: skip
    body = {
        "demand_classes": [{"name": "train"}],
        "pools": [pool],
        "budgets": [{"name": "team", "pools": ["a100"], "monthly_cap_usd": 100_000}],
        "ledger": {"backend": "sqlite", "path": str(ledger)},
    }
    path = tmp_path / "leadtime.yaml"
    path.write_text(yaml.safe_dump(body), encoding="utf-8")
    return path


def _charge(ledger: Path, start: datetime, end: datetime, units: int) -> None:
    """Quarter-hour entries of ``units`` units, as the agent records them."""
    quarters = int((end - start) / QUARTER)
    with SqliteLedger(ledger) as opened:
        opened.record_many(
            [
                LedgerEntry("a100", start + i * QUARTER, start + (i + 1) * QUARTER, units, units * UNIT_HOUR / 4)
                for i in range(quarters)
            ]
        )


def _daily_row(day: datetime, cost: float) -> str:
    row = {
        "service": {"description": "Compute Engine"},
        "sku": {"description": "Nvidia Tesla A100 GPU"},
        "usage_start_time": f"{day:%Y-%m-%d %H:%M:%S} UTC",
        "usage_end_time": f"{day + timedelta(days=1):%Y-%m-%d %H:%M:%S} UTC",
        "labels": [{"key": "goog-k8s-node-pool-name", "value": "a100"}],
        "cost": cost,
        "currency": "USD",
        "credits": [],
    }
    return json.dumps(row) + "\n"


def _import(cfg: Path, export: Path, at: datetime) -> int:
    args = build_parser().parse_args(["ledger", "import-billing", "--config", str(cfg), str(export)])
    return import_billing(args, SimulatedClock(at))


def _spent_and_estimated(ledger: Path, start: datetime, end: datetime) -> tuple[float, float]:
    with SqliteLedger(ledger, read_only=True) as opened:
        return opened.spent(["a100"], start, end), opened.estimated(["a100"], start, end)


def test_a_day_not_over_at_the_import_is_left_out_and_its_later_spend_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "ledger.sqlite"
    cfg = _config(tmp_path, ledger)
    noon, end_of_day = DAY + timedelta(hours=12), DAY + timedelta(days=1)
    _charge(ledger, DAY - timedelta(days=1), noon, 10)  # yesterday and this morning at 10 units (80 USD an hour)
    export = tmp_path / "billing.json"
    export.write_text(_daily_row(DAY - timedelta(days=1), YESTERDAY_BILL) + _daily_row(DAY, MORNING_BILL))

    assert _import(cfg, export, noon) == 0

    _charge(ledger, noon, end_of_day, 16)  # the afternoon at 16 units (128 USD an hour)
    spent, estimated = _spent_and_estimated(ledger, DAY, end_of_day)
    assert estimated == pytest.approx(12 * 80.0 + 12 * 128.0)
    assert spent == pytest.approx(estimated)  # the afternoon counts: no partial bill stands for it
    assert _spent_and_estimated(ledger, DAY - timedelta(days=1), DAY)[0] == pytest.approx(YESTERDAY_BILL)

    out, err = capsys.readouterr()
    assert "stored 1 billed interval(s) from 2026-03-01 00:00 UTC to 2026-03-02 00:00 UTC, left out 1 not over" in out
    assert "no row of the export billed" not in out  # the pool's rows matched; one was left out for its time
    assert (
        "left out 1 row(s) billing 1 interval(s) not over at 2026-03-02 12:00 UTC: "
        "a100 2026-03-02 00:00 UTC..2026-03-03 00:00 UTC (line 2)" in err
    )
    assert "import an export holding these intervals again once they are over" in err

    # The next day's import bills the whole day: it is over, so it is stored and replaces the estimate.
    export.write_text(_daily_row(DAY, 2400.0))
    assert _import(cfg, export, end_of_day) == 0
    out, err = capsys.readouterr()
    assert "stored 1 billed interval(s) from 2026-03-02 00:00 UTC to 2026-03-03 00:00 UTC\n" in out
    assert err == ""
    assert _spent_and_estimated(ledger, DAY, end_of_day)[0] == pytest.approx(2400.0)


@pytest.mark.parametrize(
    ("at", "kept", "left_out"),
    [
        (DAY + timedelta(hours=1), ["00:00"], ["01:00", "02:00"]),  # the first hour ends exactly then: it is over
        (DAY + timedelta(minutes=59), [], ["00:00", "01:00", "02:00"]),
        (DAY + timedelta(hours=3), ["00:00", "01:00", "02:00"], []),
    ],
)
def test_an_interval_is_over_once_its_end_is_reached(at: datetime, kept: list[str], left_out: list[str]) -> None:
    costs = [BilledCost("a100", DAY + timedelta(hours=h), DAY + timedelta(hours=h + 1), 10.0) for h in range(3)]
    keys = {(c.pool_id, c.start, c.end): 2 * i + 1 for i, c in enumerate(costs)}
    matched = Matched(costs, rows=6, unmatched=0, lines=keys, counts=dict.fromkeys(keys, 2))

    split = not_over(matched, at)

    assert [f"{c.start:%H:%M}" for c in split.kept.costs] == kept
    assert [f"{c.start:%H:%M}" for c in split.left_out] == left_out
    assert split.rows == 2 * len(left_out)  # both rows of each interval left out
    assert split.lines == [keys[(c.pool_id, c.start, c.end)] for c in split.left_out]

"""``leadtime ledger import-billing`` on both database ledgers (SQLite, and PostgreSQL on the suite's real server),
from a CSV and a JSON export built here in the shape of the Cloud Billing usage cost export (fields and their
source: docs/billing-reconciliation.md):

* rows are matched to pools by the node pool label (within the configured cluster) or the resource name; other
  rows are counted, not imported; a row's billed cost is its cost plus its credits;
* the difference per pool is printed; the billed cost replaces the estimate in spend so far for the intervals it
  covers, in the budget report and in the spend reservations are decided on;
* importing the same file again counts nothing twice; bad rows are refused with their line and problem, and
  nothing is imported;
* a ledger file of the first schema gains the billed table when opened.

How an export's rows are read and matched to pools: ``test_billing_export_rows.py``; a node pool named alike in two
clusters: ``test_billing_import_clusters.py``. The rig they share: ``billing_export_rig.py``.
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from agent.ledger.postgres import PostgresLedger
from agent.ledger.reservations import ReservationRequest, Reservations
from agent.ledger.sqlite import SqliteLedger
from agent.ledger.sqlite_schema import SCHEMA_VERSION
from models import LedgerEntry
from tests.ledger import billing_export_rig as rig
from tests.ledger.billing_export_rig import (
    A100_BILL,
    BILLED_HOURS,
    H100_BILL,
    HOUR,
    QUARTER,
    T0,
    UNIT_HOUR,
    UNITS,
    _password,
    as_csv,
    as_json,
    export_rows,
    table,
)
from tests.postgres.fixtures import POSTGRES

pytestmark = POSTGRES
backend = rig.backend  # the configuration and its ledger of six hours of spend: SQLite, and PostgreSQL


@pytest.mark.parametrize("form", ["csv", "json"])
def test_billed_cost_is_stored_beside_the_estimate_and_counts_once_where_it_exists(
    form: str, tmp_path: Path, backend: tuple[Path, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, ledger = backend
    export = tmp_path / f"billing.{form}"
    export.write_text(as_csv(export_rows()) if form == "csv" else as_json(export_rows()), encoding="utf-8")
    end = T0 + 6 * HOUR
    estimated = {pool: 6 * units * UNIT_HOUR for pool, units in UNITS.items()}
    assert ledger.spent(["a100", "h100"], T0, end) == pytest.approx(sum(estimated.values()))

    assert main(["ledger", "import-billing", "--config", str(cfg), str(export)]) == 0
    out = capsys.readouterr().out
    assert (
        "20 rows, 12 of them for 2 pool(s) in cluster prod, 8 for other resources; stored 8 billed interval(s)" in out
    )
    a100_hour = sum(A100_BILL)
    a100_est = BILLED_HOURS * UNITS["a100"] * UNIT_HOUR
    h100_est = BILLED_HOURS * UNITS["h100"] * UNIT_HOUR
    # pool: hours billed, estimated, billed, diff, diff %
    hours = f"{BILLED_HOURS:.2f}"
    assert table(out) == {
        "a100": [hours, f"{a100_est:.2f}", f"{4 * a100_hour:.2f}", f"{4 * a100_hour - a100_est:+.2f}",
                 f"{100 * (4 * a100_hour - a100_est) / a100_est:+.2f}%"],
        "h100": [hours, f"{h100_est:.2f}", f"{4 * H100_BILL:.2f}", f"{4 * H100_BILL - h100_est:+.2f}",
                 f"{100 * (4 * H100_BILL - h100_est) / h100_est:+.2f}%"],
    }  # fmt: skip

    unbilled = 2 * (UNITS["a100"] + UNITS["h100"]) * UNIT_HOUR  # hours 4 and 5 keep their estimate
    spent = 4 * a100_hour + 4 * H100_BILL + unbilled
    assert ledger.billed(["a100"], T0, end) == pytest.approx(4 * a100_hour)
    assert ledger.estimated(["a100", "h100"], T0, end) == pytest.approx(sum(estimated.values()))
    assert ledger.spent(["a100", "h100"], T0, end) == pytest.approx(spent)
    assert ledger.spent(["h100"], T0 + 4 * HOUR, end) == pytest.approx(2 * UNIT_HOUR)

    # The same file again: nothing counted twice.
    assert main(["ledger", "import-billing", "--config", str(cfg), str(export)]) == 0
    assert table(capsys.readouterr().out)["a100"][:3] == [hours, f"{a100_est:.2f}", f"{4 * a100_hour:.2f}"]
    assert ledger.spent(["a100", "h100"], T0, end) == pytest.approx(spent)

    # The budget report shows the estimate, the bill, and what the budget counts.
    assert main(["ledger", "budgets", "--config", str(cfg), "--at", end.isoformat()]) == 0
    report = capsys.readouterr().out
    (research,) = [line.split() for line in report.splitlines() if line.startswith("research")]
    assert research[2:] == [
        "10000.00",
        f"{sum(estimated.values()):.2f}",
        f"{4 * a100_hour + 4 * H100_BILL:.2f}",
        f"{a100_est + h100_est:.2f}",
        f"{spent:.2f}",
        f"{100 * spent / 10_000:.1f}%",
    ]


def test_reservations_are_decided_on_billed_cost_where_it_exists(
    tmp_path: Path, backend: tuple[Path, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, _ = backend
    export = tmp_path / "billing.json"
    export.write_text(as_json(export_rows()), encoding="utf-8")
    assert main(["ledger", "import-billing", "--config", str(cfg), str(export)]) == 0
    settings = yaml.safe_load(cfg.read_text(encoding="utf-8"))["ledger"]
    ledger: SqliteLedger | PostgresLedger = (
        SqliteLedger(settings["path"]) if "path" in settings else PostgresLedger(settings["url"], _password())
    )
    assert isinstance(ledger, Reservations)
    end = T0 + 6 * HOUR
    spent = 4 * sum(A100_BILL) + 4 * H100_BILL + 2 * 3 * UNIT_HOUR
    cap = spent + 50.0  # the estimate alone (432.00) would leave 52.00
    ask = ReservationRequest("research", ("a100", "h100"), T0, T0 + timedelta(days=30), cap, 50.01, "x", HOUR)
    try:
        refused = ledger.reserve(ask, end)
        assert not refused.granted
        assert refused.headroom_usd == pytest.approx(50.0)
    finally:
        ledger.close()


def test_bad_rows_are_refused_with_their_line_and_problem_and_nothing_is_imported(
    tmp_path: Path, backend: tuple[Path, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, ledger = backend
    rows = export_rows()[:5]
    rows[1]["usage_start_time"] = "yesterday"
    rows[2]["cost"] = "12,50"
    rows[3]["labels"] = [{"value": "no key"}]
    eur = dict(rows[0], currency="EUR")
    export = tmp_path / "billing.csv"
    export.write_text(as_csv([*rows, eur]), encoding="utf-8")
    assert main(["ledger", "import-billing", "--config", str(cfg), str(export)]) == 2
    err = capsys.readouterr().err
    assert "line 3: usage_start_time: 'yesterday' is not a time" in err
    assert "line 4: cost: '12,50' is not a number" in err
    assert "line 5: labels: each label needs a key and a value" in err
    assert "nothing imported" in err
    assert ledger.billed(["a100", "h100"], T0, T0 + 6 * HOUR) == 0.0

    export.write_text(as_json([rows[0], eur]), encoding="utf-8")  # rows that read, but a pool's cost not in USD
    assert main(["ledger", "import-billing", "--config", str(cfg), str(export)]) == 2
    assert "line 2: currency 'EUR' for pool a100: the ledger keeps USD" in capsys.readouterr().err
    assert ledger.billed(["a100", "h100"], T0, T0 + 6 * HOUR) == 0.0


def test_a_ledger_file_of_the_first_schema_gains_the_billed_table_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with SqliteLedger(path) as ledger:
        ledger.record(LedgerEntry("a100", T0, T0 + QUARTER, 1, 6.0))
    with sqlite3.connect(path) as db:  # as the previous release left it
        db.execute("DROP TABLE billed")
        db.execute("PRAGMA user_version = 1")
    with SqliteLedger(path, read_only=True) as reader:  # a reader of the old file sees the estimate
        assert reader.spent(["a100"], T0, T0 + HOUR) == pytest.approx(6.0)
    with SqliteLedger(path) as ledger:
        assert ledger.spent(["a100"], T0, T0 + HOUR) == pytest.approx(6.0)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert db.execute("SELECT count(*) FROM billed").fetchone() == (0,)

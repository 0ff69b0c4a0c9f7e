"""Since when a ledger holds each pool's spend, on the in-memory, SQLite and PostgreSQL ledgers (PostgreSQL on the
suite's real server, a new database per test), and what the spend meter makes of it for a budget's period:

* a pool's first record is its earliest entry, an opening mark included (the agent's first observation of it),
  or its earliest billed cost; a budget's period is held whole only when each of its own pools has one at or before
  the period's start (a bill imported for some of its pools fills the period for those alone);
* a ledger begun after the budget's period started (a new pod's file, a first install mid-month) holds the period
  in part: the meter says so, logs it once per budget and period, and stops asking once the period is covered;
* importing the period's bill (``leadtime ledger import-billing``) fills the time before: the period is covered.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from agent.commands.recommend_ledger import open_read_only
from agent.ledger import InMemoryLedger
from agent.ledger.base import RecordedSince
from agent.ledger.billed import BilledCost
from agent.ledger.meter import SpendMeter
from agent.ledger.postgres import PostgresLedger
from agent.ledger.shared_file import LeaderWrittenLedger
from agent.ledger.sqlite import SqliteLedger
from agent.planning.budget import Budget
from config.ledger import LedgerSettings
from models import LedgerEntry
from tests.postgres.fixtures import POSTGRES, Database

MONTH = datetime(2026, 3, 1, tzinfo=UTC)  # the budget's period: March, from midnight UTC on the 1st
RESTART = datetime(2026, 3, 20, 9, 0, tzinfo=UTC)  # a new ledger's first record: a pod started on the 20th
QUARTER = timedelta(minutes=15)
BUDGET = Budget("research", frozenset({"a100", "h100"}), monthly_cap_usd=250_000.0)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgresql", marks=POSTGRES)])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield InMemoryLedger()
        return
    if request.param == "postgresql":
        database: Database = request.getfixturevalue("postgres_database")
        with PostgresLedger(database.url, database.password) as postgres:
            yield postgres
        return
    with SqliteLedger(tmp_path / "ledger.sqlite") as sqlite:
        yield sqlite


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=POSTGRES)])
def database_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The ledgers that store billed costs."""
    if request.param == "postgresql":
        database: Database = request.getfixturevalue("postgres_database")
        with PostgresLedger(database.url, database.password) as postgres:
            yield postgres
        return
    with SqliteLedger(tmp_path / "ledger.sqlite") as sqlite:
        yield sqlite


def mark(pool: str, at: datetime, units: int = 2) -> LedgerEntry:
    return LedgerEntry(pool, at, at, units, 0.0)


def test_a_pools_first_record_is_its_earliest_entry_marks_included(ledger: Any) -> None:
    assert ledger.recorded_since(["a100", "h100"]) == {}
    ledger.record_many(
        [
            mark("a100", RESTART + QUARTER),
            LedgerEntry("a100", RESTART + QUARTER, RESTART + 2 * QUARTER, 2, 12.0),
            mark("h100", RESTART),  # a pool held at 0 units is recorded from its first observation too
            LedgerEntry("gone", MONTH - timedelta(days=40), MONTH - timedelta(days=39), 1, 5.0),
        ]
    )
    ledger.record(mark("a100", RESTART - QUARTER))  # recorded after later entries: still the earliest
    assert ledger.recorded_since(["a100", "h100", "h100", "other"]) == {"a100": RESTART - QUARTER, "h100": RESTART}
    assert ledger.recorded_since([]) == {}
    assert ledger.where
    assert isinstance(ledger, RecordedSince)  # what the spend meter asks of a ledger


def test_billed_costs_count_as_records(database_ledger: Any) -> None:
    database_ledger.record(mark("a100", RESTART))
    database_ledger.record_billed([BilledCost("a100", MONTH, MONTH + timedelta(hours=1), 40.0)])
    database_ledger.record_billed([BilledCost("h100", MONTH + timedelta(days=2), MONTH + timedelta(days=3), 9.0)])
    assert database_ledger.recorded_since(["a100", "h100"]) == {"a100": MONTH, "h100": MONTH + timedelta(days=2)}


def test_a_ledger_begun_mid_period_holds_it_in_part_and_is_logged_once(
    ledger: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The replacement pod of the shipped base: its ledger starts on the 20th, so March's spend reads 0 until then."""
    [nothing] = SpendMeter(ledger, timedelta(minutes=5)).coverage([BUDGET], RESTART)
    assert (nothing.since, nothing.complete) == (None, False)  # no record at all: nothing is known

    ledger.record_many([mark("a100", RESTART), mark("h100", RESTART)])
    meter = SpendMeter(ledger, timedelta(minutes=5))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="agent.ledger.meter"):
        for tick in range(3):
            [coverage] = meter.coverage([BUDGET], RESTART + tick * QUARTER)
            assert coverage.budget == "research"
            assert (coverage.period_start, coverage.period_end) == (MONTH, datetime(2026, 4, 1, tzinfo=UTC))
            assert (coverage.since, coverage.complete) == (RESTART, False)
            assert coverage.where == ledger.where
    warned = [r.getMessage() for r in caplog.records if r.name == "agent.ledger.meter"]
    assert len(warned) == 1  # the first read of the period warned: not every tick
    assert "research" in warned[0] and MONTH.isoformat() in warned[0] and RESTART.isoformat() in warned[0]

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="agent.ledger.meter"):
        [april] = meter.coverage([BUDGET], datetime(2026, 4, 1, 0, 5, tzinfo=UTC))  # the ledger holds April whole
    assert (april.period_start, april.since, april.complete) == (datetime(2026, 4, 1, tzinfo=UTC), RESTART, True)
    assert not caplog.records


def test_a_budget_is_covered_only_when_each_of_its_pools_is_and_hourly_caps_are_not_asked(
    ledger: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """h100 was recorded from before the period, a100 only from the 20th: a100's spend before is missing."""
    ledger.record_many([mark("a100", RESTART), mark("h100", MONTH - timedelta(days=3))])
    hourly = Budget("burst", frozenset({"a100"}), hourly_cap_usd=100.0)
    meter = SpendMeter(ledger, timedelta(minutes=5))
    with caplog.at_level(logging.WARNING, logger="agent.ledger.meter"):
        [coverage] = meter.coverage([BUDGET, hourly], RESTART)
    assert (coverage.budget, coverage.since, coverage.complete) == ("research", RESTART, False)
    assert coverage.first == (("a100", RESTART), ("h100", MONTH - timedelta(days=3)))
    assert coverage.late == (("a100", RESTART),)
    [warned] = [r for r in caplog.records if r.name == "agent.ledger.meter"]
    assert f"a100 (first record {RESTART.isoformat()})" in warned.getMessage()
    assert "h100" not in warned.getMessage()
    assert "cannot tell it from one whose records were lost" in warned.getMessage()
    assert warned.__dict__["late_pools"] == ["a100"]

    ledger.record(mark("a100", MONTH - timedelta(days=1)))  # the time before, found (an import of its bill)
    [coverage] = SpendMeter(ledger, timedelta(minutes=5)).coverage([BUDGET], RESTART)
    assert (coverage.since, coverage.complete, coverage.late) == (MONTH - timedelta(days=1), True, ())


def test_a_pool_without_any_record_leaves_the_period_incomplete(ledger: Any) -> None:
    ledger.record(mark("h100", MONTH - timedelta(days=3)))
    [coverage] = SpendMeter(ledger, timedelta(minutes=5)).coverage([BUDGET], RESTART)
    assert (coverage.since, coverage.complete, coverage.late) == (None, False, (("a100", None),))
    assert coverage.late_pools() == "a100 (no record yet)"


def test_the_pools_other_agents_run_are_not_judged_here(ledger: Any) -> None:
    """A shared budget's remote pool is recorded by its own agent (in a shared ledger, or not in this one at all)."""
    shared = Budget("shared", frozenset({"a100", "tpu-eu"}), monthly_cap_usd=1e6, remote_pools=frozenset({"tpu-eu"}))
    ledger.record_many([mark("a100", MONTH - QUARTER), mark("tpu-eu", RESTART)])
    [coverage] = SpendMeter(ledger, timedelta(minutes=5)).coverage([shared], RESTART)
    assert (coverage.first, coverage.complete) == ((("a100", MONTH - QUARTER),), True)


def test_a_bill_of_the_gpu_pool_alone_leaves_the_slices_named(
    database_ledger: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A GPU node pool and a TPU slice group, the pod restarted on the 20th; the standard export billed the GPU node
    pool alone (slices match only through resource_prefixes on the detailed export): ~143k USD of slice spend, from
    the period's start to the restart, is still missing, and the period is not covered."""
    budget = Budget("accelerators", frozenset({"a100-on-demand", "v5e-slices"}), monthly_cap_usd=250_000.0)
    database_ledger.record_many([mark("a100-on-demand", RESTART), mark("v5e-slices", RESTART, 8)])
    database_ledger.record_billed([BilledCost("a100-on-demand", MONTH, RESTART, 19 * 24 * 58.7)])
    with caplog.at_level(logging.WARNING, logger="agent.ledger.meter"):
        [coverage] = SpendMeter(database_ledger, timedelta(minutes=5)).coverage([budget], RESTART + QUARTER)
    assert (coverage.complete, coverage.since) == (False, RESTART)
    assert coverage.late == (("v5e-slices", RESTART),)
    assert "v5e-slices (first record" in caplog.text and "a100-on-demand (" not in caplog.text

    database_ledger.record_billed([BilledCost("v5e-slices", MONTH, RESTART, 19 * 24 * 307.2)])  # its bill too
    [coverage] = SpendMeter(database_ledger, timedelta(minutes=5)).coverage([budget], RESTART + QUARTER)
    assert (coverage.complete, coverage.since, coverage.late) == (True, MONTH, ())


def test_a_covered_period_is_not_asked_about_again(ledger: Any) -> None:
    ledger.record_many([mark("a100", MONTH), mark("h100", MONTH)])  # first records at the period's very start
    asked: list[list[str]] = []
    recorded_since = ledger.recorded_since

    def counting(pools: list[str]) -> dict[str, datetime]:
        asked.append(list(pools))
        return dict(recorded_since(pools))

    ledger.recorded_since = counting
    meter = SpendMeter(ledger, timedelta(minutes=5))
    for tick in range(4):
        [coverage] = meter.coverage([BUDGET], RESTART + tick * QUARTER)
        assert coverage.complete and coverage.since == MONTH
    assert asked == [["a100", "h100"]]


def test_a_standby_reading_the_shared_file_sees_what_the_leader_recorded(tmp_path: Path) -> None:
    leading = [True]
    leader = LeaderWrittenLedger(tmp_path / "ledger.sqlite")
    leader.follow(lambda: leading[0])
    leader.record(mark("a100", RESTART))
    standby = LeaderWrittenLedger(tmp_path / "ledger.sqlite")  # follows no leadership: reads only
    try:
        assert standby.recorded_since(["a100"]) == {"a100": RESTART}
        assert standby.where == str(tmp_path / "ledger.sqlite")
    finally:
        standby.close()
        leader.close()


def test_a_reader_of_a_file_without_billed_costs_finds_the_first_entries(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with SqliteLedger(path) as writer:
        writer.record_many([mark("a100", RESTART), mark("h100", RESTART + QUARTER)])
    with sqlite3.connect(path) as db:  # as the first release left it: no billed costs table
        db.execute("DROP TABLE billed")
        db.execute("PRAGMA user_version = 1")
    with SqliteLedger(path, read_only=True) as reader:
        assert reader.recorded_since(["a100", "h100"]) == {"a100": RESTART, "h100": RESTART + QUARTER}


def _export(start: datetime, hours: int) -> str:
    """Newline-delimited rows of a Cloud Billing usage cost export (docs/billing-reconciliation.md), an hour each:
    the a100 pool by its node pool label, the h100 pool by its instances' resource name."""
    rows = []
    for h in range(hours):
        begin, end = start + h * timedelta(hours=1), start + (h + 1) * timedelta(hours=1)
        common = {
            "service": {"id": "6F81-5844-456A", "description": "Compute Engine"},
            "usage_start_time": f"{begin:%Y-%m-%d %H:%M:%S} UTC",
            "usage_end_time": f"{end:%Y-%m-%d %H:%M:%S} UTC",
            "currency": "USD",
            "credits": [],
        }
        cluster = {"key": "goog-k8s-cluster-name", "value": "prod"}
        rows.append(
            {
                **common,
                "sku": {"id": "0000-0000-0000", "description": "Nvidia Tesla A100 GPU"},
                "labels": [cluster, {"key": "goog-k8s-node-pool-name", "value": "gpu-a100-pool"}],
                "cost": 40.0,
            }
        )
        rows.append(
            {
                **common,
                "sku": {"id": "0000-0000-0001", "description": "Nvidia H100 GPU"},
                "labels": [cluster],
                "resource": {"name": "gke-prod-h100-7f-x2"},
                "cost": 22.5,
            }
        )
    return "".join(json.dumps(row) + "\n" for row in rows)


def _config(tmp_path: Path, ledger: dict[str, Any]) -> Path:
    """The billing test's pools and export mapping, with a budget whose period starts where the export does."""
    pool = {"kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 4, "price_per_chip_hour_usd": 3.0,
            "lead_time": "10m", "serves": ["c"]}  # fmt: skip
    body = {
        "demand_classes": [{"name": "c"}],
        "pools": [{"id": "a100", **pool}, {"id": "h100", **pool}],
        "budgets": [{"name": "research", "pools": ["a100", "h100"], "monthly_cap_usd": 10_000, "period_start_day": 2}],
        "ledger": {
            **ledger,
            "billing": {
                "cluster": "prod",
                "pools": {"a100": "gpu-a100-pool"},
                "resource_prefixes": {"h100": "gke-prod-h100-"},
            },
        },
    }
    path = tmp_path / "leadtime.yaml"
    path.write_text(yaml.safe_dump(body), encoding="utf-8")
    return path


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=POSTGRES)])
def test_importing_the_periods_bill_fills_the_time_before_the_first_record(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The export bills 2 March from 00:00 to 04:00 UTC, the period's start; the ledger began at 02:00."""
    period_start, began = datetime(2026, 3, 2, tzinfo=UTC), datetime(2026, 3, 2, 2, 0, tzinfo=UTC)
    budget = Budget("research", frozenset({"a100", "h100"}), monthly_cap_usd=10_000.0, period_start_day=2)

    def opened() -> Any:
        if backend == "sqlite":
            return SqliteLedger(tmp_path / "ledger.sqlite")
        return PostgresLedger(database.url, database.password)

    if backend == "sqlite":
        cfg = _config(tmp_path, {"path": str(tmp_path / "ledger.sqlite")})
    else:
        database: Database = request.getfixturevalue("postgres_database")
        monkeypatch.setenv("LEADTIME_LEDGER_PASSWORD", database.password)
        cfg = _config(tmp_path, {"backend": "postgresql", "url": database.url, "sslmode": "disable"})
    with opened() as ledger:
        ledger.record_many([mark("a100", began), mark("h100", began, 1)])
        [before] = SpendMeter(ledger, timedelta(minutes=5)).coverage([budget], began + QUARTER)
    assert (before.period_start, before.since, before.complete) == (period_start, began, False)

    export = tmp_path / "billing.json"
    export.write_text(_export(period_start, 4), encoding="utf-8")
    assert main(["ledger", "import-billing", "--config", str(cfg), str(export)]) == 0

    with opened() as ledger:
        [after] = SpendMeter(ledger, timedelta(minutes=5)).coverage([budget], began + QUARTER)
    assert (after.since, after.complete) == (period_start, True)


def test_import_billing_lists_the_budget_pools_the_export_did_not_bill(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The standard export has no resource record: the h100 pool, matched by resource name, gets no row. The import
    says so, and the period stays incomplete for h100 alone until the detailed export is imported."""
    period_start, began = datetime(2026, 3, 2, tzinfo=UTC), datetime(2026, 3, 2, 2, 0, tzinfo=UTC)
    budget = Budget("research", frozenset({"a100", "h100"}), monthly_cap_usd=10_000.0, period_start_day=2)
    cfg = _config(tmp_path, {"path": str(tmp_path / "ledger.sqlite")})
    with SqliteLedger(tmp_path / "ledger.sqlite") as ledger:
        ledger.record_many([mark("a100", began), mark("h100", began, 1)])
    detailed = _export(period_start, 4)
    standard = tmp_path / "standard.json"
    rows = [json.loads(line) for line in detailed.splitlines()]
    standard.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "resource"}) + "\n" for r in rows))

    assert main(["ledger", "import-billing", "--config", str(cfg), str(standard)]) == 0
    out = capsys.readouterr().out
    assert "budget pools no row of the export billed" in out
    [listed] = [line.strip() for line in out.splitlines() if line.startswith("  ")]
    assert listed == (
        "h100 (budget research): matched by resource names starting 'gke-prod-h100-' "
        "(the detailed export's resource record only)"
    )
    with SqliteLedger(tmp_path / "ledger.sqlite", read_only=True) as ledger:
        [coverage] = SpendMeter(ledger, timedelta(minutes=5)).coverage([budget], began + QUARTER)
    assert (coverage.complete, coverage.late) == (False, (("h100", began),))

    (tmp_path / "detailed.json").write_text(detailed, encoding="utf-8")
    assert main(["ledger", "import-billing", "--config", str(cfg), str(tmp_path / "detailed.json")]) == 0
    assert "no row of the export billed" not in capsys.readouterr().out
    with SqliteLedger(tmp_path / "ledger.sqlite", read_only=True) as ledger:
        [coverage] = SpendMeter(ledger, timedelta(minutes=5)).coverage([budget], began + QUARTER)
    assert (coverage.complete, coverage.since) == (True, period_start)


def test_the_dry_run_s_ledger_says_what_the_daemon_s_says(tmp_path: Path) -> None:
    """``leadtime recommend`` reads the ledger through ``ReadOnlyLedger``: it must see the period held in part as the
    daemon does, a pool the ledger has no record of counted from the dry run's own opening mark."""
    path = tmp_path / "ledger.sqlite"
    with SqliteLedger(path) as ledger:
        ledger.record_many([mark("a100", RESTART), mark("h100", MONTH - QUARTER)])
    with open_read_only(LedgerSettings(path=str(path))) as (read_only, _):
        assert isinstance(read_only, RecordedSince)
        assert read_only.where == str(path)
        read_only.record(mark("other", RESTART + QUARTER))  # the dry-run tick's charges, in memory
        read_only.record(mark("a100", RESTART + QUARTER))
        assert read_only.recorded_since(["a100", "h100", "other", "none"]) == {
            "a100": RESTART,
            "h100": MONTH - QUARTER,
            "other": RESTART + QUARTER,
        }
        [coverage] = SpendMeter(read_only, timedelta(minutes=5)).coverage([BUDGET], RESTART + QUARTER)
    with SqliteLedger(path, read_only=True) as daemon_view:
        [daemon] = SpendMeter(daemon_view, timedelta(minutes=5)).coverage([BUDGET], RESTART + QUARTER)
    assert coverage == daemon
    assert (coverage.complete, coverage.late) == (False, (("a100", RESTART),))
    # Without a ledger file the dry run's own charges are its only records: no budget is judged held in part.
    with open_read_only(LedgerSettings(path=str(tmp_path / "none.sqlite"))) as (no_ledger, _):
        assert not isinstance(no_ledger, RecordedSince)
        no_ledger.record(mark("a100", RESTART + QUARTER))
        assert SpendMeter(no_ledger, timedelta(minutes=5)).coverage([BUDGET], RESTART + QUARTER) == []

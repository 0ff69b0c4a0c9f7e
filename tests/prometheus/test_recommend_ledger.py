"""``leadtime recommend`` plans on the month's spend so far, read from the configured ledger without writing it, as
the daemon plans; its budget table shows the projection the planner held the caps to, and its demand tables the
peak the planner planned on."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from actuators.simulated import SimulatedCluster
from agent.commands.recommend import recommend
from agent.ledger.accrual import PoolReading
from agent.ledger.meter import SpendMeter
from agent.ledger.postgres import PostgresLedger
from agent.ledger.sqlite import SqliteLedger
from agent.planning.budget import Budget
from config import load_settings
from models.clock import SimulatedClock
from tests.ledger.test_postgres_read_only import reader_role, schema_state
from tests.postgres.fixtures import Database
from tests.prometheus.server import TENANTS, PrometheusServer
from tests.prometheus.test_recommend import WritesForbidden, write_config

pytestmark = pytest.mark.xdist_group("prometheus")
AT = datetime(2020, 5, 8, 4, 0, tzinfo=UTC)  # 12:00 in the cluster's zone, a week into the trace
POOL = "a100-on-demand"
PRICE = 8 * 3.67  # USD per unit-hour
CAP = 500000.0
UNITS = 20  # what the pool held since the period began, and holds now
TICK = timedelta(minutes=5)  # how often the daemon that wrote the ledger observed the pool


def _config(tmp_path: Path, server: PrometheusServer, ledger: dict[str, Any]) -> Path:
    tmp_path.mkdir(exist_ok=True)
    config = write_config(tmp_path, server, timezone="Asia/Shanghai")
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    raw["ledger"] = ledger
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return config


def _period_start(config: Path) -> datetime:
    (budget,) = load_settings(config).budgets
    return Budget.from_settings(budget).period(AT).start


def _daemon_readings(start: datetime) -> list[PoolReading]:
    """A daemon's observations of the pool at ``UNITS`` units every tick from ``start`` until just before ``AT``."""
    ticks = int((AT - start) / TICK)
    return [PoolReading(POOL, start + i * TICK, UNITS, PRICE) for i in range(ticks)]


def _recommend(config: Path, out: Path) -> dict[str, Any]:
    settings = load_settings(config)
    cluster = SimulatedCluster(settings.pool_specs(), SimulatedClock(AT), initial_units={POOL: UNITS})
    read_side = WritesForbidden(cluster)
    document = recommend(settings, str(config), out, AT, read_side, pool_state_source="test")
    assert read_side.writes == []
    return document


def _hours_left(budget: dict[str, Any]) -> float:
    return (datetime.fromisoformat(budget["period_end"]) - AT).total_seconds() / 3600.0


def _assert_planned_on_the_spend(document: dict[str, Any], spent: float) -> None:
    """The month's spend was read, the scale-up trimmed to the most units that fit the cap with it, and the budget
    table projects what the planner did."""
    (pool,) = document["pools"]
    (budget,) = document["budgets"]
    hours_left = _hours_left(budget)
    fits = math.floor((CAP - spent) / (PRICE * hours_left))
    assert pool["recommended_units"] == fits
    assert "budget 'research' (monthly cap)" in pool["why"]
    assert budget["spend_known"] is True
    assert (budget["spend_complete"], budget["pools_recorded_late"], budget["spend_partial"]) == (True, [], None)
    assert budget["spent_period_usd"] == pytest.approx(spent, abs=0.01)
    projected = spent + pool["recommended_units"] * PRICE * hours_left
    assert budget["recommended_projected_period_usd"] == pytest.approx(projected, abs=0.01)
    assert budget["current_projected_period_usd"] == pytest.approx(spent + UNITS * PRICE * hours_left, abs=0.01)
    assert budget["recommended_fraction_of_monthly_cap"] <= 1.0


@dataclass(frozen=True)
class Run:
    """A dry run's document and the directory it wrote its files into."""

    document: dict[str, Any]
    out: Path


@pytest.fixture(scope="module")
def without_ledger_file(prometheus: PrometheusServer, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The dry run configured with a ledger file there is none of yet: the tests of that run read this one."""
    tmp_path = tmp_path_factory.mktemp("no-ledger")
    missing = tmp_path / "none" / "ledger.sqlite"
    out = tmp_path / "out"
    document = _recommend(_config(tmp_path / "none", prometheus, {"path": str(missing)}), out)
    assert not missing.exists()  # a missing ledger is not created
    return Run(document, out)


def test_recommend_plans_on_the_month_to_date_spend_of_the_sqlite_ledger_and_never_writes_it(
    prometheus: PrometheusServer, tmp_path: Path, without_ledger_file: Run
) -> None:
    unknown = without_ledger_file.document
    path = tmp_path / "ledger.sqlite"
    config = _config(tmp_path, prometheus, {"path": str(path)})
    start = _period_start(config)
    with SqliteLedger(path) as ledger:
        SpendMeter(ledger, timedelta(minutes=10)).observe(_daemon_readings(start))
        entries = ledger.entries()
    before = (path.read_bytes(), path.stat().st_mtime_ns)

    document = _recommend(config, tmp_path / "o2")

    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    with SqliteLedger(path, read_only=True) as ledger:
        assert ledger.entries() == entries
    # the dry run charged what the pool held since the daemon's last tick, as the daemon would at this tick
    spent = UNITS * PRICE * (AT - start).total_seconds() / 3600.0
    _assert_planned_on_the_spend(document, spent)
    assert document["ledger"]["spend_known"] is True
    markdown = (tmp_path / "o2" / "report.md").read_text(encoding="utf-8")
    assert f"month-to-date spend read from the sqlite ledger at {path} (read-only)" in markdown
    assert "unknown, assumed 0" not in markdown

    # Without the ledger the same tick buys more: nothing counts as spent, and the report says so.
    (pool,), (budget,) = unknown["pools"], unknown["budgets"]
    assert pool["recommended_units"] > document["pools"][0]["recommended_units"]
    assert budget["spend_known"] is False and budget["spent_period_usd"] == 0.0
    assert unknown["ledger"]["note"].startswith("month-to-date spend unknown, assumed 0: there is no ledger file at")
    projected = pool["recommended_units"] * PRICE * _hours_left(budget)
    assert budget["recommended_projected_period_usd"] == pytest.approx(projected, abs=0.01)
    assert budget["recommended_fraction_of_monthly_cap"] == pytest.approx(projected / CAP, abs=1e-4)
    markdown = (without_ledger_file.out / "report.md").read_text(encoding="utf-8")
    assert "month-to-date spend unknown, assumed 0" in markdown
    assert "| research | unknown, assumed 0 |" in markdown
    assert json.loads((without_ledger_file.out / "recommendation.json").read_text())["ledger"] == unknown["ledger"]


def test_recommend_reads_the_month_to_date_spend_of_a_postgresql_ledger_and_never_writes_it(
    prometheus: PrometheusServer,
    postgres_database: Database,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As a role that may only SELECT: the dry run's sessions are read-only and it never migrates the schema."""
    with PostgresLedger(postgres_database.url, postgres_database.password) as postgres:
        schema = schema_state(postgres_database)
    reader = reader_role(postgres_database)
    monkeypatch.setenv("LEADTIME_LEDGER_PASSWORD", reader.password)
    ledger = {"backend": "postgresql", "url": reader.url, "sslmode": "disable"}
    config = _config(tmp_path, prometheus, ledger)
    start = _period_start(config)
    with PostgresLedger(postgres_database.url, postgres_database.password) as postgres:
        SpendMeter(postgres, timedelta(minutes=10)).observe(_daemon_readings(start))
        entries = postgres.entries()

    document = _recommend(config, tmp_path / "out")

    assert schema_state(postgres_database) == schema

    spent = UNITS * PRICE * (AT - start).total_seconds() / 3600.0
    _assert_planned_on_the_spend(document, spent)
    with PostgresLedger(postgres_database.url, postgres_database.password) as postgres:
        assert postgres.entries() == entries
        assert postgres.reserved("research", AT) == 0.0  # the dry run's scale-up reserved nothing there
        assert postgres.spent([POOL], start, AT + timedelta(hours=1)) == pytest.approx(sum(e.cost_usd for e in entries))


def test_recommend_marks_the_spend_partial_when_the_ledger_began_after_the_period_started(
    prometheus: PrometheusServer, tmp_path: Path
) -> None:
    """The daemon's ledger began three days into the period (a new pod's file): the dry run counts the spend since
    then, as the daemon does, and says that it is partial, since when and for which pool, as the daemon alerts."""
    path = tmp_path / "ledger.sqlite"
    config = _config(tmp_path, prometheus, {"path": str(path)})
    began = _period_start(config) + timedelta(days=3)
    with SqliteLedger(path) as ledger:
        SpendMeter(ledger, timedelta(minutes=10)).observe(_daemon_readings(began))

    document = _recommend(config, tmp_path / "out")

    (budget,) = document["budgets"]
    assert budget["spend_known"] is True
    assert budget["spent_period_usd"] == pytest.approx(UNITS * PRICE * (AT - began).total_seconds() / 3600.0, abs=0.01)
    assert budget["spend_complete"] is False
    assert budget["spend_recorded_since"] == began.isoformat()
    assert budget["pools_recorded_late"] == [{"pool_id": POOL, "first_record": began.isoformat()}]
    assert f"{POOL} (first record {began.isoformat()})" in budget["spend_partial"]
    assert f"the ledger at {path}" in budget["spend_partial"]
    assert json.loads((tmp_path / "out" / "recommendation.json").read_text())["budgets"][0] == budget
    [warning] = [w for w in document["warnings"] if w.startswith("budget research:")]
    assert warning == f"budget research: spent this period is partial: {budget['spend_partial']}"
    markdown = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    row = (
        f"| research | {budget['spent_period_usd']} (partial: recorded whole since {began.isoformat()}; late: {POOL}) |"
    )
    assert row in markdown
    assert warning in markdown


def test_the_report_shows_the_peak_the_planner_planned_on(without_ledger_file: Run) -> None:
    document = without_ledger_file.document
    (pool,) = document["pools"]
    (group,) = document["groups"]  # the three tenants share the pool: planned on their summed demand
    assert group["members"] == sorted(TENANTS) and group["pools"] == [POOL]
    level = f"{group['service_level']:g}"
    cited = re.search(rf"{re.escape(group['name'])}: q{level} peak ([0-9.e+]+),", pool["why"])
    assert cited is not None, pool["why"]
    assert group["forecast"]["peak"][level] == pytest.approx(float(cited.group(1)), rel=1e-5)
    for entry in [group, *document["classes"]]:
        forecast = entry["forecast"]
        assert forecast["peak_steps"] <= len(forecast["quantiles"][level])  # the lead time and a tick
        for q, peak in forecast["peak"].items():
            assert peak >= forecast["per_step_max"][q]
            assert forecast["per_step_max"][q] == max(forecast["quantiles"][q][: forecast["peak_steps"]])
    markdown = (without_ledger_file.out / "report.md").read_text(encoding="utf-8")
    together = markdown.split("## Demand classes planned together", 1)[1].split("\n## ", 1)[0]
    (row,) = [line for line in together.splitlines() if line.startswith(f"| {group['name']} |")]
    assert f"q{level}: {group['forecast']['peak'][level]:.1f}" in row
    assert "| planned peak by quantile | peak over | highest one-step quantile |" in markdown

"""``leadtime recommend`` projects a budget shared with other agents (``remote_pools``) as the daemon does: with what
the other agents keep reserved in the PostgreSQL ledger, read as a role that may only SELECT, and without the
deployment's own standing reservations, which its daemon makes under its Lease's name
(``daemon.leader_election.lease_name``, here ``west-agent``).

The pool holds 20 units since the period began; the cap leaves room for a few more. Another deployment (``b-east``'s,
whose Lease is named ``leadtime``, as every install's is by default) keeps 100,000 USD reserved for the units it
holds: the dry run alerts the projected overspend and plans no scale-up, as the daemon would. The deployment's own
standing reservation (300,000 USD) changes nothing: it is the pool's units, which the planner counts itself."""

from __future__ import annotations

import math
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
from agent.ledger.reservations import ReservationRequest
from agent.planning.budget import Budget, Period
from config import load_settings
from models.clock import SimulatedClock
from tests.ledger.test_postgres_read_only import reader_role
from tests.postgres.fixtures import Database
from tests.prometheus.server import PrometheusServer
from tests.prometheus.test_recommend import WritesForbidden, write_config

pytestmark = pytest.mark.xdist_group("prometheus")
AT = datetime(2020, 5, 8, 4, 0, tzinfo=UTC)  # a week into the trace
POOL = "a100-on-demand"
PRICE = 8 * 3.67  # USD per unit-hour
UNITS = 20  # what the pool held since the period began, and holds now
CAP = 500_000.0  # the budget research's monthly cap (``write_config``)
TICK = timedelta(minutes=5)
OWN = f"west-agent (units held of {POOL})"  # the daemon's standing reservations' holder
OTHERS = "leadtime (units held of b-east)"


def _config(tmp_path: Path, server: PrometheusServer, reader: Database) -> Path:
    config = write_config(tmp_path, server, remote_pools=["b-east"])
    raw: dict[str, Any] = yaml.safe_load(config.read_text(encoding="utf-8"))
    raw["ledger"] = {"backend": "postgresql", "url": reader.url, "sslmode": "disable"}
    raw["daemon"] = {"leader_election": {"lease_name": "west-agent"}}
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return config


def _recommend(config: Path, out: Path) -> dict[str, Any]:
    settings = load_settings(config)
    cluster = SimulatedCluster(settings.pool_specs(), SimulatedClock(AT), initial_units={POOL: UNITS})
    return recommend(settings, str(config), out, AT, WritesForbidden(cluster), pool_state_source="test")


def _reserve(database: Database, period: tuple[datetime, datetime], holder: str, amount_usd: float) -> None:
    with PostgresLedger(database.url, database.password) as ledger:
        request = ReservationRequest("research", (POOL,), *period, math.inf, amount_usd, holder, timedelta(hours=1))
        assert ledger.reserve(request, AT - TICK).granted


def _overspends(document: dict[str, Any]) -> list[str]:
    return [a["summary"] for a in document["alerts"] if a["kind"] == "projected-overspend"]


def _ledger_read_by_recommend(
    server: PrometheusServer, database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Period]:
    """The configuration, and the budget's period, of a dry run reading a ledger in which the daemon recorded the
    pool at ``UNITS`` every tick of the period, as a role that may only SELECT."""
    PostgresLedger(database.url, database.password).close()  # the schema, for the reader's grants
    reader = reader_role(database)
    monkeypatch.setenv("LEADTIME_LEDGER_PASSWORD", reader.password)
    config = _config(tmp_path, server, reader)
    (budget,) = load_settings(config).budgets
    period = Budget.from_settings(budget).period(AT)
    with PostgresLedger(database.url, database.password) as ledger:
        ticks = int((AT - period.start) / TICK)
        SpendMeter(ledger, timedelta(minutes=10)).observe(
            [PoolReading(POOL, period.start + i * TICK, UNITS, PRICE) for i in range(ticks)]
        )
    return config, period


def test_recommend_projects_the_other_agents_reservations_and_not_its_own(
    prometheus: PrometheusServer, postgres_database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, period = _ledger_read_by_recommend(prometheus, postgres_database, tmp_path, monkeypatch)

    alone = _recommend(config, tmp_path / "alone")
    assert alone["pools"][0]["recommended_units"] > UNITS  # the cap leaves room for a scale-up
    assert _overspends(alone) == []

    _reserve(postgres_database, (period.start, period.end), OWN, 300_000.0)
    own = _recommend(config, tmp_path / "own")
    assert own["pools"][0]["recommended_units"] == alone["pools"][0]["recommended_units"]
    assert _overspends(own) == []

    _reserve(postgres_database, (period.start, period.end), OTHERS, 100_000.0)
    shared = _recommend(config, tmp_path / "shared")
    assert shared["pools"][0]["recommended_units"] == UNITS  # no scale-up under the broken cap
    [overspend] = _overspends(shared)
    assert "of which 100,000.00 USD is reserved by the other agents sharing the budget" in overspend
    with PostgresLedger(postgres_database.url, postgres_database.password) as ledger:  # read, never written
        assert ledger.reserved("research", AT) == pytest.approx(400_000.0)


def test_recommend_grants_a_scale_up_only_the_room_the_ledgers_reservations_leave(
    prometheus: PrometheusServer, postgres_database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other agents' reservations leave the cap unbroken but room for fewer units than the trim allows: the
    daemon's reservation is granted only what the ledger's headroom fits (the cap less the spend recorded and every
    live reservation, its own standing one for the units it holds included), and so is the dry run's."""
    config, period = _ledger_read_by_recommend(prometheus, postgres_database, tmp_path, monkeypatch)
    per_unit = PRICE * (period.end - AT).total_seconds() / 3600.0  # a unit reserved to the period's end
    _reserve(postgres_database, (period.start, period.end), OWN, UNITS * per_unit)
    alone = _recommend(config, tmp_path / "alone")
    others = 1.5 * per_unit
    _reserve(postgres_database, (period.start, period.end), OTHERS, others)

    shared = _recommend(config, tmp_path / "shared")

    (budget,) = shared["budgets"]
    headroom = CAP - budget["spent_period_usd"] - UNITS * per_unit - others
    assert shared["pools"][0]["recommended_units"] == UNITS + math.floor(headroom / per_unit)
    assert UNITS < shared["pools"][0]["recommended_units"] < alone["pools"][0]["recommended_units"]
    assert _overspends(shared) == []
    assert "budget 'research' (shared cap) -1: 22" in shared["pools"][0]["why"]

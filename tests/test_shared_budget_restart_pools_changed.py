"""A deployment restarted with another list of pools keeps its predecessor's standing reservations as its own.

West and east share the budget ``team`` (90,000 USD a month) and each hold 8 units from 2024-02-10 00:00. At 01:00
west is rolled out with a spot pool added to the deployment and to the budget, and restarted (the cloud still
holding its 8 units). The predecessor's standing reservation is named for the old list of pools
(``west (units held of west)``); the new agent's is ``west (units held of west, west-spot)``. The old one is still
west's: the new agent neither counts it as another agent's (a projected overspend of 61,322.67 USD "reserved by the
other agents", and no scale-up, for the hour it takes to expire) nor reserves beside it, but replaces it in its first
tick and grants the spot pool the 4 units that the demand's rise to 96 chips at 01:00 needs beyond what west's 8 busy
units run, as it would have before other agents' reservations were projected.
In memory (one ledger both agents write) and on PostgreSQL (a real server, each agent its own connection)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest

from agent.ledger.base import Ledger
from agent.ledger.postgres import PostgresLedger
from agent.ledger.reservations import Reservations, StandingHolder
from models import AlertKind
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database

START = datetime(2024, 2, 10, tzinfo=UTC)
RESTART = START + timedelta(hours=1)
CAP = 90_000.0
KEYS = ["team", "team@2024-02-01T00:00:00+00:00"]  # February's keys


def _restart_with_a_pool_added(write_trace: TraceWriter, ledgers: rig.Ledgers, west_after: Ledger) -> None:
    """West and east tick an hour; west restarts on ``west_after`` with a spot pool added and ticks once with east."""
    history = (START - timedelta(hours=2)).isoformat()
    west_trace = write_trace({"train": [64.0] * 35 + [96.0] * 61}, start=history, name="west.csv")
    east_trace = write_trace({"train": [64.0] * 96}, start=history, name="east.csv")
    west_config = rig.shared_budget_config("west", "east", monthly_cap_usd=CAP)
    west = rig.member(west_config, "west", west_trace, ledgers[0], START, units=8)
    east = rig.member(rig.shared_budget_config("east", "west", monthly_cap_usd=CAP), "east", east_trace, ledgers[1],
                      START, units=8)  # fmt: skip
    now = START
    while now < RESTART:
        rig.tick([west, east], now)
        now += timedelta(minutes=5)
    assert isinstance(ledgers[0], Reservations)
    before = ledgers[0].reserved_by_others(KEYS, now, "east (units held of east)")
    assert before > 0.0  # the predecessor's standing reservation, live at the restart

    rolled_out = copy.deepcopy(west_config)
    rolled_out["pools"].append(dict(rolled_out["pools"][0], id="west-spot", tier="spot"))
    rolled_out["budgets"][0]["pools"] = ["west", "west-spot"]
    west = rig.member(rolled_out, "west", west_trace, west_after, now, units=8)  # the cloud still holds 8
    report = rig.tick([west, east], now)["west"]

    overspends = [a.summary for a in report.alerts if a.kind is AlertKind.PROJECTED_OVERSPEND]
    assert overspends == []
    assert [(r.pool_id, r.from_units, r.to_units) for r in report.plan.resizes] == [("west-spot", 0, 4)]
    # the predecessor's reservation was replaced: all of west's standing reservations are under the new name
    deployment = StandingHolder("west", ("west", "west-spot"))
    assert isinstance(west_after, Reservations)
    east_holds = west_after.reserved_by_others(KEYS, now, deployment)
    assert east_holds > 0.0
    assert west_after.reserved_by_others(KEYS, now, deployment.label) == pytest.approx(east_holds)


def test_in_memory(write_trace: TraceWriter) -> None:
    ledgers = rig.memory_ledgers()
    _restart_with_a_pool_added(write_trace, ledgers, ledgers[0])


@contextmanager
def _connection(database: Database) -> Iterator[PostgresLedger]:
    ledger = PostgresLedger(database.url, database.password)
    try:
        yield ledger
    finally:
        ledger.close()


@POSTGRES
def test_on_postgresql(write_trace: TraceWriter, postgres_database: Database) -> None:
    with rig.postgres_ledgers(postgres_database) as ledgers, _connection(postgres_database) as west_after:
        _restart_with_a_pool_added(write_trace, ledgers, west_after)

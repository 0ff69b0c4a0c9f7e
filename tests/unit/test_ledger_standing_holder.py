"""Which standing reservations are a deployment's own (``StandingHolder``), whatever list of pools names them: the same
answer from the in-memory, SQLite and PostgreSQL ledgers (PostgreSQL on a real server, a new database per test), in
what the other agents hold (``reserved_by_others``) and in what a commit replaces (``replacing_holder``).

The deployment is ``leadtime`` running ``west`` and ``west-spot`` (``west`` was ``west-old`` before a rename).
Another install in another cluster names its Lease ``leadtime`` too, and runs ``east``, once named ``east-old``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent.budget_watch import BudgetWatch
from agent.ledger import InMemoryLedger
from agent.ledger.postgres import PostgresLedger
from agent.ledger.reservations import ReservationRequest, Reservations, StandingHolder
from agent.ledger.sqlite import SqliteLedger
from config import settings_from_mapping
from tests.postgres.fixtures import POSTGRES, Database

T0 = datetime(2024, 2, 1, 0, 5, tzinfo=UTC)
PERIOD = (datetime(2024, 2, 1, tzinfo=UTC), datetime(2024, 3, 1, tzinfo=UTC))
DEPLOYMENT = StandingHolder("leadtime", ("west", "west-spot"), ("west-old",))
# holder -> amount, and whether it is the deployment's
HELD = {
    "leadtime (units held of west, west-spot)": (100.0, True),  # this agent's own, made under its label
    "leadtime (units held of west)": (200.0, True),  # the predecessor's, before west-spot was added
    "leadtime (units held of west-old)": (400.0, True),  # the predecessor's, before west was renamed
    "leadtime (units held of east, west)": (800.0, True),  # a predecessor that ran east too, before a split
    "leadtime (units held of east)": (1.0, False),  # another install, named the same
    "leadtime (units held of east-old)": (2.0, False),  # its predecessor
    "other (units held of west)": (4.0, False),  # named for another deployment
    "leadtime-b (units held of west)": (8.0, False),
    "leadtime (units held of west-spot-2)": (16.0, False),  # a pool id only beginning like one of ours
    "leadtime": (32.0, False),  # a scale-up, named for the Lease alone: any install's
}
OTHERS = sum(amount for amount, own in HELD.values() if not own)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgresql", marks=POSTGRES)])
def book(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Reservations]:
    if request.param == "memory":
        yield InMemoryLedger()
        return
    if request.param == "postgresql":
        database: Database = request.getfixturevalue("postgres_database")
        with PostgresLedger(database.url, database.password) as postgres:
            yield postgres
        return
    sqlite = SqliteLedger(tmp_path / "ledger.sqlite")
    yield sqlite
    sqlite.close()


def ask(holder: str, amount: float) -> ReservationRequest:
    return ReservationRequest("team", ("west", "east"), *PERIOD, 1e9, amount, holder, timedelta(minutes=10))


def test_the_deployments_standing_reservations_are_its_own_whatever_pools_they_name(book: Reservations) -> None:
    book.reserve_many([ask(holder, amount) for holder, (amount, _) in HELD.items()], T0)
    assert book.reserved_by_others(["team"], T0, DEPLOYMENT) == pytest.approx(OTHERS)
    # by its label alone, the predecessors' count as the other agents'
    assert book.reserved_by_others(["team"], T0, DEPLOYMENT.label) == pytest.approx(OTHERS + 1400.0)


def test_a_commit_replaces_every_standing_reservation_of_the_deployment_and_no_other(book: Reservations) -> None:
    book.reserve_many([ask(holder, amount) for holder, (amount, _) in HELD.items()], T0)
    book.reserve_many([ask(DEPLOYMENT.label, 50.0)], T0, replacing_holder=DEPLOYMENT)
    assert book.reserved("team", T0) == pytest.approx(OTHERS + 50.0)
    assert book.reserved_by_others(["team"], T0, DEPLOYMENT) == pytest.approx(OTHERS)


def test_a_remote_pools_previous_ids_do_not_make_its_reservations_this_deployments() -> None:
    """West's budget counts the spend east recorded as ``east-old`` (``remote_previous_ids``); east's predecessor's
    standing reservation under that id is still east's."""
    raw = {
        "demand_classes": [{"name": "train"}],
        "pools": [{"id": "west", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 4, "lead_time": "10m",
                   "price_per_unit_hour_usd": 8.0, "serves": ["train"], "previous_ids": ["west-old"]}],
        "budgets": [{"name": "team", "monthly_cap_usd": 1e9, "pools": ["west"], "remote_pools": ["east"],
                     "remote_previous_ids": {"east": ["east-old"]}}],
    }  # fmt: skip
    settings = settings_from_mapping(raw, source="west config")
    ledger = InMemoryLedger()
    watch = BudgetWatch(settings, {p.pool_id: p for p in settings.pool_specs()}, ledger, holder="leadtime")
    ledger.reserve_many(
        [ask("leadtime (units held of east-old)", 2.0), ask("leadtime (units held of west-old)", 4.0)], T0
    )
    assert watch.reserver is not None
    assert watch.reserver.held_elsewhere(T0) == {"team": pytest.approx(2.0)}

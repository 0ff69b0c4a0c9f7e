"""A tick another agent records while this agent reads the budget is never left out of its reading.

Each reservation is counted from where its pools' recorded spend ends (``agent.ledger.reservation_spans``), and a
reading is two steps: the spend recorded, and what the other agents hold. Read in that order, a tick east recorded
between the two was in neither: not in the spend read before it, and the reservation read after it counted from its
end (west's hourly reading 5.33 USD short: 8 units for one 5-minute tick). The reservations are now read first: a
tick recorded between the two is counted twice (as it was wherever it fell before the count from the record), never
missed, and one recorded before or after both is counted once.

West and east each hold 8 units at 8 USD a unit-hour under an hourly cap, on two connections to one real PostgreSQL
ledger; east ticks at 12:00 (its reservation from then) and records its tick of 12:05 while west reads at 12:05."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from models import LedgerEntry
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database

pytestmark = POSTGRES

START = datetime(2024, 1, 15, 12, tzinfo=UTC)
TICK = timedelta(minutes=5)
NOW = START + TICK
FLEET = 8
EAST_TICK_USD = FLEET * rig.UNIT_HOUR_USD * (TICK / timedelta(hours=1))  # 5.33 USD


HOUR_OF_EAST_USD = FLEET * rig.UNIT_HOUR_USD  # east's units from 12:00 to the hour's end, recorded or reserved


def _west_reads(write_trace: TraceWriter, database: Database, monkeypatch: pytest.MonkeyPatch, when: str) -> float:
    """West's reading of the hour at 12:05 (the spend recorded and what the other agents hold to the hour's end),
    east recording its 12:05 tick ``when``: before west reads, between the two steps of west's reading, or after."""
    trace = write_trace({"train": [64.0] * 60}, start=(START - timedelta(hours=2)).isoformat())
    with rig.postgres_ledgers(database) as ledgers:
        west, east = (
            rig.member(rig.shared_budget_config(own, other, hourly_cap_usd=1e6), own, trace, ledger, START, FLEET)
            for ledger, (own, other) in zip(ledgers, rig.PAIRS, strict=True)
        )
        rig.tick([west, east], START)  # both record from 12:00 and reserve their units from 12:00

        def record() -> None:
            ledgers[1].record(LedgerEntry("east", START, NOW, FLEET, EAST_TICK_USD))

        watch, steps = west.agent.budget_watch, []
        assert watch.reserver is not None

        def step(read: Callable[..., Any]) -> Callable[..., Any]:
            def reading(*args: Any, **kwargs: Any) -> Any:
                steps.append(read)
                if when == "between" and len(set(steps)) == 2 and steps.count(read) == 1:
                    record()  # once the first step has read, before the second does
                return read(*args, **kwargs)

            return reading

        monkeypatch.setattr(watch.meter, "budget_spend", step(watch.meter.budget_spend))
        monkeypatch.setattr(watch.reserver, "held_elsewhere_this_hour", step(watch.reserver.held_elsewhere_this_hour))
        if when == "before":
            record()
        [spend] = watch.spend(NOW)
        if when == "after":
            record()
    return spend.spent_hour_usd + spend.committed_elsewhere_hour_usd


@pytest.mark.parametrize(
    ("when", "counted"),
    [("before", HOUR_OF_EAST_USD), ("after", HOUR_OF_EAST_USD), ("between", HOUR_OF_EAST_USD + EAST_TICK_USD)],
)
def test_a_tick_recorded_while_another_agent_reads_is_never_missed(
    write_trace: TraceWriter, postgres_database: Database, monkeypatch: pytest.MonkeyPatch, when: str, counted: float
) -> None:
    assert _west_reads(write_trace, postgres_database, monkeypatch, when) == pytest.approx(counted)

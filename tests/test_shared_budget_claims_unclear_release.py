"""A release whose call gave no clear answer keeps its claim: the cloud may carry it out.

West and east each hold 8 units (4 busy, 4 idle) of a pool in a budget they share, whose monthly cap the two fleets
together break by 3 units (``tests.test_shared_budget_claims_hourly_second_budget``, with no second budget). At
12:10 west's release of 3 units reaches the cloud, which carries it out, but its call fails: the answer times out
(the adapters give that as a ``TransientActuatorError``, like a refusal a retry may fix) or cannot be read (an error
no adapter translates, failing the tick). The failed release lost its claim: east, ticking after west, read west's
units as staying and released 3 more (6 where 3 were needed), and west bought 3 back (5 -> 8) at 12:20. A release's
call with no clear answer (``ActionResult.unclear``) now counts as sent for its claim and its mark: east releases
nothing. A release refused that way tick after tick, the cloud carrying out none of them, counts so only until the
pool's changes have kept failing for its lead time (10 minutes): east then sheds for its units.

Run on two connections to one real PostgreSQL ledger, west ticking first at each instant."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from models import ActionResult, LedgerEntry, TransientActuatorError
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database
from tests.test_shared_budget_claims_hourly_second_budget import (
    BUSY,
    TEAM_NEEDED,
    _config,
    _released,
)
from tests.test_shared_budget_shed_once import FLEET, SEEDED_USD, START, TICK

pytestmark = POSTGRES

SETTLED = START + 2 * TICK  # the idle units are idle for the 10-minute window from here


def _run(
    write_trace: TraceWriter, database: Database, how: str, ticks: int = 6
) -> tuple[dict[datetime, int | None], dict[datetime, int], dict[datetime, tuple[int, int]], list[str]]:
    """What west (``None``: its tick failed) and east release at each tick, and their pools' targets after it, west's
    release calls failing as ``how`` says; and the keys of west's calls that failed."""
    trace = write_trace({"train": [BUSY * 8.0] * 80}, start=(START - timedelta(hours=2)).isoformat())
    west_released: dict[datetime, int | None] = {}
    east_released: dict[datetime, int] = {}
    units: dict[datetime, tuple[int, int]] = {}
    failed: list[str] = []
    with rig.postgres_ledgers(database) as ledgers:
        ledgers[0].record(LedgerEntry("west", START - timedelta(hours=125), START, 1, SEEDED_USD))
        west = rig.member(_config("west", "east", []), "west", trace, ledgers[0], START, FLEET)
        east = rig.member(_config("east", "west", []), "east", trace, ledgers[1], START, FLEET)
        cluster = west.cluster
        resize = cluster.resize

        def resize_answered_unclearly(pool_id: str, to_units: int, key: str) -> ActionResult:
            if to_units >= FLEET or (how != "refused" and failed):
                return resize(pool_id, to_units, key)
            failed.append(key)
            if how == "refused":  # the cloud carries out none of them
                raise TransientActuatorError(pool_id, "HTTP 503: the service is unavailable")
            result = resize(pool_id, to_units, key)  # the cloud takes the change; its answer is lost
            if how == "timeout":
                raise TransientActuatorError(pool_id, f"Read timeout on endpoint URL (to {to_units})")
            raise RuntimeError(f"the response to {result.key} could not be parsed")

        cluster.resize = resize_answered_unclearly  # type: ignore[method-assign]
        for i in range(ticks):
            now = START + i * TICK
            for one in (west, east):
                one.cluster.serve(now, {"train": BUSY * 8.0})
                one.clock.set(now)
            try:
                west_released[now] = _released(west.agent.run_once(now).plan)
            except RuntimeError:
                west_released[now] = None
            east_released[now] = _released(east.agent.run_once(now).plan)
            units[now] = (west.cluster.list_pools()[0].target_units, east.cluster.list_pools()[0].target_units)
    return west_released, east_released, units, failed


@pytest.mark.parametrize("how", ["timeout", "untranslated"])
def test_a_release_carried_out_whose_call_failed_keeps_its_claim(
    write_trace: TraceWriter, postgres_database: Database, how: str
) -> None:
    west_released, east_released, units, failed = _run(write_trace, postgres_database, how)
    assert len(failed) == 1, failed
    assert west_released[SETTLED] == (TEAM_NEEDED if how == "timeout" else None), west_released
    assert units[SETTLED] == (FLEET - TEAM_NEEDED, FLEET), units  # (5, 5) before: east shed too
    assert sum(east_released.values()) == 0, east_released
    assert all(u == (FLEET - TEAM_NEEDED, FLEET) for at, u in units.items() if at >= SETTLED), units  # 8 at 12:20


def test_a_release_refused_for_the_pools_lead_time_no_longer_keeps_its_claim(
    write_trace: TraceWriter, postgres_database: Database
) -> None:
    _, east_released, units, failed = _run(write_trace, postgres_database, "refused", ticks=5)
    assert len(failed) == 3, failed  # 12:10, 12:15, 12:20: the cloud carried out none
    lead_time = timedelta(minutes=10)
    assert east_released[SETTLED] == east_released[SETTLED + TICK] == 0, east_released  # it may have been carried out
    assert east_released[SETTLED + lead_time] == TEAM_NEEDED, east_released  # failing for the lead time: refused
    assert units[START + 4 * TICK] == (FLEET, FLEET - TEAM_NEEDED), units

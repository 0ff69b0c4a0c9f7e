"""An hourly budget counts a pool of this agent not read at the units the planner counts, and one with no price at
nothing, when it asks whether a claimed release is needed for its next hour.

As ``tests.test_shared_budget_claims_hourly_second_budget``: west's pool ``west`` is in ``team`` (shared with east, a
monthly cap the two fleets break by 3 units) and in ``lab`` (shared with a pool ``south`` no agent here runs, an
hourly cap with room for west's whole fleet and 5 units more), east ticking between west's planning and its claim.
West also runs ``west-b`` (2 units, demand for both) in ``lab``. The next hour's check gave up, and counted ``lab`` as
needing the release, where ``west-b`` was not read at that tick (the planner counts it at the units last known) or
has no price (an on-premises pool: it has no caps to read its cost from): west kept its whole release, and west and
east both released 3 units at 12:10 (6 where 3 were needed). West now releases nothing, and east the 3.

Run on two connections to one real PostgreSQL ledger."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

import pytest

from agent.budget_reserve import Reserved
from models import AlertKind, CapacityPlan, LedgerEntry, PoolState, TransientActuatorError
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

B_UNITS = 2
SETTLED = START + 2 * TICK  # the idle units are idle for the 10-minute window from here


@pytest.mark.parametrize("west_b", ["unread", "free"])
def test_a_pool_not_read_or_without_a_price_does_not_make_the_hourly_budget_keep_the_release(
    write_trace: TraceWriter, postgres_database: Database, monkeypatch: pytest.MonkeyPatch, west_b: str
) -> None:
    lab = {"name": "lab", "pools": ["west", "west-b"], "remote_pools": ["south"],
           "hourly_cap_usd": (FLEET + B_UNITS + 5) * rig.UNIT_HOUR_USD}  # fmt: skip
    config = _config("west", "east", [lab])
    config["demand_classes"] = [*config["demand_classes"], {"name": "batch"}]
    price = 0.0 if west_b == "free" else 1.0
    pool = {**config["pools"][0], "id": "west-b", "serves": ["batch"], "min_units": B_UNITS, "max_units": B_UNITS,
            "price_per_chip_hour_usd": price}  # fmt: skip
    config["pools"] = [*config["pools"], pool]
    demand = {"train": BUSY * 8.0, "batch": B_UNITS * 8.0}
    trace = write_trace({name: [chips] * 80 for name, chips in demand.items()},
                        start=(START - timedelta(hours=2)).isoformat())  # fmt: skip
    west_released: dict[datetime, int] = {}
    east_released: dict[datetime, int] = {}
    with rig.postgres_ledgers(postgres_database) as ledgers:
        ledgers[0].record(LedgerEntry("west", START - timedelta(hours=125), START, 1, SEEDED_USD))
        west = rig.member(config, "west", trace, ledgers[0], START, FLEET)
        west.cluster.resize("west-b", B_UNITS, "seed")
        east = rig.member(_config("east", "west", []), "east", trace, ledgers[1], START, FLEET)
        watch = west.agent.budget_watch

        def east_ticks_before_west_claims(
            now: datetime, plan: CapacityPlan, states: Mapping[str, PoolState] | None = None,
            reserve: Callable[..., Reserved] = watch.reserve,
        ) -> Reserved:  # fmt: skip
            east.clock.set(now)
            east_released[now] = _released(east.agent.run_once(now).plan)
            return reserve(now, plan, states)

        monkeypatch.setattr(watch, "reserve", east_ticks_before_west_claims)
        for i in range(4):
            now = START + i * TICK
            if west_b == "unread" and now == SETTLED:
                west.cluster.fail_reads("west-b", TransientActuatorError("west-b", "API throttled"))
            east.cluster.serve(now, {"train": BUSY * 8.0})
            west.cluster.serve(now, demand)
            west.clock.set(now)
            report = west.agent.run_once(now)
            west_released[now] = _released(report.plan)
            if west_b == "unread" and now == SETTLED:
                unread = [a.subject for a in report.alerts if a.kind is AlertKind.POOL_UNREADABLE]
                assert unread == ["west-b"], report.alerts
    assert east_released[SETTLED] == TEAM_NEEDED, east_released  # team's shed: west's units not marked yet
    assert west_released[SETTLED] == 0, west_released  # 3 before: lab counted as needing the release
    assert sum(west_released.values()) + sum(east_released.values()) == TEAM_NEEDED, (west_released, east_released)

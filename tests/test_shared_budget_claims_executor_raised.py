"""An executor that raises part-way keeps the claims of the releases it sent before it raised.

West and east each hold 8 units (4 busy, 4 idle) of a pool in a budget they share, whose monthly cap the two fleets
together break by 3 units (``tests.test_shared_budget_shed_once``); west also runs a pool ``west-spare`` in no budget,
holding its 4 units of headroom, whose demand grows at 12:10. At 12:10 west releases 3 units of its budget's pool
(sent first: the plan's resizes go by pool) and grows the spare pool, and that resize raises an error no adapter
translates (once), failing the tick from inside the executor. The failure took back every claim the tick made, the
one of the release already sent too: east, ticking after west, counted west's 8 units as staying and released 3
units more at 12:10 (6 where 3 were needed), and west bought 3 back (5 -> 8) at 12:20. The claims of the releases
the executor carried out before it raised now stay (``BudgetWatch.executed`` judges what it did until then); those
of the releases it did not carry out are taken back, as before.

Run on two connections to one real PostgreSQL ledger, west ticking first at each instant."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from actuators import SimulatedCluster
from agent.ledger.base import Ledger
from agent.loop import Agent, AgentParts
from agent.notify import RecordingNotifier
from agent.sources.trace import TraceSource, read_trace
from config import settings_from_mapping
from forecasting.factory import build_forecaster
from models import ActionResult, LedgerEntry, PoolState, Resize
from models.clock import SimulatedClock
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database
from tests.test_shared_budget_shed_once import CASES, FLEET, SEEDED_USD, SETTLED, START, TICK

pytestmark = POSTGRES

BUSY = 4
SPARE = FLEET - BUSY  # the units of west's pool in no budget: its headroom, no demand using them until 12:05
GROWN = 2  # the units its demand from 12:10 needs beyond them, bought at once
BATCH = 16.0  # the chips of demand on it from 12:10: 2 units more, bought at once
CAPS, NEEDED = CASES["monthly"]


class SpareResizeRaisesOnce:
    """West's actuator: its simulated cluster, whose first resize of ``west-spare`` raises as a defect in an adapter
    would (an error the executor does not translate), its request unsent."""

    def __init__(self, cluster: SimulatedCluster) -> None:
        self._cluster = cluster
        self.raised: list[str] = []

    def list_pools(self) -> Sequence[PoolState]:
        return self._cluster.list_pools()

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        if pool_id == "west-spare" and not self.raised:
            self.raised.append(key)
            raise RuntimeError(f"resize of {pool_id} to {to_units}: the response could not be read")
        return self._cluster.resize(pool_id, to_units, key)


def _config(own: str, other: str, spare: bool) -> dict[str, Any]:
    config = rig.shared_budget_config(own, other, **CAPS)
    config["planner"] = {"headroom_units": FLEET - BUSY}  # the idle units are the planner's: it keeps them
    if spare:
        config["demand_classes"] = [*config["demand_classes"], {"name": "batch"}]
        pool = {**config["pools"][0], "id": f"{own}-spare", "serves": ["batch"]}
        config["pools"] = [*config["pools"], pool]
    return config


def _member(own: str, other: str, trace: Path, ledger: Ledger) -> rig.Member:
    """As ``rig.member``, west with its spare pool holding ``SPARE`` units and the actuator raising once."""
    spare = own == "west"  # east runs its budget's pool only
    settings = settings_from_mapping(_config(own, other, spare), source=f"{own} config")
    clock = SimulatedClock(START)
    cluster = SimulatedCluster(settings.pool_specs(), clock, {own: FLEET, **({f"{own}-spare": SPARE} if spare else {})})
    actuator = SpareResizeRaisesOnce(cluster) if spare else cluster
    parts = AgentParts(TraceSource(read_trace(trace)), build_forecaster(settings.forecast), actuator, ledger,
                       RecordingNotifier())  # fmt: skip
    return rig.Member(own, Agent(settings, parts, holder=own), clock, cluster)


def _released(resizes: Sequence[Resize], pool_id: str) -> int:
    return sum(r.from_units - r.to_units for r in resizes if r.pool_id == pool_id and not r.is_scale_up)


def test_the_releases_sent_before_the_executor_raised_keep_their_claims(
    write_trace: TraceWriter, postgres_database: Database
) -> None:
    start = START - timedelta(hours=2)
    batch = [0.0 if start + i * TICK < SETTLED - TICK else GROWN * 8.0 for i in range(80)]  # read at the next tick
    trace = write_trace({"train": [BUSY * 8.0] * 80, "batch": batch}, start=start.isoformat())
    west_units: dict[datetime, dict[str, int]] = {}  # west's pools' targets after its tick
    east_released: dict[datetime, int] = {}
    failed: list[datetime] = []
    with rig.postgres_ledgers(postgres_database) as ledgers:
        ledgers[0].record(LedgerEntry("west", START - timedelta(hours=125), START, 1, SEEDED_USD))
        west, east = (
            _member(own, other, trace, ledger) for ledger, (own, other) in zip(ledgers, rig.PAIRS, strict=True)
        )
        actuator = west.agent.parts.actuator
        assert isinstance(actuator, SpareResizeRaisesOnce)
        for i in range(5):
            now = START + i * TICK
            batch_now = GROWN * 8.0 if now >= SETTLED - TICK else 0.0
            for one, demand in ((west, {"train": BUSY * 8.0, "batch": batch_now}), (east, {"train": BUSY * 8.0})):
                one.cluster.serve(now, demand)
                one.clock.set(now)
            try:
                west.agent.run_once(now)
            except RuntimeError:
                failed.append(now)
            west_units[now] = {s.pool_id: s.target_units for s in west.cluster.list_pools()}
            east_released[now] = _released(east.agent.run_once(now).plan.resizes, "east")
        east_units = east.cluster.list_pools()[0].target_units

    assert failed == [SETTLED] and len(actuator.raised) == 1, (failed, actuator.raised)
    assert west_units[SETTLED] == {"west": FLEET - NEEDED, "west-spare": SPARE}, west_units  # sent, then it raised
    assert east_released[SETTLED] == 0, east_released  # 3 before: west's claim taken back, its units read as staying
    assert sum(east_released.values()) == 0 and east_units == FLEET, east_released
    assert all(units["west"] >= FLEET - NEEDED for units in west_units.values()), west_units  # 5 -> 8 at 12:20 before
    assert west_units[START + 4 * TICK] == {"west": FLEET - NEEDED, "west-spare": SPARE + GROWN}, west_units

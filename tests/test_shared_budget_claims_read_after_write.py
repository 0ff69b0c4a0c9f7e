"""A release GKE accepted keeps its claim when the look at its operation fails afterwards.

West and east each hold 8 units (4 busy, 4 idle) of a pool in a budget they share, whose monthly cap the two fleets
together break by 3 units (``tests.test_shared_budget_claims_hourly_second_budget``). West's pool is a GKE node pool
under ``move-bounds``: its release at 12:10 goes through the real GKE adapter on the local GKE server, which sends one
write (setAutoscaling, accepted: GKE's autoscaler takes the pool down to the new bounds) and then looks at the
operation it started; that look is refused (a read rate limit, 403, 404). The error said nothing of the write and the
executor counted the writes asked, needing two: the release read as refused, its claim was taken back, east shed 3
more at 12:10 (6 for 3) and west bought them back at 12:20. A write now counts once its call returned, and any error
after it leaves the release unclear: east sheds nothing.

Run on two connections to one real PostgreSQL ledger, west ticking first at each instant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from actuators.gke_node_pool import GkeNodePoolActuator
from config.cloud import NodePoolMapping
from models import ActionResult, LedgerEntry
from models.clock import SimulatedClock
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.contract.harnesses import CLUSTER
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.postgres.fixtures import POSTGRES, Database
from tests.test_shared_budget_claims_hourly_second_budget import BUSY, TEAM_NEEDED, _config, _released
from tests.test_shared_budget_shed_once import FLEET, SEEDED_USD, START, TICK

pytestmark = POSTGRES

SETTLED = START + 2 * TICK  # the idle units are idle for the 10-minute window from here
ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
LOOK_FAILURES = {
    "read rate limit": (429, "Quota exceeded for quota metric 'Read requests' and limit 'Read requests per minute'"),
    "permission": (403, "Permission 'container.operations.get' denied on resource"),
    "not found": (404, "Not found: operation"),
}


@pytest.mark.parametrize("failure", sorted(LOOK_FAILURES))
def test_a_release_whose_operation_cannot_be_read_after_its_write_keeps_its_claim(
    write_trace: TraceWriter, postgres_database: Database, gke_api: FakeGkeApi, failure: str
) -> None:
    gke_api.add_pool("a100", nodes=FLEET, zones=ZONES, autoscaling={"enabled": True, "totalMaxNodeCount": 16})
    clients = google_clients(gke_api.url)
    mapping = NodePoolMapping(pool="west", node_pool="a100", gke_autoscaling="move-bounds")
    gke = GkeNodePoolActuator(
        clients.gke, clients.migs, CLUSTER, [mapping], SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    )
    trace = write_trace({"train": [BUSY * 8.0] * 80}, start=(START - timedelta(hours=2)).isoformat())
    failed: list[str] = []
    west_released: dict[datetime, int] = {}
    east_released: dict[datetime, int] = {}
    units: dict[datetime, tuple[int, int]] = {}
    with rig.postgres_ledgers(postgres_database) as ledgers:
        ledgers[0].record(LedgerEntry("west", START - timedelta(hours=125), START, 1, SEEDED_USD))
        west = rig.member(_config("west", "east", []), "west", trace, ledgers[0], START, FLEET)
        east = rig.member(_config("east", "west", []), "east", trace, ledgers[1], START, FLEET)
        resize = west.cluster.resize

        def through_gke(pool_id: str, to_units: int, key: str) -> ActionResult:
            """West's first release sent by the GKE adapter, the look at its operation refused; the simulated pool
            goes where GKE's autoscaler takes it (the bounds set)."""
            if to_units >= FLEET or failed:
                return resize(pool_id, to_units, key)
            failed.append(key)
            status, message = LOOK_FAILURES[failure]
            gke_api.fail_next(1, status, message, path="/operations/", method="GET")
            try:
                return gke.resize(pool_id, to_units, key)
            finally:
                resize(pool_id, gke_api.pools["a100"].spec["autoscaling"]["totalMaxNodeCount"], key)

        west.cluster.resize = through_gke  # type: ignore[method-assign]
        for i in range(6):
            now = START + i * TICK
            for one in (west, east):
                one.cluster.serve(now, {"train": BUSY * 8.0})
                one.clock.set(now)
            west_released[now] = _released(west.agent.run_once(now).plan)
            east_released[now] = _released(east.agent.run_once(now).plan)
            units[now] = (west.cluster.list_pools()[0].target_units, east.cluster.list_pools()[0].target_units)

    assert len(failed) == 1 and gke_api.calls("POST", ":setAutoscaling") == 1, failed
    assert west_released[SETTLED] == TEAM_NEEDED, west_released
    assert units[SETTLED] == (FLEET - TEAM_NEEDED, FLEET), units  # (5, 5) before: east shed too
    assert sum(east_released.values()) == 0, east_released
    assert all(u == (FLEET - TEAM_NEEDED, FLEET) for at, u in units.items() if at >= SETTLED), units  # (8, 5) before

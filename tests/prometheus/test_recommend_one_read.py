"""``leadtime recommend`` reads the pools once: the document's rows, the tick's plan and its dry-run resizes are all
made from that one read, against a real Prometheus loaded with the Helios trace (``test_recommend``'s scenario).

Recommend read the pools for its rows, and the tick read them again to plan: a pool resized in between (by its
daemon running beside the dry run, a person, the cloud's own autoscaler) was shown at the units of the first read
and planned from those of the second. With 10 units read first and 30 the second time, the row said 10 units held
(action hold, recommended 10) for a budget projected over its cap by the 30 the plan saw (its why ending in "target
30"), where the plan from the 10 it showed is a scale-up (to 25); now it shows 10 and the plan's scale-up from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from actuators.simulated import SimulatedCluster
from agent.commands.recommend import recommend
from config import load_settings
from models import ActionResult, PoolState
from models.clock import SimulatedClock
from tests.prometheus.server import PrometheusServer
from tests.prometheus.test_recommend import AT, write_config

pytestmark = pytest.mark.xdist_group("prometheus")
POOL = "a100-on-demand"


class ResizedAfterItsFirstRead:
    """A simulated pool that another hand sets to ``units`` right after its first read; recommend must not write."""

    def __init__(self, cluster: SimulatedCluster, units: int) -> None:
        self.cluster = cluster
        self.units = units
        self.reads = 0

    def list_pools(self) -> Sequence[PoolState]:
        read = self.cluster.list_pools()
        self.reads += 1
        if self.reads == 1:
            self.cluster.resize(POOL, self.units, "another-hand")
        return read

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        raise AssertionError(f"recommend tried to resize {pool_id} to {to_units}")


def test_the_rows_and_the_plan_come_from_one_read(prometheus: PrometheusServer, tmp_path: Path) -> None:
    config = write_config(tmp_path, prometheus)
    settings = load_settings(config)
    cluster = SimulatedCluster(settings.pool_specs(), SimulatedClock(AT), initial_units={POOL: 10})
    read_side = ResizedAfterItsFirstRead(cluster, 30)

    document = recommend(settings, str(config), tmp_path / "out", AT, read_side, pool_state_source="test")

    (pool,) = document["pools"]
    assert (pool["current_units"], pool["action"]) == (10, "scale-up")  # (10, "hold") before: planned on 30
    recommended = pool["recommended_units"]
    assert recommended == pool["planned_target_units"] > 10
    assert pool["why"].endswith(f"target {recommended}")
    assert document["dry_run"] == [
        {"pool_id": POOL, "to_units": recommended, "key": f"{POOL}@{AT.isoformat()}->{recommended}"}
    ]
    assert [a for a in document["alerts"] if a["kind"] == "projected-overspend"] == []
    assert read_side.reads == 1

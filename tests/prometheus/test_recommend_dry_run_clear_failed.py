"""What README says of a ``->clear-failed`` entry in ``recommendation.json``'s ``dry_run`` list: the removal of the
units the cloud accepted and could not create, sent before the tick plans, at the pool's current target. README said
every entry's ``to_units`` was the pool's ``recommended_units``; this one is not a plan's resize and keeps the
pool's current target (``agent.executor.clear_failed_units``), whatever the plan recommends. The pool is a simulated
cluster's, its demand read from the test Prometheus.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from actuators.simulated import SimulatedCluster
from agent.commands.recommend import recommend
from config import load_settings
from models.clock import SimulatedClock
from tests.prometheus.server import PrometheusServer
from tests.prometheus.test_recommend import AT, write_config

pytestmark = pytest.mark.xdist_group("prometheus")
README = Path(__file__).resolve().parents[2] / "README.md"
POOL = "a100-on-demand"


@pytest.mark.parametrize("units", [10, 56])
def test_a_clear_failed_entry_keeps_the_pools_current_target(
    prometheus: PrometheusServer, tmp_path: Path, units: int
) -> None:
    config = write_config(tmp_path, prometheus)
    settings = load_settings(config)
    cluster = SimulatedCluster(settings.pool_specs(), SimulatedClock(AT), initial_units={POOL: units})
    cluster.resize(POOL, units + 4, "earlier")
    cluster.fail_in_flight(POOL)  # the cloud accepted 4 more units and could not create them

    document = recommend(settings, str(config), tmp_path / "out", AT, cluster, pool_state_source="test")

    (pool,) = document["pools"]
    assert (pool["current_units"], pool["failed_units"]) == (units, 4)
    (entry,) = [e for e in document["dry_run"] if e["key"].endswith("->clear-failed")]
    assert (entry["pool_id"], entry["to_units"]) == (POOL, pool["current_units"])
    page = " ".join(README.read_text(encoding="utf-8").split())
    assert (
        "An entry whose key ends in `->clear-failed` is no plan's resize but the removal of the units the cloud "
        "accepted and could not create (the pool's `failed_units`), sent before the tick plans: its `to_units` is "
        "the pool's current target, its `current_units`, not its `recommended_units`."
    ) in page

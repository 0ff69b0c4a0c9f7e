"""``recommendation.json`` gives an on-prem pool read by its ``capacity_query`` the units that query read as its
``ready_units``, the units the tick planned it on, as its warning and its reason say them; none when the read failed
(the pool is then planned on its ``max_units``, as the alert says). A real Prometheus holds kube-state-metrics' node
series of 40 on-prem nodes (``test_onprem_capacity``'s fixture); the pools' state is a simulated cluster holding
the 40 nodes.

Before, the row gave the pool state's ready units: with the pool's label misspelt in the query, which read 0 while
every node was up, the row said 40 ready units beside a warning that read 0 of its 40 and a reason "available: 0 of
40"; with 10 nodes down or cordoned it said 40 beside "reads 30 of its 40"; and with kube-state-metrics down, no
read at all, it still said 40.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actuators.simulated import SimulatedCluster
from agent.commands.recommend import recommend
from models.clock import SimulatedClock
from tests.prometheus.server import PrometheusServer
from tests.prometheus.test_onprem_capacity import (  # noqa: F401 (fixture)
    MISSPELT,
    NODES,
    ONPREM,
    ONPREM_QUERY,
    SPOT,
    _at,
    _settings,
    cluster_prometheus,
)

pytestmark = pytest.mark.xdist_group("prometheus")


def _onprem_row(server: PrometheusServer, tmp_path: Path, minutes: int, query: str) -> tuple[dict[str, Any], Any]:
    settings = _settings(server.url, tmp_path, capacity_query=query)
    read_side = SimulatedCluster(
        settings.pool_specs(), SimulatedClock(_at(minutes)), initial_units={ONPREM: NODES, SPOT: 0}
    )
    config = tmp_path / "config.yaml"
    config.write_text("# the settings are passed in\n", encoding="utf-8")
    out = tmp_path / f"out-{minutes}"
    document = recommend(settings, str(config), out, _at(minutes), read_side, pool_state_source="test")
    (row,) = [p for p in document["pools"] if p["pool_id"] == ONPREM]
    return row, document


@pytest.mark.parametrize(
    ("minutes", "query", "read"),
    [(10, ONPREM_QUERY, 40), (30, ONPREM_QUERY, 30), (10, MISSPELT, 0)],
    ids=["whole", "ten-nodes-out", "misspelt-label"],
)
def test_the_row_gives_the_units_the_capacity_query_read(
    cluster_prometheus: PrometheusServer,  # noqa: F811
    tmp_path: Path,
    minutes: int,
    query: str,
    read: int,
) -> None:
    row, document = _onprem_row(cluster_prometheus, tmp_path, minutes, query)

    assert row["ready_units"] == read  # 40 before, whatever the query read: the simulated pool's state
    assert f"available: {read} of {NODES}" in row["why"]
    told = [w for w in document["warnings"] if w.startswith(f"on-prem pool {ONPREM}: its")]
    if read < NODES:
        (warning,) = told
        assert f"capacity_query reads {read} of its {NODES} units ready" in warning
    else:
        assert told == []


def test_a_capacity_read_that_failed_gives_no_ready_units(
    cluster_prometheus: PrometheusServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    # kube-state-metrics is down from minute 40 to 50: the query answers nothing, the pool is planned on max_units
    row, document = _onprem_row(cluster_prometheus, tmp_path, 46, ONPREM_QUERY)

    assert row["ready_units"] is None  # 40 before: the simulated pool's state, though nothing was read
    (alert,) = [a for a in document["alerts"] if a["kind"] == "onprem-capacity"]
    assert f"could not be read; planning on its configured {NODES} units" in alert["summary"]

"""The per-pool capacity chart draws, under each pool, the demand of every class the pool may serve: on the
hand-made hybrid fleet of ``test_burst_budget`` (an on-prem node per tenant, a spot pool for both), the panels
name the pools that share that demand, and the report's caption says the grey area is not the pool's own."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from agent.report.simulation import capacity_chart_panels, write_simulation_report
from agent.simulation.results import results_document
from agent.simulation.runner import run_policy
from tests.unit.test_burst_budget import hybrid


def test_each_panel_names_the_pools_that_share_its_demand(tmp_path: Path) -> None:
    settings, trace, window = hybrid(tmp_path, [], {"a": 1.0, "b": 4.0})
    runs = {name: run_policy(settings, trace, window, name) for name in ("static", "oracle")}
    panels, units = capacity_chart_panels(window, runs, settings)
    titles = {title.split(" ")[0]: title for title, _, _ in panels}
    assert titles == {
        "onprem-a": "onprem-a (8 GPUs/unit, lead time 0s); demand it may serve, shared with spot",
        "onprem-b": "onprem-b (8 GPUs/unit, lead time 0s); demand it may serve, shared with spot",
        "spot": "spot (8 GPUs/unit, lead time 10m); demand it may serve, shared with onprem-a, onprem-b",
    }
    assert units == ["GPUs"] * 3
    demand = {title.split(" ")[0]: drawn for title, drawn, _ in panels}
    a, b = window.demand[:, window.classes.index("a")], window.demand[:, window.classes.index("b")]
    np.testing.assert_array_equal(demand["onprem-a"], a)
    np.testing.assert_array_equal(demand["spot"], a + b)  # both classes: more than the spot pool served
    served = np.nansum(runs["oracle"].served_by_pool["spot"])
    assert served < np.nansum(demand["spot"])
    page_path = tmp_path / "report.html"
    document = results_document(settings, "hybrid.yaml", trace, window, runs)
    write_simulation_report(page_path, document, window, runs, settings)
    page = page_path.read_text(encoding="utf-8")
    assert "the grey area is what the pool could be asked for, not what it was given" in page

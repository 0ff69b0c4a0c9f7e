"""The replayed ``actual`` row is what the cluster did, under whatever caps it enforced (its own agent's, perhaps):
the report shows it held to the caps as recorded, neither held by the simulation nor run as if no cap were set,
and marks no saving against it as partly the cap's. On the hand-made hybrid fleet of ``test_burst_budget`` with a
cap too small for the day's bursts, the actual row replays the units the reactive run had ready (a cluster whose
own agent was held to the same cap)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from agent.report.headline import headline_section
from agent.report.hybrid import hybrid_section
from agent.simulation.results import results_document
from agent.simulation.runner import run_actual
from tests.hybrid_capped_runs import HYBRID_CAPPED_GROUP, capped_runs

# the policies' runs are those of every test of this fleet and cap, computed once on one worker
pytestmark = pytest.mark.xdist_group(HYBRID_CAPPED_GROUP)


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    fleet = capped_runs(tmp_path_factory)  # the 150 USD burst budget
    runs = dict(fleet.runs)
    recorded = {pool: units.astype(float) for pool, units in runs["reactive"].ready_units.items()}
    runs["actual"] = run_actual(fleet.settings, fleet.window, recorded)
    return results_document(fleet.settings, "hybrid.yaml", fleet.trace, fleet.window, runs)


def _cells(page: str, policy: str) -> list[str]:
    row = re.search(rf"<tr data-policy='{policy}'>(.*?)</tr>", page)
    assert row is not None, policy
    return re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))


def test_the_actual_row_is_held_to_the_caps_as_recorded(document: dict[str, Any]) -> None:
    head = document["headline"]
    assert head["forecast"]["budget_held_steps"] > 0  # a cap held the forecast run back: the marks are drawn
    actual = next(row for row in head["against"] if row["policy"] == "actual")
    assert actual["budgets_as_recorded"] is True and actual["held_to_budgets"] is False
    page = headline_section(document)
    cells = _cells(page, "actual")
    assert cells[2] == "as recorded"
    assert "†" not in cells[5] and "†" not in cells[6]
    assert _cells(page, "static")[5].endswith(" †")  # static still ran as if no cap were set
    lead = re.search(r"<p class='lead'>(.*?)</p>", page)
    assert lead is not None
    assert f"than actual ({document['policies']['actual']['cost_usd']:,.0f} USD)" in lead.group(1)
    assert "static and oracle are not, and ran as if no cap were set" in page
    assert "actual is what the cluster did, under whatever caps it enforced (as recorded)" in page
    assert "actual are not" not in page and "static, oracle and actual" not in page


def test_the_hybrid_cap_table_shows_the_actual_row_as_recorded(document: dict[str, Any]) -> None:
    caps = document["hybrid"]["rows"]["actual"]["monthly_caps"]["burst"]
    assert caps["as_recorded"] is True
    page = hybrid_section(document["hybrid"])
    row = re.search(r"<tr><td>actual</td><td>burst</td>(.*?)</tr>", page)
    assert row is not None
    assert re.findall(r"<td>(.*?)</td>", row.group(1))[2] == "as recorded"
    assert "static and oracle run as if no cap were set" in page
    assert "actual is what the cluster did, under whatever caps it enforced (as recorded)" in page

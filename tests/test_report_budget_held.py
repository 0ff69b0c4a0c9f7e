"""The report says which runs a budget held: on the hand-made hybrid fleet of ``test_burst_budget`` with a cap
too small for the day's bursts, the forecast and reactive runs are held to it (and held back) while static and
oracle run as if no cap were set. The headline says so next to the figure, marks the savings against the runs
not held, lists the budget alerts of the held runs, and the hybrid section's cap table says who was held to the
cap apart from who stayed within it."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest

from agent.report.headline import headline_section
from agent.report.hybrid import hybrid_section
from agent.simulation.budgets import alerts_raised
from agent.simulation.headline import headline
from agent.simulation.results import results_document
from models import AlertEvent, AlertKind, Severity
from tests.hybrid_capped_runs import HYBRID_CAPPED_GROUP, POLICIES, capped_runs

# the runs are those of every test of this fleet and cap, computed once on one worker
pytestmark = pytest.mark.xdist_group(HYBRID_CAPPED_GROUP)


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    fleet = capped_runs(tmp_path_factory)  # the 150 USD burst budget
    return results_document(fleet.settings, "hybrid.yaml", fleet.trace, fleet.window, dict(fleet.runs))


def _cells(page: str, policy: str) -> list[str]:
    row = re.search(rf"<tr data-policy='{policy}'>(.*?)</tr>", page)
    assert row is not None, policy
    return re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))


def test_the_headline_marks_the_runs_a_budget_held(document: dict[str, Any]) -> None:
    head = document["headline"]
    assert head["forecast"]["held_to_budgets"] is True and head["forecast"]["budget_held_steps"] > 0
    held = {row["policy"]: row["held_to_budgets"] for row in head["against"]}
    assert held == {"reactive": True, "static": False, "oracle": False}
    page = headline_section(document)
    lead = re.search(r"<p class='lead'>(.*?)</p>", page)
    assert lead is not None
    assert "unserved; held back by a budget cap)" in lead.group(1)
    for name in ("static", "oracle"):
        cost = document["policies"][name]["cost_usd"]
        assert f"than {name} ({cost:,.0f} USD, not held to the caps)" in lead.group(1)
        cells = _cells(page, name)
        assert cells[2] == "no" and cells[5].endswith(" †") and cells[6].endswith(" †")
    reactive = _cells(page, "reactive")
    assert reactive[2].startswith("yes: held back at") and not reactive[5].endswith("†")
    assert f"({document['policies']['reactive']['cost_usd']:,.0f} USD)" in lead.group(1)
    assert "static and oracle are not, and ran as if no cap were set" in page
    assert "its savings against the runs not held to the caps (†) are partly the cap" in page


def test_the_budget_alerts_of_the_held_runs_are_listed(document: dict[str, Any]) -> None:
    # The run raised budget-threshold alerts only (they hold nothing back); add the alerts a run raises when a
    # projection stops its scale-ups, grouped as results.json groups them.
    at = datetime(2024, 1, 2, 9, 0, tzinfo=UTC)
    stopped = AlertEvent(
        AlertKind.PROJECTED_OVERSPEND, Severity.CRITICAL, at, "budget burst (monthly)", "Scale-ups are stopped."
    )
    events = [stopped, stopped, AlertEvent(AlertKind.BUDGET_THRESHOLD, Severity.INFO, at, "budget burst", "50%")]
    policies = {name: dict(run) for name, run in document["policies"].items()}
    policies["forecast"]["alerts_raised"] = [*policies["forecast"]["alerts_raised"], *alerts_raised(events)]
    changed = {**document, "policies": policies}
    changed["headline"] = headline(changed)
    page = headline_section(changed)
    assert (
        "<li><b>forecast</b>: projected-overspend, budget burst (monthly), 2 times from 2024-01-02 09:00 UTC: "
        "Scale-ups are stopped.</li>"
    ) in page
    assert "budget-threshold" not in page and page.count("<li>") == 1
    assert "No budget alert held a run back." in headline_section(document)


def test_the_hybrid_cap_table_says_who_was_held_to_the_cap_apart_from_who_stayed_within_it(
    document: dict[str, Any],
) -> None:
    rows = document["hybrid"]["rows"]
    page = hybrid_section(document["hybrid"])
    for name in POLICIES:
        cap = rows[name]["monthly_caps"]["burst"]
        assert cap["held_to_cap"] is (name in ("forecast", "reactive"))
        assert cap["within_cap"] is (cap["peak_spent_usd"] <= 150.0)
        held, within = ("yes" if cap["held_to_cap"] else "no"), ("yes" if cap["within_cap"] else "NO")
        assert (
            f"<tr><td>{name}</td><td>burst</td><td>150</td><td>{cap['peak_spent_usd']:,.0f}</td><td>{held}</td><td>{within}</td>"
            in page
        )
    assert rows["static"]["monthly_caps"]["burst"]["within_cap"] is False  # static spent past the cap

"""With an equal-service comparison the headline's figures come from tuned trials, so whether a cap held a figure
back is read from the trials it rests on, not from the run as configured. On the hand-made hybrid fleet of
``test_burst_budget`` with a 700 USD cap, the forecast policy as configured is never held back, while its figure
at 0.5% unserved rests on a trial at a higher service level that the cap holds back."""

from __future__ import annotations

import re
from typing import Any

import pytest

from agent.report.equal_service import equal_service_section
from agent.report.headline import headline_section
from agent.simulation.equal_service import SERVICE_LEVELS, TARGETS, run_and_compare
from agent.simulation.results import results_document
from agent.simulation.runner import Simulation
from tests.unit.test_burst_budget import hybrid

BUDGET = {"name": "burst", "pools": ["spot"], "monthly_cap_usd": 700.0, "period_start_day": 3, "pacing": "forecast"}
POLICIES = ("forecast", "reactive", "static", "oracle")


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    settings, trace, window = hybrid(tmp_path_factory.mktemp("equal"), [BUDGET], {"a": 1.0, "b": 4.0})
    session = Simulation(settings, trace, window, extra_quantiles=SERVICE_LEVELS)
    runs, comparison = run_and_compare(session, POLICIES, TARGETS)
    return results_document(settings, "hybrid.yaml", trace, window, runs, equal_service=comparison)


def test_the_marks_of_an_equal_service_figure_come_from_the_trials_it_rests_on(document: dict[str, Any]) -> None:
    assert document["policies"]["forecast"]["budget_held_steps"] == 0  # the run as configured: never held back
    head = document["headline"]
    assert head["forecast"]["basis"] == "equal service at 0.5% unserved"
    trials = document["equal_service"]["0.005"]["forecast"]["trials"]
    held = [int(t.get("budget_held_steps", 0)) for t in trials]
    assert max(held) > 0  # a trial the figure rests on was held back
    assert head["forecast"]["budget_held_steps"] == max(held)
    assert head["forecast"]["budget_held_from"] == "trials"
    page = headline_section(document)
    row = re.search(r"<tr class='forecast'>(.*?)</tr>", page)
    assert row is not None
    assert re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))[2] == (
        f"yes: held back at {max(held):,} steps in a run it rests on"
    )
    lead = re.search(r"<p class='lead'>(.*?)</p>", page)
    assert lead is not None and "held back by a budget cap" in lead.group(1)
    static = re.search(r"<tr data-policy='static'>(.*?)</tr>", page)
    assert static is not None and static.group(1).count(" †") == 2


def test_the_equal_service_section_says_which_trial_a_cap_held_back(document: dict[str, Any]) -> None:
    trials = document["equal_service"]["0.005"]["forecast"]["trials"]
    steps = max(int(t.get("budget_held_steps", 0)) for t in trials)
    assert f"held back by a budget cap at {steps:,} steps" in equal_service_section(document["equal_service"])

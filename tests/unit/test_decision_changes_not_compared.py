"""A demand group with no tick compared has no changed fraction: results.json says null and the report says 'not
compared', never 0% (which reads as 'the forecast never changed the decision')."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from agent.report.simulation import write_simulation_report
from agent.simulation.decisions import DecisionChanges, decision_changes
from agent.simulation.results import results_document
from agent.simulation.runner import run_policy
from agent.simulation.window import SimulationWindow
from agent.strict_json import write_json
from tests.unit.test_burst_budget import hybrid
from tests.unit.test_decision_changes import INDEX, SETTINGS, STEP, _outlook


def test_a_group_never_compared_has_no_changed_fraction() -> None:
    window = SimulationWindow(INDEX, ("a",), np.full((4, 1), 10.0), np.zeros((0, 1)), STEP)
    forecast = [_outlook(70.0)] * 4
    last_value = [_outlook(None)] * 4  # no forecast from the last value at any tick: nothing to compare
    (changes,) = decision_changes(SETTINGS, SETTINGS.planner, window, forecast, last_value).values()
    assert changes.summary() == {"ticks": 0, "up": 0, "down": 0, "changed_fraction": None}


def test_results_json_and_the_report_say_not_compared(tmp_path: Path) -> None:
    settings, trace, window = hybrid(tmp_path, [], {"a": 1.0, "b": 4.0})
    runs = {"static": run_policy(settings, trace, window, "static")}
    decisions = {"a": DecisionChanges(ticks=0), "b": DecisionChanges(ticks=4, up=1, down=0)}
    document = results_document(settings, "hybrid.yaml", trace, window, runs, None, decisions)
    write_json(tmp_path / "results.json", document)
    written = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))["forecast_decisions"]
    assert written["a"]["changed_fraction"] is None
    assert written["b"]["changed_fraction"] == 0.25
    write_simulation_report(tmp_path / "report.html", document, window, runs, settings)
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "<tr><td>a</td><td>0</td><td>0</td><td>0</td><td>not compared</td></tr>" in page
    assert "<tr><td>b</td><td>4</td><td>1</td><td>0</td><td>25.0%</td></tr>" in page

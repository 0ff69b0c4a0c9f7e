"""A figure whose cheapest setting tried already leaves less unserved than the target is not at equal service:
the headline (results.json and the report's lead and table) and the equal-service table say it is at its own
share, below the target; a figure interpolated at the target reads as before. The rows are written by the
search's own ``interpolate`` from the trials it would have run."""

from __future__ import annotations

import re
from typing import Any

from agent.report.equal_service import ALREADY_MET, equal_service_section
from agent.report.headline import headline_section
from agent.simulation.equal_service import Trial, interpolate
from agent.simulation.headline import headline

TARGET = 0.005
# Forecast bracketed by two service levels, so interpolated at the target: 20,000 USD at 0.5% unserved.
FORECAST = interpolate([Trial(0.6, 19000.0, 0.007), Trial(0.7, 21000.0, 0.003)], TARGET, "service_level")
# Reactive's cheapest headroom already leaves 0.05% unserved, a tenth of the target.
REACTIVE = interpolate([Trial(0, 23949.0, 0.0005), Trial(1, 30000.0, 0.0001)], TARGET, "headroom_units")
# Reactive bracketed too: 25,000 USD at the target.
REACTIVE_AT_TARGET = interpolate([Trial(0, 22000.0, 0.009), Trial(1, 28000.0, 0.001)], TARGET, "headroom_units")
ORACLE = {"cost_usd": 18000.0, "unserved_fraction": 0.0}


def _document(forecast: dict[str, Any], reactive: dict[str, Any]) -> dict[str, Any]:
    comparison = {str(TARGET): {"forecast": forecast, "reactive": reactive, "oracle": ORACLE}}
    policies = {
        name: {"cost_usd": row["cost_usd"], "unserved_fraction": row["unserved_fraction"]}
        for name, row in comparison[str(TARGET)].items()
    }
    document: dict[str, Any] = {"policies": policies, "equal_service": comparison, "config": {"settings": {}}}
    document["headline"] = headline(document)
    return document


def _lead(document: dict[str, Any]) -> str:
    lead = re.search(r"<p class='lead'>(.*?)</p>", headline_section(document))
    assert lead is not None
    return lead.group(1)


def _ratios(table: str) -> list[str]:
    return re.findall(r"<td>([0-9.]+x.*?)</td>", table)


def test_the_rows_are_the_searchs_own() -> None:
    assert REACTIVE["note"] == ALREADY_MET and REACTIVE["unserved_fraction"] == 0.0005
    assert "note" not in FORECAST and FORECAST["unserved_fraction"] == TARGET
    assert FORECAST["cost_usd"] == 20000.0 and REACTIVE_AT_TARGET["cost_usd"] == 25000.0


def test_a_baseline_that_already_serves_better_is_not_said_to_be_at_equal_service() -> None:
    document = _document(FORECAST, REACTIVE)
    reactive = document["headline"]["against"][0]
    assert reactive["policy"] == "reactive"
    assert "equal service" not in reactive["basis"]
    assert reactive["basis"] == "its own 0.05% unserved (below the 0.5% target)"
    assert reactive["unserved_fraction"] == 0.0005
    assert document["headline"]["forecast"]["basis"] == "equal service at 0.5% unserved"  # interpolated: as before
    lead = _lead(document)
    assert lead.startswith("leadtime: 20,000 USD (equal service at 0.5% unserved), 16.5% less than reactive")
    assert "reactive (23,949 USD at its own 0.05% unserved, below the 0.5% target)" in lead
    row = re.search(r"<tr data-policy='reactive'>(.*?)</tr>", headline_section(document))
    assert row is not None and "its own 0.05% unserved (below the 0.5% target)" in row.group(1)
    assert "not at equal service" in headline_section(document)


def test_a_ratio_resting_on_a_figure_below_the_target_is_marked() -> None:
    table = equal_service_section(_document(FORECAST, REACTIVE)["equal_service"])
    reactive, oracle = _ratios(table)
    assert reactive.startswith("0.835x") and "‡" in reactive  # forecast at the target, reactive below it
    assert oracle == "1.111x ‡"  # forecast at the target (0.50%) against the oracle as run (0.00%): another service
    assert "‡ not at equal service" in table


def test_a_forecast_figure_below_the_target_marks_both_ratios_and_reads_its_own_share() -> None:
    forecast = interpolate([Trial(0.5, 24576.0, 0.003)], TARGET, "service_level")
    reactive = interpolate([Trial(0, 23949.0, 0.0048)], TARGET, "headroom_units")
    document = _document(forecast, reactive)
    head = document["headline"]
    assert head["forecast"]["basis"] == "its own 0.30% unserved (below the 0.5% target)"
    assert head["against"][0]["basis"] == "its own 0.48% unserved (below the 0.5% target)"
    lead = _lead(document)
    assert lead.startswith("leadtime: 24,576 USD (0.30% unserved: its cheapest setting tried already beats")
    assert "reactive (23,949 USD at its own 0.48% unserved, below the 0.5% target)" in lead
    table = equal_service_section(document["equal_service"])
    assert all("‡" in cell for cell in _ratios(table))


def test_figures_at_the_target_read_as_before() -> None:
    document = _document(FORECAST, REACTIVE_AT_TARGET)
    reactive = document["headline"]["against"][0]
    assert reactive["basis"] == "equal service at 0.5% unserved"
    assert _lead(document) == (
        "leadtime: 20,000 USD (equal service at 0.5% unserved), 20.0% less than reactive (25,000 USD); "
        "11.1% more than oracle (18,000 USD), which left 0.00% unserved against leadtime&#x27;s 0.50% ‡."
    )
    page = headline_section(document)
    reactive_row = re.search(r"<tr data-policy='reactive'>(.*?)</tr>", page)
    assert reactive_row is not None and "‡" not in reactive_row.group(1)  # both at the target: equal service
    table = equal_service_section(document["equal_service"])
    assert _ratios(table) == ["0.800x", "1.111x ‡"]  # the oracle as run, at 0.00%, is at another service

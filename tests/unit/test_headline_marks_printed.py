"""The marks of the report mean one thing wherever they stand, and simulate's summary prints them as the report does.

‡ marked two things: in the headline a saving against a run whose unserved share is not leadtime's figure's, in the
equal-service table a ratio resting on a figure below the target. The table left the forecast / oracle ratio
unmarked (the oracle as run, at 0.00% unserved, against leadtime at 0.50%) while the headline marked the same
comparison, and marked a ratio between two figures below the target at the same share. Both now mark a comparison
of two figures that leave different shares of demand unserved as shown (``same_service``), and say so.

The summary leads with the report's lead sentence, each saving with its marks, then what each mark it uses means,
in the report's words: † (a cap held the forecast run back, a run compared was not held to the caps) as well as ‡."""

from __future__ import annotations

import html
import io
import re
import sys
from typing import Any

import pytest

from agent.commands.simulate import _print_table
from agent.report.equal_service import equal_service_section
from agent.report.headline import headline_section
from agent.simulation.equal_service import Trial, interpolate
from agent.simulation.headline import headline, same_service

TARGET = 0.005
ORACLE = {"cost_usd": 800.0, "unserved_fraction": 0.0}


def _run(cost: float, unserved: float, **more: Any) -> dict[str, Any]:
    return {
        "cost_usd": cost,
        "accelerator_hours": cost / 2,
        "unserved_fraction": unserved,
        "utilization": 0.8,
        "scale_actions": 4,
        **more,
    }


def _document(forecast: dict[str, Any], reactive: dict[str, Any]) -> dict[str, Any]:
    comparison = {str(TARGET): {"forecast": forecast, "reactive": reactive, "oracle": ORACLE}}
    policies = {name: _run(row["cost_usd"], row["unserved_fraction"]) for name, row in comparison[str(TARGET)].items()}
    document: dict[str, Any] = {"policies": policies, "equal_service": comparison, "config": {"settings": {}}}
    document["headline"] = headline(document)
    return document


def _ratios(document: dict[str, Any]) -> dict[str, str]:
    table = equal_service_section(document["equal_service"])
    cells = re.findall(r"<td>([0-9.]+x.*?)</td>", table)
    return dict(zip(("reactive", "oracle"), cells, strict=True))


def _savings(document: dict[str, Any]) -> dict[str, list[str]]:
    page = headline_section(document)
    return {
        name: re.findall(r"<td class='saving'>(.*?)</td>", row)
        for name, row in re.findall(r"<tr data-policy='(\w+)'>(.*?)</tr>", page)
    }


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


@pytest.mark.parametrize(
    ("forecast", "reactive"),
    [
        # forecast at the target (0.50%), reactive below it at 0.05%, the oracle as run at 0.00%
        (
            interpolate([Trial(0.6, 1900.0, 0.007), Trial(0.7, 2100.0, 0.003)], TARGET, "service_level"),
            interpolate([Trial(0, 2395.0, 0.0005), Trial(1, 3000.0, 0.0001)], TARGET, "headroom_units"),
        ),
        # both already below the target at their cheapest setting, each leaving nothing unserved, as the oracle
        (
            interpolate([Trial(0.5, 1000.0, 0.0)], TARGET, "service_level"),
            interpolate([Trial(0, 900.0, 0.0)], TARGET, "headroom_units"),
        ),
    ],
    ids=["at-and-below-the-target", "all-at-0.00%"],
)
def test_a_mark_stands_where_the_two_figures_compared_leave_different_shares_unserved(
    forecast: dict[str, Any], reactive: dict[str, Any]
) -> None:
    document = _document(forecast, reactive)
    shares = {name: row["unserved_fraction"] for name, row in document["equal_service"][str(TARGET)].items()}
    ratios, savings = _ratios(document), _savings(document)
    for base in ("reactive", "oracle"):
        unequal = not same_service(shares["forecast"], shares[base])
        assert ratios[base].endswith(" ‡") is unequal, (base, ratios[base])
        assert all(cell.endswith(" ‡") is unequal for cell in savings[base]), (base, savings[base])
    table = equal_service_section(document["equal_service"])
    if any(cell.endswith(" ‡") for cell in ratios.values()):
        assert "‡ not at equal service: the two figures the ratio compares leave different shares of demand" in table
    else:
        assert "‡" not in table and "‡" not in headline_section(document)


def _capped_document() -> dict[str, Any]:
    """A cap held the forecast run back at 12 of 72 steps; static and the oracle are not held to the caps and left
    other shares unserved than the forecast run; no equal-service comparison."""
    policies = {
        "forecast": _run(1000.0, 0.004, budget_held_steps=12, alerts_raised=[]),
        "reactive": _run(950.0, 0.004, budget_held_steps=0, alerts_raised=[]),
        "static": _run(1300.0, 0.001),
        "oracle": _run(800.0, 0.0),
    }
    budgets = [{"name": "research", "pools": ["a100-spot"], "monthly_cap_usd": 1000.0}]
    document: dict[str, Any] = {"policies": policies, "window": {"steps": 72}, "config": {"settings": {}}}
    document["config"]["settings"]["budgets"] = budgets
    document["headline"] = headline(document)
    return document


def test_the_summary_prints_the_reports_lead_with_its_marks_and_what_each_means(
    capsys: pytest.CaptureFixture[str],
) -> None:
    document = _capped_document()
    _print_table(document)
    printed = capsys.readouterr().out.splitlines()
    page = headline_section(document)
    lead = re.search(r"<p class='lead'>(.*?)</p>", page)
    assert lead is not None
    assert printed[0] == _text(lead.group(1))
    static = "than static (1,300 USD, not held to the caps), which left 0.10% unserved against leadtime's 0.40% ‡ †"
    assert static in printed[0]
    assert "than reactive (950 USD);" in printed[0]  # held to the caps too, at the same share: no mark
    unequal, unheld = printed[1:3]
    assert unequal.startswith("‡ not at equal service: ") and unequal in _text(page)
    assert unheld.startswith("A cap held the forecast run back, so its savings against the runs not held to the caps")
    assert "(†)" in unheld and unheld in _text(page)
    assert printed[3] == "" and printed[4].startswith("policy ")
    # reactive left the forecast run's share: only static and the oracle are named, and nothing to point to
    assert (
        printed[9]
        == "static and oracle left another share of demand unserved than forecast as run: not the same service"
    )
    assert "forecast: held back by a budget cap at 12 of 72 steps" in printed


def test_runs_at_one_share_print_no_as_run_line_and_an_unmarked_lead_no_note(
    capsys: pytest.CaptureFixture[str],
) -> None:
    document: dict[str, Any] = {
        "policies": {"forecast": _run(1000.0, 0.0), "reactive": _run(900.0, 0.0)},
        "config": {"settings": {}},
    }
    document["headline"] = headline(document)
    _print_table(document)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "leadtime: 1,000 USD (as run, 0.00% unserved), 11.1% more than reactive (900 USD)."
    assert printed[1] == "" and printed[2].startswith("policy ")
    assert len(printed) == 5  # the lead, a blank line, the table: no note, no as-run line


def test_a_stdout_that_cannot_write_the_marks_gets_a_stand_in_for_each_not_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The results are written before the summary is printed: an ASCII-only stdout must not turn the run into a
    traceback at its last step."""
    stream = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    monkeypatch.setattr(sys, "stdout", stream)
    _print_table(_capped_document())
    stream.flush()
    printed = stream.buffer.getvalue().decode("ascii").splitlines()
    assert printed[0].endswith("which left 0.00% unserved against leadtime's 0.40% [*] [+].")  # told apart
    assert printed[1].startswith("[*] not at equal service: ")
    assert "runs not held to the caps ([+])" in printed[2]


def test_a_figure_whose_trials_a_cap_held_back_is_not_said_to_leave_more_unserved(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Tuned to the target, the forecast figure is at the target's unserved share whether or not a cap held back the
    trials it rests on: the note says they bought less capacity for the same service, not that they left more demand
    unserved (which the forecast run as configured, held back itself, would have)."""
    document = _capped_document()
    document["headline"]["forecast"].update(budget_held_from="trials", basis="equal service at 0.5% unserved")
    _print_table(document)
    printed = capsys.readouterr().out.splitlines()
    [note] = [line for line in printed if "(†)" in line]
    assert note.startswith("A cap held back runs the forecast figure rests on: it bought less capacity for the same")
    assert "left more demand unserved" not in note
    assert note in _text(headline_section(document))

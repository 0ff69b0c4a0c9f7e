"""simulate's summary at the terminal leads with the headline the report leads with: what leadtime's service costs
against each baseline at equal service, with the marks of its savings and what each mark means. The terminal showed
only each policy as run, where the forecast policy, which served more of the demand, cost more than reactive: it
read as "leadtime costs more", while the report's first line said what leadtime saves at the same service. The
as-run table now says its costs are at different unserved shares and points to the same-service lines."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import TraceWriter
from tests.scenario.test_simulate import run_cli
from tests.test_cli_messages_simulate_caps import STEPS, WINDOW, _config

# the capped-run tests' six hours after a day of history, without their budget: no cap holds anything back
CONFIG: dict[str, Any] = {key: value for key, value in _config(0.0).items() if key != "budgets"}


def _text(fragment: str) -> str:
    """A fragment of the report as a reader sees it: without tags, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def test_the_summary_leads_with_the_reports_headline_and_says_the_as_run_costs_are_of_other_service(
    tmp_path: Path, write_trace: TraceWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    trace = write_trace({"train-a100": [30.0 + 24.0 * (i % 96 > 48) for i in range(STEPS)]})  # a step every 8 h
    out = tmp_path / "o"
    argv = ["simulate", "--config", str(config), "--trace", str(trace), "--out", str(out), *WINDOW]
    assert run_cli([*argv, "--policy", "forecast,reactive,static,oracle", "--no-progress"]) == 0
    printed = capsys.readouterr().out.splitlines()
    document: dict[str, Any] = json.loads((out / "results.json").read_text())
    page = (out / "report.html").read_text(encoding="utf-8")

    lead = re.search(r"<p class='lead'>(.*?)</p>", page)
    assert lead is not None
    assert printed[0] == _text(lead.group(1))  # the report's first line, word for word
    head = document["headline"]
    assert head["forecast"]["basis"] == "equal service at 0.5% unserved"
    # the oracle (and static) as run left nothing unserved: another service, marked in the sentence and the table
    oracle = next(row for row in head["against"] if row["policy"] == "oracle")
    assert oracle["unserved_fraction"] == 0.0 and not oracle["same_service"]
    assert f"oracle ({oracle['cost_usd']:,.0f} USD), which left 0.00% unserved against leadtime's 0.50% ‡" in printed[0]
    oracle_row = re.search(r"<tr data-policy='oracle'>(.*?)</tr>", page)
    assert oracle_row is not None and oracle_row.group(1).count(" ‡") == 2
    # what the mark means, as the report's note says it, then a blank line before the table
    assert printed[1].startswith("‡ not at equal service: the run's unserved share is not that of leadtime's figure")
    section = re.search(r"<section id='headline'>(.*?)</section>", page)
    assert section is not None and printed[1] in _text(section.group(1))
    assert printed[2] == "" and printed[3].startswith("policy ")

    shares = {row["unserved_fraction"] for row in document["policies"].values()}
    shares_of_forecast = document["policies"]["forecast"]["unserved_fraction"]
    assert len(shares) > 1  # the runs as run left different shares of demand unserved
    other = [name for name, row in document["policies"].items() if row["unserved_fraction"] != shares_of_forecast]
    as_run = (
        f"{' and '.join(other) if len(other) < 3 else ', '.join(other[:-1]) + ' and ' + other[-1]} left another share "
        "of demand unserved than forecast as run: not the same service; compare costs on the 'same service' lines below"
    )
    assert other and printed[4 + len(document["policies"])] == as_run  # right under the table, naming the runs
    assert printed[5 + len(document["policies"])].startswith("same service (0.5% unserved): ")

"""``leadtime recommend`` with a budget and no ledger to read (no file at ``ledger.path``, or ``ledger.backend:
memory``) says the month's spend is unknown and assumed 0, and nothing else of the spend: the only records are the
dry run's own charges in memory, so it claims no ledger holding the budget's pools "only from later" and advises no
import of billed costs into a ledger that does not exist."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from tests.prometheus.server import PrometheusServer
from tests.prometheus.test_recommend import write_config

pytestmark = pytest.mark.xdist_group("prometheus")
AT = "2020-05-08T12:00+08:00"


def _without_ledger(tmp_path: Path, server: PrometheusServer, ledger: dict[str, Any] | None) -> Path:
    config = write_config(tmp_path, server)  # ledger.path names a file that does not exist
    if ledger is not None:
        raw = yaml.safe_load(config.read_text(encoding="utf-8"))
        raw["ledger"] = ledger
        config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return config


@pytest.mark.parametrize(
    ("ledger", "note"),
    [
        (None, "month-to-date spend unknown, assumed 0: there is no ledger file at"),
        ({"backend": "memory"}, "month-to-date spend unknown, assumed 0: ledger.backend is memory"),
    ],
    ids=["no-ledger-file", "memory-backend"],
)
def test_recommend_without_a_ledger_claims_no_partial_record_and_advises_no_import(
    prometheus: PrometheusServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    ledger: dict[str, Any] | None,
    note: str,
) -> None:
    config = _without_ledger(tmp_path, prometheus, ledger)
    out = tmp_path / "out"

    with caplog.at_level(logging.WARNING):
        assert main(["recommend", "--config", str(config), "--out", str(out), "--at", AT]) == 0

    document = json.loads((out / "recommendation.json").read_text())
    assert document["ledger"]["spend_known"] is False
    assert document["ledger"]["note"].startswith(note)
    (budget,) = document["budgets"]
    assert budget["spend_known"] is False
    assert budget["spent_period_usd"] == 0.0
    assert budget["spend_partial"] is None
    assert budget["pools_recorded_late"] == []
    printed = capsys.readouterr().err + "\n".join(r.getMessage() for r in caplog.records)
    report = (out / "report.md").read_text(encoding="utf-8")
    for said in (printed, report, json.dumps(document)):
        assert "no ledger (only" not in said
        assert "only from later" not in said
        assert "import-billing" not in said
    assert "| research | unknown, assumed 0 |" in report

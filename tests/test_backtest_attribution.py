"""``leadtime backtest`` credits a bundled trace as the data's README asks wherever its figures are shown: in its
JSON (``trace.attribution``) and under its printed table; a trace of one's own gets no credit."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from agent import cli

ROOT = Path(__file__).resolve().parents[1]
PHILLY = ROOT / "data" / "philly" / "busy_nodes_5min.csv.gz"


@pytest.fixture(autouse=True)
def only_backtest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "COMMANDS", ("backtest",))


def _backtest(trace: Path, start: str, end: str, out: Path) -> int:
    args = ["backtest", "--trace", str(trace), "--start", start, "--end", end, "--horizons", "15m"]
    return cli.main([*args, "--models", "persistence", "--out", str(out)])


def test_a_bundled_trace_is_credited_in_the_json_and_under_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "result.json"

    assert _backtest(PHILLY, "2017-11-10T00:00Z", "2017-11-10T02:00Z", out) == 0

    credit = json.loads(out.read_text())["trace"]["attribution"]
    assert "Jeon et al." in credit and "CC BY 4.0" in credit
    assert capsys.readouterr().out.splitlines()[-2] == credit  # the last line names the file written


def test_a_trace_of_ones_own_gets_no_credit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stamps = pd.date_range("2024-03-04T00:00:00Z", periods=2 * 288, freq="5min")
    trace = tmp_path / "trace.csv"
    pd.DataFrame({"unique_id": "a", "ds": [s.isoformat() for s in stamps], "y": 4.0}).to_csv(trace, index=False)
    out = tmp_path / "result.json"

    assert _backtest(trace, "2024-03-05T00:00Z", "2024-03-05T02:00Z", out) == 0

    assert json.loads(out.read_text())["trace"]["attribution"] is None
    assert "Trace data:" not in capsys.readouterr().out

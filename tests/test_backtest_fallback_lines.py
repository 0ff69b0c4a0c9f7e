"""``leadtime backtest`` says under its table which models fell back and why: a model whose forecasts its fallback
made scores exactly as the fallback does, which the table alone reads as a model no better than it."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from agent import cli
from forecasting.boosting import MIN_ROWS
from tests.forecasting.conftest import DAY, bursty


@pytest.fixture(autouse=True)
def only_backtest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "COMMANDS", ("backtest",))


def test_a_model_that_fell_back_is_named_with_its_fallback_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stamps = pd.date_range("2024-03-04T00:00:00Z", periods=3 * DAY, freq="5min")
    trace = tmp_path / "trace.csv"
    pd.DataFrame(
        {"unique_id": "earth/a", "ds": [s.isoformat() for s in stamps], "y": bursty(len(stamps), seed=1)}
    ).to_csv(trace, index=False)
    out = tmp_path / "result.json"
    args = ["backtest", "--trace", str(trace), "--start", "2024-03-06T00:00Z", "--end", "2024-03-06T03:00Z"]

    assert cli.main([*args, "--models", "naive,lightgbm,auto", "--out", str(out)]) == 0

    result = json.loads(out.read_text())
    used = result["models"]["lightgbm"]["models_used"]
    rows = sum(used.values())
    assert used == {"naive": rows}  # two days of one series: far fewer training rows than MIN_ROWS
    assert rows == result["trace"]["origins"] * 12  # every row of every origin, 12 steps to 60m
    lines = capsys.readouterr().out.splitlines()
    (fell_back,) = [line for line in lines if "fell back" in line]
    assert fell_back.startswith(f"lightgbm fell back to naive in {rows} of {rows} forecast rows: ")
    reason = fell_back.split(": ", 1)[1]
    assert reason.startswith("too little history to train the global model (")
    assert int(reason.split("(")[1].split(" rows")[0]) < MIN_ROWS
    # naive made its own rows: no line; auto's rows name the model it selected, which is no fallback
    (selected,) = [line for line in lines if line.startswith("auto selected ")]
    picks = result["models"]["auto"]["models_used"]
    assert (
        selected == "auto selected " + ", ".join(f"{m} in {n} of {rows}" for m, n in picks.items()) + " forecast rows"
    )
    assert lines.index(fell_back) > lines.index(next(line for line in lines if line.startswith("lightgbm ")))

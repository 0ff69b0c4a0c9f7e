"""``leadtime backtest`` end to end on a small trace file: the JSON it writes and the mistakes it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from agent import cli
from tests.forecasting.conftest import DAY, bursty


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    stamps = pd.date_range("2024-03-04T00:00:00+08:00", periods=3 * DAY, freq="5min")
    rows = []
    for i, uid in enumerate(("earth/a", "earth/b")):
        y = bursty(len(stamps), seed=i + 1, level=30.0 * (i + 1))
        y[400:420] = np.nan  # a collector outage: empty cells
        rows.append(pd.DataFrame({"unique_id": uid, "ds": [s.isoformat() for s in stamps], "y": y}))
    path = tmp_path / "trace.csv.gz"
    pd.concat(rows).to_csv(path, index=False)
    return path


@pytest.fixture(autouse=True)
def only_backtest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "COMMANDS", ("backtest",))


def _run(trace: Path, out: Path, *extra: str) -> int:
    args = [
        "backtest",
        "--trace",
        str(trace),
        "--start",
        "2024-03-05T22:00:00+08:00",
        "--end",
        "2024-03-06T04:00:00+08:00",
    ]
    return cli.main([*args, "--out", str(out), *extra])


def test_writes_the_documented_keys_as_written_on_the_command_line(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "result.json"
    code = _run(
        trace, out, "--models", "naive,seasonal_naive,ets,auto", "--horizons", "15m,30m", "--quantiles", "0.5,0.9"
    )
    assert code == 0
    result = json.loads(out.read_text())
    assert set(result["models"]) == {"naive", "seasonal_naive", "ets", "auto"}
    families = {name: m["family"] for name, m in result["models"].items()}
    assert families == {"naive": "baseline", "seasonal_naive": "baseline", "ets": "statsmodels", "auto": "auto"}
    for scores in result["models"].values():
        assert set(scores["mase"]) == {"15m", "30m"}
        assert set(scores["pinball"]) == {"0.5", "0.9"}
        assert set(scores["pinball"]["0.9"]) == {"15m", "30m"}
        assert set(scores["coverage"]) == {"0.5", "0.9"}
        assert set(scores["pinball_weighted"]["0.9"]) == {"15m", "30m"}
        assert scores["pinball_weighted"]["0.9"]["30m"] > 0
        assert set(scores["ratio_median"]["0.5"]) == {"15m", "30m"}
        assert 0.0 <= scores["coverage"]["0.9"] <= 1.0
        assert scores["pinball"]["0.9"]["30m"] > 0
        assert scores["fit_seconds"] >= 0
        assert scores["predict_seconds"] >= 0
    assert set(result["series"]) == {"earth/a", "earth/b"}
    assert result["trace"]["origins"] == 6
    printed = capsys.readouterr().out
    assert "earth/a" in printed
    assert "pinball@0.9" in printed
    assert "level-weighted" in printed
    assert result["models"]["naive"]["ratio_median"]["0.9"]["15m"] == 1.0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--models", "naive,prophet"), "unknown models"),
        (("--quantiles", "0.5,1.5"), "strictly between 0 and 1"),
        (("--quantiles", "median"), "not a number"),
        (("--horizons", "soon"), "cannot read"),
        (("--horizons", "7m"), "whole number"),
        (("--every", "0s"), "longer than zero"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: tuple[str, ...], message: str
) -> None:
    assert _run(trace, tmp_path / "x.json", *extra) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        ("2024-03-06T00:00:00Z", "2024-03-05T00:00:00Z", "must come after"),
        ("2024-04-01T00:00:00Z", "2024-04-02T00:00:00Z", "no origin"),
        ("yesterday", "2024-03-05T00:00:00Z", "ISO-8601"),
    ],
)
def test_bad_windows_exit_2(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], start: str, end: str, message: str
) -> None:
    args = ["backtest", "--trace", str(trace), "--start", start, "--end", end, "--out", str(tmp_path / "x.json")]
    assert cli.main([*args, "--models", "naive"]) == 2
    assert message in capsys.readouterr().err


def test_a_missing_trace_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "backtest",
        "--trace",
        str(tmp_path / "nope.csv"),
        "--start",
        "2024-03-05",
        "--out",
        str(tmp_path / "x.json"),
    ]
    assert cli.main(args) == 2
    assert "not found" in capsys.readouterr().err


def test_an_out_path_that_is_a_directory_is_refused_before_any_work(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(trace, tmp_path, "--models", "naive") == 2
    err = capsys.readouterr().err
    assert f"--out {tmp_path} is a directory: give a file name, e.g. {tmp_path / 'backtest.json'}" in err
    assert "backtest origins" not in err  # refused before the origins ran


def test_a_start_after_the_trace_names_the_trace_not_an_end_never_given(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["backtest", "--trace", str(trace), "--start", "2025-01-01T00:00:00Z", "--out", str(tmp_path / "x.json")]
    assert cli.main([*args, "--models", "naive"]) == 2
    err = capsys.readouterr().err
    assert "--start 2025-01-01T00:00:00+00:00 is after the trace ends (2024-03-06T15:55:00+00:00)" in err
    assert "--end" not in err


def test_a_horizon_beyond_the_trace_is_refused_not_scored_as_blanks(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(trace, tmp_path / "x.json", "--models", "naive", "--horizons", "30m,5d") == 2
    assert "--horizons 5d: no origin from --start" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_horizons_beyond_an_hour_are_scored_with_a_band_calibrated_that_far(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "long.json"
    assert _run(trace, out, "--models", "naive", "--horizons", "2h", "--quantiles", "0.5,0.9") == 0
    naive = json.loads(out.read_text(encoding="utf-8"))["models"]["naive"]
    # The calibrated last value's band at two hours: without residuals that far, it fell back to the bare last
    # value, a q0.9 equal to its q0.5 (and covering as often).
    assert naive["coverage"]["0.9"] > naive["coverage"]["0.5"] + 0.1

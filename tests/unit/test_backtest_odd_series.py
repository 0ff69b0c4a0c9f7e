"""``backtest`` without ``--series`` reads every series of the trace, and every series set its step and grid: a
probe's two rows a minute apart among 5-minute series made the grid one of 1 minute, every 5-minute series a gap at
4 steps of 5, and every score blank, at exit 0 with no warning; a probe off the 5-minute grid got the whole backtest
refused as off the grid, with no word that ``--series`` leaves it out. Both are now refused (exit 2) naming the
probe and ``--series``, and with ``--series`` naming the others the same file is scored."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from agent import cli
from tests.forecasting.conftest import DAY, bursty

START, END = "2024-03-05T22:00:00+08:00", "2024-03-06T01:00:00+08:00"


def _probed(tmp_path: Path, *minutes: float) -> Path:
    """Two 5-minute series over three days and a series 'probe' of one row at each of ``minutes`` past the start."""
    stamps = pd.date_range("2024-03-04T00:00:00+08:00", periods=3 * DAY, freq="5min")
    frames = [
        pd.DataFrame({"unique_id": name, "ds": [s.isoformat() for s in stamps], "y": bursty(len(stamps), seed=seed)})
        for seed, name in enumerate(("m", "n"))
    ]
    probe = [(stamps[0] + pd.Timedelta(minutes=m)).isoformat() for m in minutes]
    frames.append(pd.DataFrame({"unique_id": "probe", "ds": probe, "y": [0.0] * len(probe)}))
    path = tmp_path / "probed.csv"
    pd.concat(frames).to_csv(path, index=False)
    return path


def _backtest(path: Path, out: Path, *more: str) -> int:
    argv = ["backtest", "--trace", str(path), "--start", START, "--end", END, "--models", "naive"]
    return cli.main([*argv, *more, "--out", str(out)])


@pytest.fixture(autouse=True)
def _backtest_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "COMMANDS", ("backtest",))


def test_a_probe_that_would_set_the_step_is_refused_naming_it_and_series(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _probed(tmp_path, 1, 2)
    out = tmp_path / "bt.json"

    assert _backtest(path, out) == 2
    err = capsys.readouterr().err
    assert "series 'probe' (2 of the trace's 1,730 rows) sets the trace's step to 60 s" in err
    assert "the other 2 series, a row every 300 s, would be mostly gaps" in err
    assert "give --series with the series to read, leaving it out (e.g. the other series: 'm', 'n')" in err
    assert not out.exists()

    assert _backtest(path, out, "--series", "m,n") == 0, capsys.readouterr().err
    result = json.loads(out.read_text())
    assert result["trace"]["step_seconds"] == 300.0
    assert all(v is not None for v in result["models"]["naive"]["mase"].values())


def test_a_probe_off_the_grid_is_refused_naming_it_and_series(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _probed(tmp_path, 2.5, 7.5)  # 5 minutes apart, as the others, but between their steps
    out = tmp_path / "bt.json"

    assert _backtest(path, out) == 2
    err = capsys.readouterr().err
    assert "series 'probe' (2 of the trace's 1,730 rows) is off the grid of 300 s the other series are on" in err
    assert "give --series with the series to read, leaving it out (e.g. the other series: 'm', 'n')" in err


def test_a_probe_off_the_grid_before_every_other_row_is_the_one_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The grid is the one most rows are on, not the one from the first row: a probe 30 s before the others' first
    step is named, not the series it would put off the grid."""
    path = _probed(tmp_path, -0.5, 4.5)

    assert _backtest(path, tmp_path / "bt.json") == 2
    err = capsys.readouterr().err
    assert "series 'probe' (2 of the trace's 1,730 rows) is off the grid" in err
    assert "(from 2024-03-03T16:00:00+00:00)" in err and "'m' has" not in err


def test_series_at_a_coarser_step_than_most_are_still_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A series at twice the others' spacing is not refused: the step is most series', the odd one has gaps."""
    stamps = pd.date_range("2024-03-04T00:00:00+08:00", periods=3 * DAY, freq="5min")
    frames = [
        pd.DataFrame({"unique_id": name, "ds": [s.isoformat() for s in stamps], "y": bursty(len(stamps), seed=seed)})
        for seed, name in enumerate(("m", "n"))
    ]
    ten = stamps[::2]
    frames.append(pd.DataFrame({"unique_id": "slow", "ds": [s.isoformat() for s in ten], "y": [1.0] * len(ten)}))
    path = tmp_path / "mixed.csv"
    pd.concat(frames).to_csv(path, index=False)
    out = tmp_path / "bt.json"

    assert _backtest(path, out) == 0, capsys.readouterr().err
    assert json.loads(out.read_text())["trace"]["step_seconds"] == 300.0

"""A trace with columns it does not read (a file shared with other tools: request rates, token counts) is read,
those columns left out with one note naming them; a column whose name looks like one the trace reads, misspelt, is
still refused, since it would otherwise be dropped unread. ``backtest`` and ``simulate`` read such a file as is:
it was refused as a whole ("unknown column(s)")."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd
import pytest

from agent import cli
from agent.sources.trace import read_trace
from models import TraceError
from tests.forecasting.conftest import DAY, bursty

SHARED = "unique_id,ds,y,rate_rps,mean_input_tokens,mean_output_tokens\n"


def test_columns_it_does_not_read_are_left_out_with_one_note(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "t.csv"
    path.write_text(
        SHARED + "m,2024-01-01T00:00:00Z,280.1,212.8,355.4,292.5\nm,2024-01-01T00:10:00Z,232.5,,364.9,text\n"
    )

    with caplog.at_level(logging.WARNING, logger="agent.sources.trace"):
        trace = read_trace(path)

    assert trace.series == ("m",) and trace.column("m").tolist() == [280.1, 232.5]
    (note,) = [r.getMessage() for r in caplog.records]
    assert "column(s) ['rate_rps', 'mean_input_tokens', 'mean_output_tokens'] are not read" in note


@pytest.mark.parametrize(
    ("column", "meant"),
    [
        ("runing", "running"),
        ("Capacity", "capacity"),
        (" pending", "pending"),
        ("capcity", "capacity"),
        ("Unique ID", "unique_id"),
        ("pendnig", "pending"),
    ],
)
def test_a_column_that_looks_like_one_it_reads_misspelt_is_refused(tmp_path: Path, column: str, meant: str) -> None:
    path = tmp_path / "t.csv"
    path.write_text(f"unique_id,ds,y,{column}\na,2024-01-01T00:00:00Z,4,4\n")
    with pytest.raises(TraceError, match=rf"column\(s\) '{column}' \(meant '{meant}'\?\)"):
        read_trace(path)


@pytest.mark.parametrize(
    ("column", "like"),
    [
        ("spending", "pending"),
        ("capacity_gpu", "capacity"),
        ("opening", "pending"),
        ("appending", "pending"),
        ("ending", "pending"),
        ("capacity2", "capacity"),
        ("dsl", "ds"),
        ("unique_ids", "unique_id"),
    ],
)
def test_a_column_of_its_own_that_looks_like_one_it_reads_is_read_with_a_note(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, column: str, like: str
) -> None:
    """A letter added at either end, or a name merely alike, is a column of its own (a shared file's spending or GPU
    capacity): read as the others with the note naming the column it looks like. They were refused as misspelt."""
    path = tmp_path / "t.csv"
    rows = "m,2024-01-01T00:00:00Z,280.1,212.8,355.4,292.5,1\nm,2024-01-01T00:10:00Z,232.5,,364.9,text,2\n"
    path.write_text(SHARED.rstrip("\n") + f",{column}\n" + rows)

    with caplog.at_level(logging.WARNING, logger="agent.sources.trace"):
        trace = read_trace(path)

    assert trace.column("m").tolist() == [280.1, 232.5]
    (note,) = [r.getMessage() for r in caplog.records]
    assert f"'mean_output_tokens', {column!r}] are not read" in note
    assert note.endswith(f"; {column!r} looks like {like!r}: rename it if meant to be read")


def test_backtest_reads_a_shared_file_with_more_columns_as_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "COMMANDS", ("backtest",))
    stamps = pd.date_range("2024-03-04T00:00:00+08:00", periods=3 * DAY, freq="5min")
    y = bursty(len(stamps), seed=1, level=30.0)
    frame = pd.DataFrame({"unique_id": "m", "ds": [s.isoformat() for s in stamps], "y": y, "rate_rps": y / 2})
    path = tmp_path / "shared.csv.gz"
    frame.to_csv(path, index=False)
    out = tmp_path / "bt.json"

    argv = ["backtest", "--trace", str(path), "--start", "2024-03-05T22:00:00+08:00"]
    code = cli.main([*argv, "--end", "2024-03-06T01:00:00+08:00", "--models", "naive", "--out", str(out)])

    assert code == 0, capsys.readouterr().err
    result = json.loads(out.read_text())
    assert set(result["series"]) == {"m"} and result["trace"]["origins"] == 3
    assert "column(s) ['rate_rps'] are not read" in capsys.readouterr().err


def test_backtest_series_alone_set_the_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --series, a series left out (two rows a minute apart) no longer makes the grid one of 1 minute."""
    monkeypatch.setattr(cli, "COMMANDS", ("backtest",))
    stamps = pd.date_range("2024-03-04T00:00:00+08:00", periods=3 * DAY, freq="5min")
    frame = pd.DataFrame({"unique_id": "m", "ds": [s.isoformat() for s in stamps], "y": bursty(len(stamps), seed=2)})
    probe = pd.DataFrame(
        {"unique_id": "probe", "ds": [(stamps[0] + pd.Timedelta(minutes=m)).isoformat() for m in (1, 2)]}
    )
    path = tmp_path / "probed.csv"
    pd.concat([frame, probe.assign(y=[0.0, 0.0])]).to_csv(path, index=False)
    out = tmp_path / "bt.json"

    argv = ["backtest", "--trace", str(path), "--series", "m", "--start", "2024-03-05T22:00:00+08:00"]
    code = cli.main([*argv, "--end", "2024-03-06T01:00:00+08:00", "--models", "naive", "--out", str(out)])

    assert code == 0, capsys.readouterr().err
    result = json.loads(out.read_text())
    assert result["trace"]["step_seconds"] == 300.0 and set(result["series"]) == {"m"}

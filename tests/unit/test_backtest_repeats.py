"""``leadtime backtest`` refuses a quantile, horizon, model or series listed twice, in one line, before any work:
a repeated quantile once ended in a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cli import main
from tests.conftest import TraceWriter


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--quantiles", "0.5,0.5"), "--quantiles lists 0.5 twice; list each once"),
        (("--quantiles", "0.5,0.9,0.50"), "--quantiles lists one value (0.5 and 0.50) twice; list each once"),
        (("--horizons", "15m,30m,15m"), "--horizons lists 15m twice; list each once"),
        (("--horizons", "15m,900s"), "--horizons lists one value (15m and 900s) twice; list each once"),
        (("--models", "naive,naive"), "--models lists naive twice; list each once"),
        (("--series", "a,b,a"), "--series lists a twice; list each once"),
    ],
)
def test_a_value_listed_twice_is_refused_in_one_line(
    tmp_path: Path,
    write_trace: TraceWriter,
    capsys: pytest.CaptureFixture[str],
    extra: tuple[str, ...],
    message: str,
) -> None:
    trace = write_trace({"a": [10.0] * 576, "b": [4.0] * 576})  # two days of five-minute steps
    out = tmp_path / "backtest.json"
    argv = ["backtest", "--trace", str(trace), "--start", "2024-01-02T00:00:00Z", "--end", "2024-01-02T02:00:00Z"]
    options = {"--models": "naive", "--history": "1d"} | dict(zip(extra[::2], extra[1::2], strict=True))
    assert main([*argv, *(part for pair in options.items() for part in pair), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(message)
    assert len(err.splitlines()) == 1
    assert not out.exists()

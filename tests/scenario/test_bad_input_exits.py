"""Inputs that used to end in a traceback (exit 1), a silent $0 run (exit 0) or invalid JSON now end in one clear
error line and exit 2, with nothing written; and extreme but valid inputs still write strict JSON."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from tests.conftest import TraceWriter
from tests.scenario.test_simulate import run_cli, two_class_config


def _simulate(config: Path, trace: Path, out: Path, *extra: str) -> int:
    argv = ["simulate", "--config", str(config), "--trace", str(trace), "--out", str(out), "--no-progress"]
    return run_cli([*argv, "--start", "2024-01-02T00:00:00+00:00", *extra])


def _write_config(path: Path, raw: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("pools", 0, "lead_time", "1e400"), "pools[0].lead_time: duration must be at most 3650 days"),
        (("pools", 0, "lead_time", "99999999999d"), "pools[0].lead_time: duration must be at most 3650 days"),
        (("forecast", None, "step", "0s"), "forecast.step: must be at least 1s"),
        (("loop", None, "tick_interval", "500ms"), "loop.tick_interval: must be at least 1s"),
        (("pools", 0, "price_per_chip_hour_usd", math.inf), "pools[0].price_per_chip_hour_usd"),
        (("pools", 0, "price_per_chip_hour_usd", 1e308), "pools[0].price_per_chip_hour_usd"),
    ],
)
def test_out_of_range_settings_exit_2_naming_the_key(
    change: tuple[str, int | None, str, Any],
    message: str,
    tmp_path: Path,
    write_trace: TraceWriter,
    capsys: pytest.CaptureFixture[str],
) -> None:
    raw = two_class_config()
    section, index, key, value = change
    target = raw.setdefault(section, {}) if index is None else raw[section][index]
    target[key] = value
    config = _write_config(tmp_path / "c.yaml", raw)
    trace = write_trace({"a": [1.0] * 400, "b": [1.0] * 400})

    assert _simulate(config, trace, tmp_path / "o") == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "o" / "results.json").exists()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (math.inf, "demand y must be finite and at most 1e+09 accelerators; row"),
        (1e308, "demand y must be finite and at most 1e+09 accelerators; row"),
        (-50.0, "demand y must not be negative; row"),
    ],
)
def test_an_implausible_demand_in_a_trace_exits_2_naming_the_row(
    value: float, message: str, tmp_path: Path, write_trace: TraceWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    values = [4.0] * 400
    values[350] = value
    trace = write_trace({"a": values, "b": [4.0] * 400})
    config = _write_config(tmp_path / "c.yaml", two_class_config())

    assert _simulate(config, trace, tmp_path / "o") == 2
    err = capsys.readouterr().err
    assert message in err and "row 352" in err and "Traceback" not in err


def test_a_truncated_gzipped_trace_exits_2(
    tmp_path: Path, write_trace: TraceWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = write_trace({"a": [4.0] * 400, "b": [4.0] * 400})
    packed = gzip.compress(plain.read_bytes())
    trace = tmp_path / "trace.csv.gz"
    trace.write_bytes(packed[: len(packed) // 2])
    config = _write_config(tmp_path / "c.yaml", two_class_config())

    assert _simulate(config, trace, tmp_path / "o") == 2
    err = capsys.readouterr().err
    assert "cannot read trace" in err and "Traceback" not in err


def test_a_series_off_the_grid_exits_2_naming_the_series_instead_of_an_empty_run(
    tmp_path: Path, write_trace: TraceWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    a = write_trace({"a": [4.0] * 400}, name="a.csv")
    b = write_trace({"b": [4.0] * 400}, start="2024-01-01T00:02:30+00:00", name="b.csv")  # 150 s off
    trace = tmp_path / "trace.csv"
    trace.write_text(a.read_text() + b.read_text().split("\n", 1)[1])
    config = _write_config(tmp_path / "c.yaml", two_class_config())

    assert _simulate(config, trace, tmp_path / "o") == 2
    err = capsys.readouterr().err
    assert "series 'b' has 400 row(s) off the trace's regular grid of 300 s" in err
    assert "rows 402, 403, 404, 405, 406 ..." in err


def test_a_backtest_on_a_window_without_data_exits_2(
    tmp_path: Path, write_trace: TraceWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    values = [4.0] * 300 + [math.nan] * 100
    trace = write_trace({"a": values})
    out = tmp_path / "bt.json"
    argv = ["backtest", "--trace", str(trace), "--start", "2024-01-02T02:00:00+00:00", "--models", "naive"]
    assert run_cli([*argv, "--history", "1d", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no observed demand" in err and "Traceback" not in err
    assert not out.exists()


def test_huge_but_valid_inputs_write_strict_json(tmp_path: Path, write_trace: TraceWriter) -> None:
    raw = two_class_config()
    raw["pools"][0]["price_per_chip_hour_usd"] = 1e6  # the largest price allowed
    raw["pools"][0]["max_units"] = 10**6
    config = _write_config(tmp_path / "c.yaml", raw)
    trace = write_trace({"a": [1e9] * 400, "b": [0.0] * 400})  # the largest demand allowed

    assert main(["simulate", "--config", str(config), "--trace", str(trace), "--out", str(tmp_path / "o"),
                 "--no-progress", "--policy", "reactive", "--start", "2024-01-02T00:00:00+00:00"]) == 0  # fmt: skip
    text = (tmp_path / "o" / "results.json").read_text()
    json.loads(text, parse_constant=_refuse)


def _refuse(name: str) -> None:
    raise AssertionError(f"results.json holds {name}, which is not JSON")

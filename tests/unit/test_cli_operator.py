"""The operator surface of the command line: ``--version``, options after the subcommand, JSON logs that keep
the structured fields of each record and redact them like the message."""

from __future__ import annotations

import importlib.metadata
import json
import logging
import warnings
from pathlib import Path

import pytest

from agent.cli import main
from agent.log_format import JsonFormatter, StderrHandler, TextFormatter
from agent.log_redaction import install_log_redaction

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config" / "examples" / "helios-earth.yaml"


def _record(msg: str = "resized %s", args: tuple[object, ...] = ("a100",), **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("agent.executor", logging.WARNING, __file__, 1, msg, args, None)
    record.__dict__.update(extra)
    return record


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert f"leadtime {importlib.metadata.version('leadtime')}" in capsys.readouterr().out


def test_log_options_are_accepted_after_the_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate-config", str(CONFIG), "--log-level", "INFO", "--log-format", "json"]) == 0
    assert logging.getLogger().level == logging.INFO
    (ours,) = [h for h in logging.getLogger().handlers if isinstance(h, StderrHandler)]
    assert isinstance(ours.formatter, JsonFormatter)
    assert main(["--log-format", "text", "validate-config", str(CONFIG)]) == 0
    (ours,) = [h for h in logging.getLogger().handlers if isinstance(h, StderrHandler)]
    assert isinstance(ours.formatter, TextFormatter)
    assert logging.getLogger().level == logging.WARNING
    assert "ok" in capsys.readouterr().out


def test_an_unknown_log_format_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["validate-config", str(CONFIG), "--log-format", "xml"])
    assert stopped.value.code == 2
    assert "invalid choice: 'xml'" in capsys.readouterr().err


def test_json_lines_keep_the_fields_passed_with_extra() -> None:
    line = JsonFormatter().format(_record(pool="a100", units=4, share=0.5, ratio=float("nan")))
    entry = json.loads(line)
    assert entry["message"] == "resized a100"
    assert entry["level"] == "WARNING" and entry["logger"] == "agent.executor"
    assert entry["pool"] == "a100" and entry["units"] == 4 and entry["share"] == 0.5
    assert entry["ratio"] == "nan"  # never a bare NaN, which is not JSON
    assert entry["time"].endswith("+00:00")


def test_text_lines_keep_the_fields_passed_with_extra() -> None:
    line = TextFormatter().format(_record(pool="a100", reason="no capacity in zone"))
    assert line.endswith('resized a100 pool=a100 reason="no capacity in zone"')


def test_fields_are_redacted_like_the_message() -> None:
    url = "https://hooks.slack.com/services/T000/B000/XXXXSECRETXXXX"
    record = _record("posting to %s", (url,), webhook=url)
    handler = logging.Handler()
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("test.redaction.fields")
    logger.addHandler(handler)
    try:
        install_log_redaction(logger)
        for flt in handler.filters:
            assert isinstance(flt, logging.Filter)  # not a bare callable: what install_log_redaction adds
            flt.filter(record)
        line = handler.format(record)
    finally:
        logger.removeHandler(handler)
    assert "XXXXSECRETXXXX" not in line
    assert "hooks.slack.com" in json.loads(line)["webhook"]


def test_after_main_every_log_line_on_stderr_is_a_json_object(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate-config", str(CONFIG), "--log-format", "json"]) == 0
    capsys.readouterr()
    logging.getLogger("agent.ledger").warning("charged %s", "a100", extra={"usd": 12.5})
    logging.getLogger("agent.notify").error("failed", exc_info=ValueError("boom"))
    lines = capsys.readouterr().err.splitlines()
    entries = [json.loads(line) for line in lines]
    assert [e["message"] for e in entries] == ["charged a100", "failed"]
    assert entries[0]["usd"] == 12.5
    assert "ValueError: boom" in entries[1]["exception"]


def test_nested_subcommands_take_the_log_options_and_name_their_choices(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "schema", "--log-level", "ERROR"]) == 0
    assert logging.getLogger().level == logging.ERROR
    with pytest.raises(SystemExit) as stopped:
        main(["ledger"])
    assert stopped.value.code == 2
    assert "required: {import-sqlite,import-billing,budgets}" in capsys.readouterr().err


def test_a_setting_whose_meaning_changed_warns_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "naive.yaml"
    config.write_text(CONFIG.read_text().replace("model: auto", "model: naive"))
    with pytest.warns(FutureWarning) as caught:
        assert main(["validate-config", str(config)]) == 0
    (warning,) = [w for w in caught if w.category is FutureWarning]
    line = warnings.formatwarning(warning.message, warning.category, warning.filename, warning.lineno)
    assert line == (
        "leadtime: warning: forecast.model: 'naive' is now the calibrated last value (the model the reports and "
        "backtest call naive: the newest value with a band from its recent errors), no longer bare persistence; to "
        "keep every quantile at the newest value, write 'persistence'\n"
    )


def test_export_trace_without_a_prometheus_section_says_it_needs_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export-trace", "--config", str(CONFIG), "--out", "unused.csv"]) == 2
    assert "prometheus: export-trace reads Prometheus: add a prometheus section (url)" in capsys.readouterr().err


def test_a_rehearsal_reads_its_trace_before_it_connects(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The example configuration elects a leader through the Kubernetes API, which this test has none of: the
    missing trace must be what is reported."""
    missing = tmp_path / "missing.csv"
    assert main(["run", "--config", str(CONFIG), "--replay", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"trace file not found: {missing}" in err
    assert "Kubernetes" not in err


@pytest.mark.parametrize("replay_from", ["2021-01-01T00:00:00+00:00", "2019-01-01T00:00:00+00:00"])
def test_a_rehearsal_from_outside_its_trace_is_refused_before_it_connects(
    replay_from: str, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = ROOT / "data" / "helios-earth" / "demand_5min.csv.gz"
    argv = ["run", "--config", str(CONFIG), "--replay", str(trace), "--replay-from", replay_from]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"--replay-from ({replay_from}) is outside the trace, which runs from 2020-" in err
    assert "Kubernetes" not in err


def test_simulate_without_a_trace_outside_the_checkout_says_where_the_default_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["simulate", "--config", str(CONFIG), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "no --trace given, and the bundled trace data/helios-earth/demand_5min.csv.gz is not under" in err

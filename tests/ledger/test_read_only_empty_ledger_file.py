"""A zero-length SQLite ledger file opened read-only (``leadtime ledger budgets``, ``recommend``, a standby of a
file the replicas share) is refused with the writer's own explanation: the writer never turns such a file into a
ledger unless told to start afresh, so telling the operator to wait for the writer to create it sends them to wait
for ever."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from agent.cli import main
from agent.ledger.shared_file import LeaderWrittenLedger
from agent.ledger.sqlite import SqliteLedger
from models import LedgerEntry, LedgerUnavailable

T0 = datetime(2026, 3, 2, tzinfo=UTC)
POOL = {"id": "a100", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 4, "price_per_chip_hour_usd": 3.0,
        "lead_time": "10m", "serves": ["c"]}  # fmt: skip


def _writer_refusal(path: Path) -> str:
    with pytest.raises(LedgerUnavailable) as refused:
        SqliteLedger(path)
    return str(refused.value)


def test_a_reader_refuses_an_empty_file_as_its_writer_does(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    path.touch()
    with pytest.raises(LedgerUnavailable) as refused:
        SqliteLedger(path, read_only=True)
    message = str(refused.value)
    assert message == _writer_refusal(path)
    assert "empty (0 bytes)" in message and "Restore the file from a backup" in message
    assert "--fresh-ledger" in message and "to read yet" not in message
    assert path.stat().st_size == 0  # the reader never writes the file


def test_a_reader_of_a_missing_file_or_of_one_its_writer_starts_afresh_still_waits_for_the_writer(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.sqlite"
    with pytest.raises(LedgerUnavailable, match=r"no ledger in .* to read yet"):
        SqliteLedger(path, read_only=True)
    path.touch()
    with pytest.raises(LedgerUnavailable, match=r"no ledger in .* to read yet"):
        SqliteLedger(path, read_only=True, fresh_if_empty=True)


def test_ledger_budgets_on_an_empty_file_says_the_spend_is_gone_and_how_to_recover(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "empty.sqlite"
    path.touch()
    body = {"demand_classes": [{"name": "c"}], "pools": [POOL], "ledger": {"path": str(path)},
            "budgets": [{"name": "b", "pools": ["a100"], "monthly_cap_usd": 1000}]}  # fmt: skip
    config = tmp_path / "leadtime.yaml"
    config.write_text(yaml.safe_dump(body), encoding="utf-8")

    assert main(["ledger", "budgets", "--config", str(config), "--at", "2026-03-02T06:00Z"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"the ledger file {path} is empty (0 bytes): the spend it recorded is gone" in captured.err
    assert "leadtime run --fresh-ledger" in captured.err
    assert "to read yet" not in captured.err


def test_a_standby_of_a_shared_empty_file_names_the_problem_and_reads_once_restored(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    path.touch()
    entry = LedgerEntry("a100", T0, T0 + timedelta(minutes=15), 2, 12.0)
    with LeaderWrittenLedger(path) as standby:  # leads nothing: reads read-only
        with pytest.raises(LedgerUnavailable, match=r"is empty \(0 bytes\): the spend it recorded is gone"):
            standby.spent(["a100"], T0, T0 + timedelta(hours=1))
        path.unlink()  # restored from a backup: the writer's file again
        with SqliteLedger(path) as writer:
            writer.record(entry)
        assert standby.spent(["a100"], T0, T0 + timedelta(hours=1)) == pytest.approx(12.0)

"""The SQLite ledger refuses what would lose spend without a word: a zero-length file (unless told to start
afresh) and a second process writing the same file (an exclusive lock on ``<ledger>.lock``). A reader opened
read-only takes no lock and writes nothing; a file the replicas share is written by the leader alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent.ledger.factory import open_daemon_ledger, open_ledger
from agent.ledger.reservations import ReservationRequest
from agent.ledger.shared_file import LeaderWrittenLedger
from agent.ledger.sqlite import SqliteLedger
from config.ledger import LedgerSettings
from models import LedgerEntry, LedgerUnavailable

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2024, 6, 1, tzinfo=UTC)
SPEND = LedgerEntry("a100", T0, T0 + timedelta(minutes=15), 4, 10.0)

_HOLDER = """
import sys
from agent.ledger.sqlite import SqliteLedger
ledger = SqliteLedger(sys.argv[1])
print("holding", flush=True)
sys.stdin.readline()
"""


def test_a_zero_length_file_is_refused_naming_the_file_and_both_ways_out(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    path.touch()
    with pytest.raises(LedgerUnavailable) as refused:
        SqliteLedger(path)
    message = str(refused.value)
    assert str(path) in message and "empty (0 bytes)" in message
    assert "ledger.fresh_if_empty: true" in message and "--fresh-ledger" in message
    assert path.stat().st_size == 0  # left as it was found
    with pytest.raises(LedgerUnavailable, match="empty"):
        open_ledger(LedgerSettings(path=str(path)))


def test_a_zero_length_file_becomes_a_new_ledger_when_told_to_start_fresh(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    path.touch()
    ledger = open_ledger(LedgerSettings(path=str(path), fresh_if_empty=True))
    assert isinstance(ledger, SqliteLedger)
    ledger.record(SPEND)
    ledger.close()
    with SqliteLedger(path) as reopened:  # no longer empty: opens without the option
        assert reopened.spent(["a100"], T0, T0 + timedelta(hours=1)) == pytest.approx(10.0)


def test_a_missing_file_is_a_new_ledger_and_a_used_one_keeps_its_spend(tmp_path: Path) -> None:
    path = tmp_path / "new" / "ledger.sqlite"
    with SqliteLedger(path) as ledger:
        ledger.record(SPEND)
    with SqliteLedger(path, fresh_if_empty=True) as ledger:  # the option never empties a ledger that has data
        assert ledger.spent(["a100"], T0, T0 + timedelta(hours=1)) == pytest.approx(10.0)


def test_a_second_writer_in_another_process_is_refused_naming_the_lock_file_and_holder(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(LedgerUnavailable) as refused:
            SqliteLedger(path)
        message = str(refused.value)
        assert f"{path}.lock" in message
        assert f"pid {holder.pid} on " in message
        assert "own ledger.path" in message
        os.kill(holder.pid, signal.SIGKILL)  # a killed writer leaves no stale lock: the kernel releases it
        holder.wait(timeout=10)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=10)
    with SqliteLedger(path) as ledger:
        ledger.record(SPEND)
        assert (tmp_path / "ledger.sqlite.lock").read_text().startswith(f"pid {os.getpid()} on ")


def test_the_lock_is_held_until_close_also_within_one_process(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    first = SqliteLedger(path)
    with pytest.raises(LedgerUnavailable, match=r"being written by another process"):
        SqliteLedger(path)
    first.close()
    SqliteLedger(path).close()


def test_a_refused_open_does_not_take_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    path.touch()
    with pytest.raises(LedgerUnavailable, match="empty"):
        SqliteLedger(path)
    SqliteLedger(path, fresh_if_empty=True).close()  # would be refused as a second writer if the lock leaked


def test_a_read_only_ledger_reads_beside_the_writer_and_refuses_every_write(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with pytest.raises(LedgerUnavailable, match=r"no ledger in .* to read yet"):
        SqliteLedger(path, read_only=True)
    assert not path.exists()  # a reader never creates the file
    with SqliteLedger(path) as writer, SqliteLedger(path, read_only=True) as reader:  # no writer lock taken
        writer.record(SPEND)
        assert reader.spent(["a100"], T0, T0 + timedelta(hours=1)) == pytest.approx(10.0)
        assert reader.last_entry("a100") == SPEND
        later = LedgerEntry("a100", SPEND.end, SPEND.end + timedelta(minutes=15), 4, 10.0)
        with pytest.raises(LedgerUnavailable, match="open read-only"):
            reader.record(later)
        with pytest.raises(LedgerUnavailable, match="open read-only"):
            reader.update(["a100"], lambda newest: [later])
        request = ReservationRequest("b", ("a100",), T0, T0 + timedelta(days=30), 100.0, 1.0, "x", timedelta(hours=1))
        with pytest.raises(LedgerUnavailable, match="open read-only"):
            reader.reserve(request, T0)
        assert writer.entries() == [SPEND]


def test_a_file_the_replicas_share_is_opened_for_the_leader_alone_to_write(tmp_path: Path) -> None:
    ledger = open_daemon_ledger(LedgerSettings(path=str(tmp_path / "ledger.sqlite"), shared_file=True))
    assert isinstance(ledger, LeaderWrittenLedger)
    with pytest.raises(LedgerUnavailable, match="this replica is a standby"):
        ledger.record(SPEND)  # nobody said it leads
    leading = [True]
    ledger.follow(lambda: leading[0])
    ledger.record(SPEND)
    leading[0] = False  # it stops leading: the file is reopened read-only and the writer lock released
    assert ledger.last_entry("a100") == SPEND
    with SqliteLedger(ledger.path) as next_writer:
        assert next_writer.spent(["a100"], T0, T0 + timedelta(hours=1)) == pytest.approx(10.0)
    ledger.close()

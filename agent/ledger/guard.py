"""Guards around a ledger file: a zero-length file is not silently taken for a new ledger, and only one process
at a time writes the file.

The writer lock is an exclusive ``flock`` on ``<ledger>.lock`` beside the ledger, taken without waiting and held
until the ledger is closed (or the process ends: the kernel releases it, so a killed writer never leaves a stale
lock). The lock file says which process holds it (``pid`` and host), so the refusal can name the holder. It is
never deleted: a deleted and recreated lock file would let two processes each lock a different file.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

from models import LedgerUnavailable


def refuse_empty_file(path: Path, fresh_if_empty: bool) -> None:
    """Raise unless ``path`` is missing, holds data, or is empty and ``fresh_if_empty`` says to start afresh."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    except OSError as exc:
        raise LedgerUnavailable(f"cannot open the ledger file {path}: {exc}") from None
    if size == 0 and not fresh_if_empty:
        raise LedgerUnavailable(
            f"the ledger file {path} is empty (0 bytes): the spend it recorded is gone, and starting a new ledger "
            "in it would restart month-to-date spend at zero. Restore the file from a backup, or start a new ledger "
            "on purpose with ledger.fresh_if_empty: true or `leadtime run --fresh-ledger`"
        )


class WriterLock:
    """An exclusive lock on ``<ledger>.lock``, held from ``acquire`` to ``release``."""

    def __init__(self, lock_path: Path, fd: int) -> None:
        self.path = lock_path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, ledger_path: Path) -> WriterLock:
        lock_path = ledger_path.with_name(ledger_path.name + ".lock")
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise LedgerUnavailable(f"cannot open the ledger lock file {lock_path}: {exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise LedgerUnavailable(
                f"the ledger {ledger_path} is being written by another process ({holder}, holding the lock file "
                f"{lock_path}); two writers on one ledger file lose spend: give each replica its own ledger.path, "
                "or share one ledger through PostgreSQL (ledger.backend: postgresql)"
            ) from None
        except OSError as exc:
            os.close(fd)
            raise LedgerUnavailable(f"cannot lock the ledger lock file {lock_path}: {exc}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        return cls(lock_path, fd)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    if text.startswith(f"pid {os.getpid()} "):
        text += ", this very process"
    return text or "holder unknown"

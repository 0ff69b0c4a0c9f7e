"""A real PostgreSQL server for the tests: its own cluster, made with ``initdb`` in a temporary directory, served by
``postgres`` on 127.0.0.1 on a free port, and stopped by PID.

- The binaries come from the Debian package ``postgresql`` (``make postgresql`` installs it). They live under
  ``/usr/lib/postgresql/<major>/bin``, which is not on PATH (``pg_config --bindir`` may name the client package's
  directory instead); the newest major version there is used.
- PostgreSQL refuses to run as root: when the tests run as root, ``initdb`` and ``postgres`` run as the
  ``postgres`` user the package creates, in a directory that user owns (outside pytest's root-only tmp dir).
- The superuser ``leadtime`` has a random password and every TCP connection must give it (``scram-sha-256``), so
  the tests exercise the password path the daemon uses. No Unix socket is opened.
- Durability is switched off (``fsync``, ``synchronous_commit``, ``full_page_writes``): these servers hold nothing
  worth keeping and the tests stay fast. Sources: the PostgreSQL 15 manual, "initdb", "postgres" and "Write Ahead
  Log" settings.
- The cluster lives in memory (``/dev/shm``) when there is room to spare there (``memory_dir``): each test's new
  database writes some 300 files and 11 MB, which took 0.2 to 0.3 s a database on a disk and 0.05 s in memory.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from itertools import count
from pathlib import Path
from typing import Any

import psycopg

USER = "leadtime"
BINARIES = ("initdb", "postgres")
_names = count()


def find_bindir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<major>/bin`` holding the server binaries, or None."""
    found = [Path(d) for d in glob.glob("/usr/lib/postgresql/*/bin") if all((Path(d) / b).is_file() for b in BINARIES)]
    return max(found, key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0, default=None)


SHM = Path("/dev/shm")
MEMORY_ROOM_BYTES = 4 * 2**30  # free in the tmpfs and available memory: the suite's databases take about 1.5 GiB


def memory_dir(path: Path = SHM, meminfo: Path = Path("/proc/meminfo")) -> Path | None:
    """``path`` when it is a writable directory with ``MEMORY_ROOM_BYTES`` free and as much memory available, or
    None (the default temporary directory is used). A container's 64 MB /dev/shm does not qualify."""
    try:
        fs = os.statvfs(path)
        available = next(
            int(line.split()[1]) * 1024 for line in meminfo.read_text().splitlines() if line.startswith("MemAvailable:")
        )
    except (OSError, StopIteration, ValueError):
        return None
    if not os.access(path, os.W_OK) or min(fs.f_bavail * fs.f_frsize, available) < MEMORY_ROOM_BYTES:
        return None
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One ``postgres`` process on 127.0.0.1 with its own cluster; ``stop`` ends it by PID and removes the files."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.port = free_port()
        self.password = secrets.token_urlsafe(18)
        self.work = Path(tempfile.mkdtemp(prefix="leadtime-postgres-", dir=memory_dir()))
        self._process: subprocess.Popen[bytes] | None = None
        self._as: dict[str, Any] = {}
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.work, owner.pw_uid, owner.pw_gid)
            self._as = {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}

    def url(self, database: str = "postgres") -> str:
        """A URL without the password, as the configuration holds it."""
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def start(self, ready_within_s: float = 60.0) -> None:
        """Starts the server; on any failure, nothing is left running and the cluster's files are removed (in memory,
        they would stay until the machine restarts)."""
        try:
            self._start(ready_within_s)
        except BaseException:
            self.stop()
            raise

    def _start(self, ready_within_s: float) -> None:
        data = self.work / "data"
        pwfile = self.work / "pwfile"
        pwfile.write_text(self.password + "\n", encoding="utf-8")
        if self._as:
            os.chown(pwfile, self._as["user"], self._as["group"])
        subprocess.run(
            [
                str(self.bindir / "initdb"),
                f"--pgdata={data}",
                f"--username={USER}",
                f"--pwfile={pwfile}",
                "--auth-host=scram-sha-256",
                "--auth-local=scram-sha-256",
                "--encoding=UTF8",
                "--no-locale",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            cwd=self.work,
            **self._as,
        )
        pwfile.unlink()
        log = (self.work / "postgres.log").open("wb")
        self._process = subprocess.Popen(
            [
                str(self.bindir / "postgres"),
                "-D",
                str(data),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-c",
                "unix_socket_directories=",
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=50",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.work,
            **self._as,
        )
        deadline = time.monotonic() + ready_within_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"postgres exited early: {(self.work / 'postgres.log').read_text()[-2000:]}")
            try:
                psycopg.connect(self.url(), password=self.password, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                time.sleep(0.05)
        raise RuntimeError("postgres did not accept connections in time")

    def new_database(self) -> str:
        """A new empty database; its URL (without the password)."""
        name = f"ledger_{os.getpid()}_{next(_names)}"
        with psycopg.connect(self.url(), password=self.password, autocommit=True) as db:
            db.execute(f'CREATE DATABASE "{name}"')  # a name made here, not input
        return self.url(name)

    def stop(self) -> None:
        if self._process is not None:
            self._process.send_signal(signal.SIGINT)  # "fast" shutdown: ends sessions, then exits
            try:
                self._process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)
            self._process = None
        shutil.rmtree(self.work, ignore_errors=True)

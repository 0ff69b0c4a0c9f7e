"""A pytest plugin: the strict mypy run that ``tests/test_static.py`` checks, started in the background as soon as the
tests are collected, so that its half a minute of CPU runs while the tests wait on servers, deadlines and sleeps
instead of holding a worker; the mypy test waits for its end and reads its output and exit status.

One run per test session: under pytest-xdist the first worker whose collection holds the mypy test claims the
session's directory (the workers' shared base temporary directory) and starts mypy; the other worker finds it there.
The worker that started it waits for its end before it exits, and stops it if the session is interrupted."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MYPY = Path(sys.executable).parent / "mypy"
MYPY_TEST = "tests/test_static.py::test_mypy_strict_is_clean"
WAIT_AT_MOST_S = 600.0  # as the other static checks' subprocess timeout


@dataclass(frozen=True)
class MypyRun:
    returncode: int
    output: str  # stdout and stderr together


@dataclass
class _Started:
    process: subprocess.Popen[bytes]
    waiter: threading.Thread


_STARTED = pytest.StashKey[_Started]()  # in the config of the process that started mypy


def _run_dir(config: pytest.Config) -> Path:
    """The directory of this session's mypy run, the same for every xdist worker of the session."""
    base = config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    # an xdist worker's base is a directory of the controller's, which is the session's own
    shared = base.parent if hasattr(config, "workerinput") else base
    return Path(shared) / "static-mypy"


def _write(path: Path, text: str) -> None:
    """Whole or absent for a reader."""
    path.with_suffix(".tmp").write_text(text)
    path.with_suffix(".tmp").rename(path)


def _start(run_dir: Path) -> _Started | None:
    """mypy started, or None if it could not be (its test fails with the reason)."""
    try:
        with (run_dir / "output").open("wb") as output:
            process = subprocess.Popen([str(MYPY)], cwd=ROOT, stdout=output, stderr=subprocess.STDOUT)
    except OSError as error:
        (run_dir / "output").write_text(f"mypy could not be started: {error}")
        _write(run_dir / "pid", str(os.getpid()))
        _write(run_dir / "returncode", "127")
        return None
    _write(run_dir / "pid", str(process.pid))

    def wait() -> None:
        _write(run_dir / "returncode", str(process.wait()))

    waiter = threading.Thread(target=wait, name="static-mypy", daemon=True)
    waiter.start()
    return _Started(process, waiter)


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly or not any(i.nodeid.startswith(MYPY_TEST) for i in session.items):
        return
    run_dir = _run_dir(session.config)
    try:
        run_dir.mkdir()
    except FileExistsError:
        return  # another worker of the session started it
    started = _start(run_dir)
    if started is not None:
        session.config.stash[_STARTED] = started


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    started = session.config.stash.get(_STARTED, None)
    if started is None:
        return
    del session.config.stash[_STARTED]
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        started.process.terminate()
    started.waiter.join(WAIT_AT_MOST_S)
    if started.process.poll() is None:
        started.process.kill()
        started.process.wait()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def mypy_run(request: pytest.FixtureRequest) -> MypyRun:
    """The session's mypy run over the whole tree, once it has ended; run here if it was not started."""
    run_dir = _run_dir(request.config)
    if not run_dir.exists():
        done = subprocess.run([str(MYPY)], cwd=ROOT, capture_output=True, timeout=WAIT_AT_MOST_S, check=False)
        return MypyRun(done.returncode, (done.stdout + done.stderr).decode())
    deadline = time.monotonic() + WAIT_AT_MOST_S
    while not (run_dir / "pid").exists():  # claimed by another worker, which writes the pid once mypy is started
        if time.monotonic() > deadline:
            pytest.fail(f"mypy was not started within {WAIT_AT_MOST_S:g} s of its directory being claimed")
        time.sleep(0.1)
    pid = int((run_dir / "pid").read_text())
    while not (run_dir / "returncode").exists():
        if not _alive(pid) and not (run_dir / "returncode").exists():
            time.sleep(1.0)  # the waiter writes the status just after the process ends
            if not (run_dir / "returncode").exists():
                pytest.fail(f"mypy (process {pid}) ended without its exit status: its test worker was stopped")
        if time.monotonic() > deadline:
            pytest.fail(f"mypy (process {pid}) did not end within {WAIT_AT_MOST_S:g} s")
        time.sleep(0.1)
    return MypyRun(int((run_dir / "returncode").read_text()), (run_dir / "output").read_text())

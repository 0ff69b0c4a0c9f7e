"""A pytest plugin: commands that tests read the end of (strict mypy over the tree, a simulation on the bundled trace),
started in the background as soon as the tests are collected, so that their CPU runs while the tests wait on
servers, deadlines and sleeps instead of holding a worker; the fixture of each waits for its end and gives its exit
status and output.

A test module declares its command with ``register`` and reads it with ``ended``; the command starts only in a
session that collected a test using the fixture named in it. One run per session: under pytest-xdist the first
worker whose collection holds such a test claims the command's directory in the session's shared base temporary
directory and starts it; the other worker finds it there. The worker that started it waits for its end before it
exits, and stops it if the session is interrupted."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WAIT_AT_MOST_S = 600.0  # as the other static checks' subprocess timeout


@dataclass(frozen=True)
class Background:
    """``argv`` of the command, given the directory it may write in; started for the tests that use ``fixture``."""

    name: str
    argv: Callable[[Path], list[str]]
    fixture: str


@dataclass(frozen=True)
class Ended:
    returncode: int
    stdout: str
    stderr: str
    directory: Path  # the directory the command was given


_REGISTERED: dict[str, Background] = {}


def register(run: Background) -> Background:
    _REGISTERED[run.name] = run
    return run


@dataclass
class _Started:
    process: subprocess.Popen[bytes]
    waiter: threading.Thread


_STARTED = pytest.StashKey[list[_Started]]()  # in the config of the process that started them


def _run_dir(config: pytest.Config, run: Background) -> Path:
    """The directory of this session's run of ``run``, the same for every xdist worker of the session."""
    base = config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    # an xdist worker's base is a directory of the controller's, which is the session's own
    shared = base.parent if hasattr(config, "workerinput") else base
    return Path(shared) / f"background-{run.name}"


def _write(path: Path, text: str) -> None:
    """Whole or absent for a reader."""
    path.with_suffix(".tmp").write_text(text)
    path.with_suffix(".tmp").rename(path)


def _start(run: Background, run_dir: Path) -> _Started | None:
    """The command started, or None if it could not be (the tests that read it fail with the reason)."""
    (run_dir / "out").mkdir()
    try:
        with (run_dir / "stdout").open("wb") as stdout, (run_dir / "stderr").open("wb") as stderr:
            process = subprocess.Popen(run.argv(run_dir / "out"), cwd=ROOT, stdout=stdout, stderr=stderr)
    except OSError as error:
        (run_dir / "stderr").write_text(f"{run.name} could not be started: {error}")
        _write(run_dir / "pid", str(os.getpid()))
        _write(run_dir / "returncode", "127")
        return None
    _write(run_dir / "pid", str(process.pid))

    def wait() -> None:
        _write(run_dir / "returncode", str(process.wait()))

    waiter = threading.Thread(target=wait, name=f"background-{run.name}", daemon=True)
    waiter.start()
    return _Started(process, waiter)


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    for run in _REGISTERED.values():
        if not any(run.fixture in getattr(item, "fixturenames", ()) for item in session.items):
            continue
        run_dir = _run_dir(session.config, run)
        try:
            run_dir.mkdir()
        except FileExistsError:
            continue  # another worker of the session started it
        started = _start(run, run_dir)
        if started is not None:
            session.config.stash.setdefault(_STARTED, []).append(started)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for started in session.config.stash.get(_STARTED, []):
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            started.process.terminate()
        started.waiter.join(WAIT_AT_MOST_S)
        if started.process.poll() is None:
            started.process.kill()
            started.process.wait()
    session.config.stash[_STARTED] = []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _read(run_dir: Path) -> Ended:
    return Ended(
        int((run_dir / "returncode").read_text()),
        (run_dir / "stdout").read_text(),
        (run_dir / "stderr").read_text(),
        run_dir / "out",
    )


def ended(config: pytest.Config, run: Background) -> Ended:
    """This session's run of ``run``, once it has ended; run here if it was not started."""
    run_dir = _run_dir(config, run)
    try:
        run_dir.mkdir()
    except FileExistsError:
        pass  # started in the background, or run by another worker that needed it first
    else:
        _write(run_dir / "pid", str(os.getpid()))
        (run_dir / "out").mkdir()
        argv = run.argv(run_dir / "out")
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, timeout=WAIT_AT_MOST_S, check=False)
        (run_dir / "stdout").write_bytes(done.stdout)
        (run_dir / "stderr").write_bytes(done.stderr)
        _write(run_dir / "returncode", str(done.returncode))
        return _read(run_dir)
    deadline = time.monotonic() + WAIT_AT_MOST_S
    while not (run_dir / "pid").exists():  # claimed by another worker, which writes the pid once it started it
        if time.monotonic() > deadline:
            pytest.fail(f"{run.name} was not started within {WAIT_AT_MOST_S:g} s of its directory being claimed")
        time.sleep(0.1)
    pid = int((run_dir / "pid").read_text())
    while not (run_dir / "returncode").exists():
        if not _alive(pid):
            time.sleep(1.0)  # the waiter writes the status just after the process ends
            if not (run_dir / "returncode").exists():
                pytest.fail(f"{run.name} (process {pid}) ended without its exit status: its test worker was stopped")
        if time.monotonic() > deadline:
            pytest.fail(f"{run.name} (process {pid}) did not end within {WAIT_AT_MOST_S:g} s")
        time.sleep(0.1)
    return _read(run_dir)

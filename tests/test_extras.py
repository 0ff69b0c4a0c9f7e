"""The ``daemon`` extra: what only the agent in the cluster needs is not installed with leadtime itself, the
commands that do not need it run without it, and a command that does says what to install (``agent.extras``)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from agent.extras import MODULES, missing_extra
from agent.ledger.sqlite import SqliteLedger
from models import LedgerEntry
from tests.conftest import TraceWriter
from tests.ledger.billing_export_rig import HOUR, T0, as_csv, export_rows
from tests.ledger.billing_export_rig import config as billing_config
from tests.scenario.test_simulate import two_class_config

# one worker starts the module's process without the extra once, for every test that runs a command in it
pytestmark = pytest.mark.xdist_group("without-the-extra")
ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 300  # a command that runs longer is killed (SIGALRM): its return code is -14
# A process of the command line as if the daemon extra were not installed: importing any of its modules fails the way
# a missing package does (ModuleNotFoundError naming the module). It imports the command line's modules, as every
# command does first (``build_parser``), then runs each command asked for on its standard input (one JSON line: the
# arguments, working directory, environment and the files for the command's output) in a process of its own, forked
# from it, as ``python -c`` would run ``sys.exit(main(args))`` (an exception escaping main is printed as a traceback,
# return code 1), and answers with the return code. Each command so starts without importing the command line
# afresh (0.5 s a command).
WITHOUT_EXTRA = f"""
import json, os, signal, sys, traceback
for name in {sorted(MODULES)!r}:
    sys.modules[name] = None
from agent.cli import build_parser, main
build_parser()
for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            signal.alarm({TIMEOUT_S})
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            sys.argv = ["-c", *request["args"]]
            for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
            try:
                code = main(request["args"])
            except SystemExit as exit:
                if exit.code is None or isinstance(exit.code, int):
                    code = exit.code or 0
                else:
                    print(exit.code, file=sys.stderr)
            except BaseException:
                traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""
Command = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def without_extra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Command]:
    """Runs ``leadtime <args>`` without the extra (in the working directory ``cwd``, ROOT unless given, and this
    process's environment at the call): its return code, standard output and error."""
    outputs = tmp_path_factory.mktemp("without-extra")
    numbers = itertools.count()
    process = subprocess.Popen(
        [sys.executable, "-c", WITHOUT_EXTRA], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT, text=True
    )
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
        out, err = (outputs / f"{next(numbers)}.{name}" for name in ("out", "err"))
        request = {"args": args, "cwd": str(cwd), "env": dict(os.environ), "stdout": str(out), "stderr": str(err)}
        stdin.write(json.dumps(request) + "\n")
        stdin.flush()
        answer = stdout.readline()
        assert answer, f"the process without the extra ended (return code {process.poll()})"
        return subprocess.CompletedProcess(
            list(args), int(answer), out.read_text(encoding="utf-8"), err.read_text(encoding="utf-8")
        )

    try:
        yield run
    finally:
        stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_leadtime_itself_does_not_install_the_daemon_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"]).lower()
    daemon = " ".join(project["optional-dependencies"]["daemon"]).lower()
    for distribution in ("kubernetes", "google-cloud-container", "google-cloud-tpu", "boto3", "slack-sdk", "psycopg"):
        assert distribution not in core
        assert distribution in daemon
    assert "leadtime[daemon]" in project["optional-dependencies"]["dev"]  # the tests use every part
    build_stage = (ROOT / "deploy/Dockerfile").read_text().split("\nFROM ", 2)[1]
    assert "pip install '.[daemon]'" in build_stage  # the image runs the agent


def test_a_missing_module_of_the_extra_is_named_with_what_to_install() -> None:
    message = missing_extra(ModuleNotFoundError("No module named 'kubernetes'", name="kubernetes"))
    assert message is not None
    assert "'kubernetes'" in message and "pip install 'leadtime[daemon]'" in message
    assert missing_extra(ModuleNotFoundError("No module named 'google.cloud'", name="google.cloud")) is not None
    assert missing_extra(ModuleNotFoundError("No module named 'lightgbm'", name="lightgbm")) is None


def test_simulate_backtest_and_validate_run_without_the_extra(
    tmp_path: Path, write_trace: TraceWriter, without_extra: Command
) -> None:
    steps = 288 + 144  # a day of history, then the next morning up to noon, with a rise at 10:00
    demand = [4.0 + (i % 288 > 120) * 6.0 for i in range(steps)]
    trace = write_trace({"a": demand, "b": [2.0] * steps})
    config = two_class_config("10m")
    config["budgets"] = [{"name": "month", "pools": ["gpu"], "monthly_cap_usd": 10_000}]  # the ledger path too
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    checked = without_extra("validate-config", str(path))
    assert checked.returncode == 0, checked.stderr
    out = tmp_path / "sim"  # the hour before the rise and the two after it, with the budget's ledger
    simulated = without_extra(
        "simulate", "--config", str(path), "--trace", str(trace), "--start", "2024-01-02T09:00:00+00:00",
        "--out", str(out), "--equal-service", "none", "--no-progress",
    )  # fmt: skip
    assert simulated.returncode == 0, simulated.stderr
    policies = json.loads((out / "results.json").read_text())["policies"]
    assert set(policies) == {"forecast", "reactive", "static", "oracle"}
    scored = without_extra(
        "backtest", "--trace", str(trace), "--start", "2024-01-02", "--models", "naive,ets",
        "--out", str(tmp_path / "b"),
    )  # fmt: skip
    assert scored.returncode == 0, scored.stderr


def test_a_configuration_is_checked_for_the_daemon_without_the_extra(without_extra: Command) -> None:
    checked = without_extra("validate-config", "--for", "run", str(ROOT / "deploy/base/config.yaml"))
    assert checked.returncode == 0, checked.stderr
    assert "ok for run" in checked.stdout


def test_the_ledger_commands_read_and_write_a_sqlite_ledger_without_the_extra(
    tmp_path: Path, without_extra: Command
) -> None:
    # Only a PostgreSQL ledger needs the driver: the default SQLite file is read and billed without it.
    path = tmp_path / "ledger.sqlite"
    with SqliteLedger(path) as ledger:
        ledger.record(LedgerEntry("a100", T0, T0 + HOUR, 2, 48.0))
    cfg = billing_config(tmp_path, {"path": str(path)})  # one budget, research, over a100 and h100
    export = tmp_path / "billing.csv"
    export.write_text(as_csv(export_rows()), encoding="utf-8")

    billed = without_extra("ledger", "import-billing", "--config", str(cfg), str(export))
    assert billed.returncode == 0, billed.stderr
    assert "stored 8 billed interval(s)" in billed.stdout
    at = (T0 + 6 * HOUR).isoformat()
    reported = without_extra("ledger", "budgets", "--config", str(cfg), "--at", at)
    assert reported.returncode == 0, reported.stderr
    (research,) = [line.split() for line in reported.stdout.splitlines() if line.startswith("research ")]
    assert research[2:4] == ["10000.00", "48.00"]  # the cap and the estimated spend read from the file


def test_import_sqlite_without_the_extra_asks_for_it_only_for_a_postgresql_ledger(
    tmp_path: Path, without_extra: Command
) -> None:
    source = tmp_path / "ledger.sqlite"
    SqliteLedger(source).close()
    wrong = billing_config(tmp_path, {"path": str(tmp_path / "other.sqlite")})  # a SQLite target: not what it copies to
    refused = without_extra("ledger", "import-sqlite", "--config", str(wrong), str(source))
    assert refused.returncode == 2
    assert "ledger.backend: import-sqlite copies into a PostgreSQL ledger: set postgresql" in refused.stderr
    database = {"backend": "postgresql", "url": "postgresql://leadtime@127.0.0.1:5432/leadtime", "sslmode": "disable"}
    target = billing_config(tmp_path, database)
    needs = without_extra("ledger", "import-sqlite", "--config", str(target), str(source))
    assert needs.returncode == 2
    assert "the PostgreSQL driver" in needs.stderr and "pip install 'leadtime[daemon]'" in needs.stderr


def test_the_daemon_without_the_extra_says_what_to_install(without_extra: Command) -> None:
    started = without_extra("run", "--config", str(ROOT / "config/examples/helios-earth.yaml"))
    assert started.returncode == 2
    assert "Traceback" not in started.stderr
    (line,) = started.stderr.strip().splitlines()
    assert line.startswith("leadtime: this needs ") and "pip install 'leadtime[daemon]'" in line

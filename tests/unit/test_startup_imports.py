"""A fast start: the command line builds its parser, and the daemon its parts, without importing the libraries
that only some commands or some models need (plotting, the statistical and boosting models, database drivers,
cloud SDKs). Each check runs in a fresh interpreter, so what other tests imported cannot hide an import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Imported by no command module at import time: each costs from a fraction of a second to seconds to import.
PARSER_NEVER = (
    "matplotlib",
    "scipy",
    "statsmodels",
    "lightgbm",
    "kubernetes",
    "apscheduler",
    "psycopg",
    "google.api_core",
    "botocore",
    "slack_sdk",
    "tqdm",
    "agent.report",
    "agent.daemon",
)
# Imported by no part ``leadtime run --replay`` assembles: the models import their libraries when they first fit.
REPLAY_DAEMON_NEVER = (
    "matplotlib",
    "scipy",
    "statsmodels",
    "lightgbm",
    "psycopg",
    "google.api_core",
    "botocore",
    "agent.report",
)


def _imported_after(code: str, names: tuple[str, ...]) -> list[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps([n for n in {list(names)!r} if n in sys.modules]))"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    found: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_building_the_parser_imports_no_heavy_library() -> None:
    assert _imported_after("import agent.cli\nagent.cli.build_parser()", PARSER_NEVER) == []


def test_the_replay_daemon_assembles_without_the_models_libraries() -> None:
    code = "\n".join(
        [
            "import agent.cli",
            "agent.cli.build_parser()",
            "from agent.daemon import identity, replay, wiring",
            "from agent.notify import log, queued",
            "from agent.ledger import InMemoryLedger",
            "from agent.sources.trace import read_trace",
            "from forecasting.factory import build_forecaster",
            "from forecasting.registry import build",
            "[build(name) for name in ('naive', 'ets', 'stl', 'lightgbm', 'auto')]",
        ]
    )
    assert _imported_after(code, REPLAY_DAEMON_NEVER) == []

"""The layer contracts in pyproject.toml are enforced, not decorative: a planted forbidden import breaks them, and
planning reads no clock (a call that import-linter cannot see)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent", "forecasting", "actuators", "kube", "config", "models")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports_with(
    tmp_path: Path, module: str, line: str, contract: str | None = None
) -> subprocess.CompletedProcess[str]:
    """lint-imports (one contract, or all) on a copy of the packages where ``module`` got one more line."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / (module.replace(".", "/") + ".py")
    target.write_text(target.read_text() + f"\n{line}\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    only = ["--contract", contract] if contract else []
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", *only],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("agent.planning.memory", "import os", "planning-pure"),
        ("agent.planning.memory", "import sqlite3", "planning-pure"),
        ("agent.planning.memory", "from agent.ledger import sqlite", "planning-pure"),
        ("agent.executor", "from agent.loop import Agent", "agent-layers"),
        ("agent.loop", "from agent.commands import simulate", "agent-layers"),
        ("agent.sources.trace", "from agent.executor import Executor", "agent-io-below-loop"),
        ("models.demand", "import agent", "top-layers"),
        ("kube.errors", "import actuators", "top-layers"),
        ("agent.daemon.lease", "import kubernetes", "kube-owns-kubernetes"),
        ("actuators.kubernetes_drain", "from kubernetes.client import CoreV1Api", "kube-owns-kubernetes"),
        ("agent.state.configmap", "from kubernetes.client.exceptions import ApiException", "kube-owns-kubernetes"),
    ],
)
def test_a_planted_forbidden_import_breaks_its_contract(tmp_path: Path, module: str, line: str, contract: str) -> None:
    result = _lint_imports_with(tmp_path, module, line, contract)
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert "1 broken" in out, out


def test_the_contracts_hold_on_the_tree_as_it_is(tmp_path: Path) -> None:
    result = _lint_imports_with(tmp_path, "models.demand", "")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


CLOCK_CALLS = {"now", "utcnow", "today", "time", "monotonic", "perf_counter", "sleep", "open"}


def test_planning_reads_no_clock_and_opens_no_file() -> None:
    found = []
    for path in sorted((ROOT / "agent" / "planning").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in CLOCK_CALLS:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}()")
    assert found == [], "planning must take time and data as arguments: " + ", ".join(found)


def test_every_error_class_lives_in_models_errors() -> None:
    """One hierarchy in one file, so a caller can see what to catch; private control-flow classes excepted."""
    import builtins

    known = {name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, Exception)}
    errors_module = ROOT / "models" / "errors.py"
    known |= {n.name for n in ast.walk(ast.parse(errors_module.read_text())) if isinstance(n, ast.ClassDef)}
    elsewhere: list[str] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == errors_module:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                    continue
                bases = {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases}
                if bases & known:
                    elsewhere.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert elsewhere == [], "define error classes in models/errors.py: " + ", ".join(elsewhere)

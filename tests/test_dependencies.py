"""Every third-party module the product imports comes from a distribution it declares itself (not one that
happens to arrive with another package), every declared dependency is used, and ``pip check`` is clean."""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("models", "config", "kube", "forecasting", "actuators", "agent")
# Declared for what they bring rather than for an import of their own name.
USED_WITHOUT_IMPORT = {"scipy"}  # statsmodels' optimisers; our floor is higher than the one statsmodels sets


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _names(specs: list[str]) -> set[str]:
    return {_normalise(re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0]) for spec in specs}


def _declared() -> set[str]:
    """What leadtime declares: its dependencies and those of the ``daemon`` extra (``agent.extras``)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return _names(project["dependencies"]) | _names(project["optional-dependencies"]["daemon"])


def imported_modules(source: str) -> set[str]:
    """Absolute module paths imported by ``source``; ``from a.b import c`` gives ``a.b.c`` (c may be a module)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@functools.cache
def _package_owners() -> dict[str, frozenset[str]]:
    """Importable package or module path -> the distributions that install it."""
    owners: dict[str, set[str]] = {}
    for dist in importlib.metadata.distributions():
        name = _normalise(dist.metadata["Name"])
        for file in dist.files or []:
            path = str(file)
            if path.endswith("/__init__.py"):
                owners.setdefault(path[: -len("/__init__.py")].replace("/", "."), set()).add(name)
            elif path.endswith(".py"):  # a top-level module, or one of a namespace package (google/rpc/code_pb2.py)
                owners.setdefault(path[:-3].replace("/", "."), set()).add(name)
    return {module: frozenset(dists) for module, dists in owners.items()}


def distribution_of(module: str) -> frozenset[str]:
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        if (owners := _package_owners().get(".".join(parts[:end]))) is not None:
            return owners
    return frozenset()


def _third_party() -> dict[str, set[str]]:
    """Distribution -> our files that import it."""
    found: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for module in imported_modules(path.read_text()):
                top = module.split(".")[0]
                if top in sys.stdlib_module_names or top in PACKAGES or top == "__future__":
                    continue
                dists = distribution_of(module)
                assert dists, f"{path.relative_to(ROOT)} imports {module!r}, which no installed distribution provides"
                for dist in dists:
                    found.setdefault(dist, set()).add(str(path.relative_to(ROOT)))
    return found


def test_the_scan_resolves_imports_to_their_own_distribution() -> None:
    assert imported_modules("import a.b\nfrom c.d import e\nfrom . import f\nfrom .g import h\n") == {"a.b", "c.d.e"}
    assert distribution_of("google.cloud.container_v1") == {"google-cloud-container"}
    assert distribution_of("google.api_core.exceptions") == {"google-api-core"}
    assert distribution_of("yaml.safe_load") == {"pyyaml"}


def test_every_imported_distribution_is_declared() -> None:
    imported = _third_party()
    missing = {dist: sorted(files)[:3] for dist, files in imported.items() if dist not in _declared()}
    assert missing == {}, f"imported but not declared in pyproject.toml: {missing}"


def test_every_declared_dependency_is_imported() -> None:
    unused = _declared() - set(_third_party()) - USED_WITHOUT_IMPORT
    assert unused == set(), f"declared in pyproject.toml but never imported: {sorted(unused)}"


def test_pip_check_passes() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr

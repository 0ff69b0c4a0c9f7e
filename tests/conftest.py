"""Shared fixtures: paths to the bundled data and example configurations, small synthetic traces, and (as plugins)
the fake cloud and Kubernetes API servers of ``tests/fakes``, the PostgreSQL server of ``tests/postgres`` and the
commands started in the background of ``tests/background_runs.py``."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest_plugins = ("tests.fakes.fixtures", "tests.postgres.fixtures", "tests.background_runs")

ROOT = Path(__file__).resolve().parents[1]
BUNDLED_TRACE = ROOT / "data" / "helios-earth" / "demand_5min.csv.gz"
EXAMPLES = ROOT / "config" / "examples"


@pytest.fixture(autouse=True)
def _restore_root_logger() -> Iterator[None]:
    """``leadtime``'s main() installs its stderr handler and level on the root logger; a test that calls it must
    not leave them to the next test (whose log lines would go to the terminal instead of pytest's capture)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture(scope="session", autouse=True)
def _aws_models_read_once() -> Iterator[None]:
    """botocore reads the service models it ships (JSON files) afresh for every boto3 session, 0.1 to 0.7 s a
    client: the AWS actuators make one session per build, as they should, and the tests build them many times. In
    the tests one loader per data path serves every session: the same files, read once per process."""
    import botocore.session

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(botocore.session, "create_loader", functools.cache(botocore.session.create_loader))
        yield


@pytest.fixture(scope="session")
def _no_kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kube") / "no-kubeconfig"


@pytest.fixture(autouse=True)
def _outside_a_pod(monkeypatch: pytest.MonkeyPatch, _no_kubeconfig: Path) -> None:
    """The suite runs as on a workstation even where its machine is a pod: ``leadtime run`` refuses leader election
    turned off in a pod, and the Kubernetes client prefers the in-cluster account there; tests that mean a pod set
    the variables themselves. Nor does it read the workstation's kubeconfig (a command that falls back on it, as
    ``recommend`` does to read drains, would list a real cluster's nodes): a test that means one writes its own."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(_no_kubeconfig))


@pytest.fixture
def bundled_trace() -> Path:
    return BUNDLED_TRACE


@pytest.fixture
def examples() -> Path:
    return EXAMPLES


TraceWriter = Callable[..., Path]


@pytest.fixture
def write_trace(tmp_path: Path) -> TraceWriter:
    """Write a long-format trace CSV from per-series value lists on a regular 5-minute grid."""

    def write(
        series: dict[str, Sequence[float]],
        start: str = "2024-01-01T00:00:00+00:00",
        step: str = "5min",
        name: str = "trace.csv",
    ) -> Path:
        frames = []
        for uid, values in series.items():
            stamps = pd.date_range(start, periods=len(values), freq=step)
            frames.append(
                pd.DataFrame(
                    {
                        "unique_id": uid,
                        "ds": stamps.strftime("%Y-%m-%dT%H:%M:%S%z"),
                        "y": np.asarray(values, dtype=float),
                    }
                )
            )
        path = tmp_path / name
        pd.concat(frames).to_csv(path, index=False)
        return path

    return write

"""The credit a bundled trace requires is kept however its path was typed: named without its directory from
inside it, through ``..``, or through a symbolic link; a file of the same name elsewhere is not credited."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.simulation.results import trace_attribution

ROOT = Path(__file__).resolve().parents[2]
HELIOS = ROOT / "data" / "helios-earth"


def test_the_bundled_trace_named_from_its_own_directory_is_credited(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(HELIOS)
    credit = trace_attribution("demand_5min.csv.gz")
    assert credit is not None and "Hu et al." in credit and "CC BY 4.0" in credit
    monkeypatch.chdir(ROOT / "data" / "philly")
    credit = trace_attribution("../helios-earth/demand_5min.csv.gz")
    assert credit is not None and "Hu et al." in credit


def test_a_link_to_the_bundled_trace_is_credited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "trace.csv.gz").symlink_to(HELIOS / "demand_5min.csv.gz")
    monkeypatch.chdir(tmp_path)
    credit = trace_attribution("trace.csv.gz")
    assert credit is not None and "Hu et al." in credit


def test_a_file_of_the_same_name_elsewhere_is_not_credited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "demand_5min.csv.gz").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    assert trace_attribution("demand_5min.csv.gz") is None

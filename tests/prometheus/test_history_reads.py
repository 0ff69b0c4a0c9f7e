"""History reads (``export-trace``, ``simulate --source prometheus``) against the real Prometheus loaded with the
Helios trace: a class is judged on the whole range read, not on its newest value as the live source judges it.
A collector down at ``--end``, or a class retired inside the range, keeps the values it had and leaves the rest
as gaps, never 0; only a class with no value in the whole range is refused, the refusal naming ``--end``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from agent.cli import main
from agent.sources.prometheus_queries import demand_query
from agent.sources.trace import read_trace
from config import load_settings
from tests.prometheus.server import TENANTS, LoadedTrace, PrometheusServer

pytestmark = pytest.mark.xdist_group("prometheus")
# The collector was down from 2020-05-12T06:00Z to 07:55Z: at 07:00Z the newest value is an hour old, four
# times the default max_staleness of 15 minutes.
START, END = "2020-05-11T07:00:00+00:00", "2020-05-12T07:00:00+00:00"
RETIRED_AT = pd.Timestamp("2020-05-11T19:00:00+00:00")


def _config(tmp_path: Path, url: str, extra: dict[str, str] | None = None) -> Path:
    """The tenants' default queries, and ``extra`` classes, each with its own query."""
    section: dict[str, Any] = {"url": url, "retries": 0}
    if extra:
        section["classes"] = {name: {"query": query} for name, query in extra.items()}
    document: dict[str, Any] = {
        "demand_classes": [{"name": t} for t in [*TENANTS, *(extra or {})]],
        "pools": [
            {
                "id": "a100",
                "kind": "gpu-node-pool",
                "chips_per_unit": 8,
                "max_units": 60,
                "price_per_chip_hour_usd": 3.67,
                "lead_time": "10m",
                "serves": [*TENANTS, *(extra or {})],
            }
        ],
        "prometheus": section,
    }
    path = tmp_path / "leadtime.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def _export(config: Path, out: Path) -> int:
    return main(["export-trace", "--config", str(config), "--out", str(out), "--start", START, "--end", END])


def _expected(loaded: LoadedTrace, name: str) -> pd.Series:
    return pd.Series(loaded.demand[name], index=loaded.index)[pd.Timestamp(START) : pd.Timestamp(END)].iloc[:-1]


def test_a_collector_down_at_the_end_keeps_the_history_before_it_and_its_gaps(
    prometheus: PrometheusServer,
    loaded_trace: LoadedTrace,
    tmp_path: Path,
) -> None:
    out = tmp_path / "export.csv"
    assert _export(_config(tmp_path, prometheus.url), out) == 0
    trace = read_trace(out)
    assert len(trace.index) == 288
    for i, name in enumerate(TENANTS):
        expected, got = _expected(loaded_trace, name), trace.values[:, trace.series.index(name)]
        assert np.isnan(got[-12:]).all(), name  # the outage: gaps, never 0
        np.testing.assert_allclose(got, expected.to_numpy(), rtol=1e-9, equal_nan=True, err_msg=name)
        assert not np.isnan(got[:-12]).any(), i


def test_a_class_retired_inside_the_range_keeps_what_it_had(
    prometheus: PrometheusServer,
    loaded_trace: LoadedTrace,
    tmp_path: Path,
) -> None:
    plain = _config(tmp_path, prometheus.url)
    tenant = load_settings(plain).demand_class_models()[0]
    query = demand_query(tenant, load_settings(plain).prometheus)  # type: ignore[arg-type]
    retired = f"({query}) unless on() (vector(time()) >= {RETIRED_AT.timestamp():.0f})"
    config = _config(tmp_path, prometheus.url, {"retired": retired})
    out = tmp_path / "export.csv"
    assert _export(config, out) == 0
    trace = read_trace(out)
    got = pd.Series(trace.values[:, trace.series.index("retired")], index=trace.index)
    expected = _expected(loaded_trace, TENANTS[0])
    before = got.index < RETIRED_AT
    np.testing.assert_allclose(got[before].to_numpy(), expected[before].to_numpy(), rtol=1e-9)
    assert got[~before].isna().all() and (~before).sum() == 144


def test_a_class_without_any_value_in_the_range_is_refused_naming_the_end(
    prometheus: PrometheusServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = _config(tmp_path, prometheus.url, {"never": "sum(no_such_metric)"})
    assert _export(config, tmp_path / "export.csv") == 3
    (line,) = capsys.readouterr().err.splitlines()
    assert "no usable data for demand class(es): 'never': Prometheus returned no data for the whole range" in line
    assert f"--end {pd.Timestamp(END).isoformat()}" in line
    assert not (tmp_path / "export.csv").exists()

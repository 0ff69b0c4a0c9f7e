"""``leadtime recommend`` against the real Prometheus loaded with the Helios trace: the three files, what they say,
and that nothing is ever written to a pool."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from actuators.simulated import SimulatedCluster
from agent.cli import main
from agent.commands.recommend import recommend
from agent.sources.prometheus import PrometheusSource
from agent.sources.prometheus_queries import demand_queries
from agent.sources.resource_check import CHECK, default_query_resources, seen_query, unknown_resources
from config import load_settings
from config.prometheus import PrometheusSettings
from models import ActionResult, DemandClass, MetricSourceUnavailable, MetricsUnavailable, PoolState
from models.clock import SimulatedClock
from tests.prometheus.server import TENANTS, PrometheusServer

pytestmark = pytest.mark.xdist_group("prometheus")
AT = datetime(2020, 5, 8, 4, 0, tzinfo=UTC)  # 12:00 in the cluster's zone, a week into the trace
OUTAGE = datetime(2020, 5, 10, 4, 0, tzinfo=UTC)  # the collector was down all of 2020-05-10 (UTC+8)


class WritesForbidden:
    """The read side of a pool actuator that fails the test if anything tries to change a pool."""

    def __init__(self, inner: SimulatedCluster) -> None:
        self.inner = inner
        self.writes: list[tuple[str, int]] = []

    def list_pools(self) -> Sequence[PoolState]:
        return self.inner.list_pools()

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        self.writes.append((pool_id, to_units))
        raise AssertionError(f"recommend tried to resize {pool_id} to {to_units}")

    def drain(self, pool_id: str, node: str, key: str) -> ActionResult:
        raise AssertionError(f"recommend tried to drain {node} of {pool_id}")


def write_config(tmp_path: Path, server: PrometheusServer, **budget: Any) -> Path:
    """The pooled Helios scenario against ``server``, budget ``research`` (its settings updated by ``budget``)."""
    document: dict[str, Any] = {
        "demand_classes": [{"name": t} for t in TENANTS],
        "pools": [
            {
                "id": "a100-on-demand",
                "kind": "gpu-node-pool",
                "chips_per_unit": 8,
                "max_units": 60,
                "price_per_chip_hour_usd": 3.67,
                "lead_time": "10m",
                "serves": list(TENANTS),
            }
        ],
        "budgets": [{"name": "research", "pools": ["a100-on-demand"], "monthly_cap_usd": 500000, **budget}],
        "prometheus": {"url": server.url, "retries": 0},
        "ledger": {"path": str(tmp_path / "leadtime-ledger.sqlite")},  # none yet: no spend so far is known
    }
    path = tmp_path / "leadtime.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def _run(tmp_path: Path, server: PrometheusServer, at: datetime, units: int) -> tuple[dict[str, Any], WritesForbidden]:
    config = write_config(tmp_path, server)
    settings = load_settings(config)
    read_side = WritesForbidden(
        SimulatedCluster(settings.pool_specs(), SimulatedClock(at), initial_units={"a100-on-demand": units})
    )
    document = recommend(settings, str(config), tmp_path / "out", at, read_side, pool_state_source="test")
    return document, read_side


class CountingSource(PrometheusSource):
    """The real Prometheus source, recording the length of every window it is asked for."""

    windows: list[timedelta]

    def fetch_each(
        self, classes: Sequence[DemandClass], start: datetime, end: datetime, step: timedelta
    ) -> tuple[pd.DataFrame, dict[str, MetricsUnavailable]]:
        self.windows.append(end - start)
        return super().fetch_each(classes, start, end, step)


@dataclass(frozen=True)
class ScaleUp:
    """A dry run at ``AT`` of the pool at 10 units: the document, the writes tried, the windows read, where."""

    document: dict[str, Any]
    writes: list[tuple[str, int]]
    windows: list[timedelta]
    out: Path
    config: Path


@pytest.fixture(scope="module")
def scale_up(prometheus: PrometheusServer, tmp_path_factory: pytest.TempPathFactory) -> ScaleUp:
    """The dry run of an undersized pool, read through the source ``recommend`` builds (``CountingSource`` is it,
    recording each window) and a read side that fails on any write: the tests of that run read this one."""
    tmp_path = tmp_path_factory.mktemp("scale-up")
    config = write_config(tmp_path, prometheus)
    settings = load_settings(config)
    assert settings.prometheus is not None
    source = CountingSource.from_settings(
        settings.prometheus, demand_queries(settings.demand_class_models(), settings.prometheus)
    )
    source.windows = []
    read_side = WritesForbidden(
        SimulatedCluster(settings.pool_specs(), SimulatedClock(AT), initial_units={"a100-on-demand": 10})
    )
    out = tmp_path / "out"
    document = recommend(settings, str(config), out, AT, read_side, pool_state_source="test", source=source)
    return ScaleUp(document, read_side.writes, source.windows, out, config)


def test_recommend_scales_up_an_undersized_pool_and_writes_three_files(scale_up: ScaleUp) -> None:
    document, out = scale_up.document, scale_up.out
    assert scale_up.writes == []
    assert json.loads((out / "recommendation.json").read_text()) == document
    (pool,) = document["pools"]
    observed = sum(c["observed"] for c in document["classes"])
    assert pool["current_units"] == 10
    assert pool["action"] == "scale-up"
    assert pool["recommended_units"] >= math.ceil(observed / 8)
    assert document["dry_run"] == [
        {"pool_id": "a100-on-demand", "to_units": pool["recommended_units"], "key": document["dry_run"][0]["key"]}
    ]
    assert document["cost"]["current_per_day_usd"] == pytest.approx(10 * 8 * 3.67 * 24)
    assert document["cost"]["change_per_day_usd"] > 0
    for entry in document["classes"]:
        assert entry["problem"] is None
        assert entry["lead_time_s"] == 600
        assert set(entry["forecast"]["quantiles"]) >= {"0.5", "0.9"}
    (budget,) = document["budgets"]
    hours_left = (datetime.fromisoformat(budget["period_end"]) - AT).total_seconds() / 3600.0
    assert budget["recommended_projected_period_usd"] == pytest.approx(
        pool["recommended_units"] * 8 * 3.67 * hours_left, rel=1e-6
    )
    quality = {q["demand_class"]: q for q in document["backtest"]["classes"]}
    assert set(quality) == set(TENANTS)
    assert quality["earth/vc6YE"]["origins"] >= 20
    assert 0.0 <= quality["earth/vc6YE"]["coverage"] <= 1.0
    # the peak the planner provisions: over the 10-minute lead time and one tick, on the 5-minute grid
    tick = load_settings(scale_up.config).loop.tick_interval.total_seconds()
    assert quality["earth/vc6YE"]["peak_steps"] == math.ceil((600 + tick) / 300)
    assert 0.0 <= quality["earth/vc6YE"]["peak_coverage"] <= 1.0
    page = (out / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 2
    markdown = (out / "report.md").read_text()
    assert "| a100-on-demand | 10 |" in markdown
    assert "scale-up" in markdown
    # the "why" column is the pool's decision chain, from the demand to the recommended target
    assert pool["why"].startswith("need ") and pool["why"].endswith(f"-> target {pool['recommended_units']}")
    assert pool["decision"]["target"] == pool["recommended_units"]
    assert f"| {pool['why']} |" in markdown
    assert document["warnings"] == []  # nvidia_com_gpu is on the pool's node and in the tenants' pods
    assert "Warnings" not in markdown


def test_a_resource_kube_state_metrics_never_saw_is_named_with_the_closest_one(
    prometheus: PrometheusServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, prometheus)
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    raw["prometheus"]["classes"] = {"earth/vcMod": {"resource": "nvidia.com/gpus"}}  # one letter too many
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    out = tmp_path / "out"
    assert main(["recommend", "--config", str(config), "--out", str(out), "--at", AT.isoformat()]) == 0
    document = json.loads((out / "recommendation.json").read_text())
    (warning,) = [w for w in document["warnings"] if w.startswith("class(es)")]  # apart from the assumed units
    assert f"warning: {warning}" in capsys.readouterr().err
    assert warning.startswith("class(es) earth/vcMod: no node offered and no pod requested the resource")
    assert "'nvidia_com_gpus'" in warning
    assert "the closest resources nodes offered or pods requested in that time: nvidia_com_gpu" in warning
    (mod,) = [c for c in document["classes"] if c["name"] == "earth/vcMod"]
    assert mod["observed"] == 0.0  # what the warning is about: the misspelled resource reads as no demand
    assert f"- {warning}" in (tmp_path / "out" / "report.md").read_text()
    assert html.escape(warning) in (tmp_path / "out" / "report.html").read_text()


@pytest.mark.parametrize(
    ("resource", "lookback", "at", "seen"),
    [
        ("nvidia_com_gpu", timedelta(days=7), AT, True),
        ("cpu", timedelta(hours=1), AT, True),  # offered by the node, requested by no pod
        ("nvidia_com_gpus", timedelta(days=7), AT, False),
        # weeks after the trace's last sample: not seen within the lookback
        ("nvidia_com_gpu", timedelta(days=7), datetime(2020, 7, 1, tzinfo=UTC), False),
    ],
)
def test_the_resource_check_looks_back_over_nodes_and_pods(
    prometheus: PrometheusServer, resource: str, lookback: timedelta, at: datetime, seen: bool
) -> None:
    settings = PrometheusSettings.model_validate({"url": prometheus.url, "retries": 0})
    source = PrometheusSource.from_settings(settings, {})
    assert bool(source.instant(CHECK, seen_query(resource, lookback), at)) is seen


def test_a_resource_check_prometheus_cannot_answer_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    never_started = PrometheusServer(tmp_path, tmp_path)  # a free port nobody listens on
    settings = PrometheusSettings.model_validate({"url": never_started.url, "retries": 0})
    source = PrometheusSource.from_settings(settings, {})
    classes = [DemandClass(t) for t in TENANTS]
    assert unknown_resources(source, classes, settings, AT, timedelta(days=7)) == []
    (record,) = [r for r in caplog.records if "could not check the resource" in r.getMessage()]
    assert "nvidia_com_gpu" in record.getMessage() and "cannot connect to Prometheus" in record.getMessage()
    # classes read by a query of their own, or under Kueue, are not checked at all
    kueue = settings.model_copy(update={"demand_metrics": "kueue"})
    assert default_query_resources(classes, kueue) == {}


def test_recommend_reads_the_history_window_once(scale_up: ScaleUp) -> None:
    assert scale_up.document["pools"][0]["action"] == "scale-up"
    history = load_settings(scale_up.config).forecast.history
    assert scale_up.windows.count(history) == 1
    assert all(window < history for window in scale_up.windows if window != history)  # the tick's recent window


def test_recommend_never_shrinks_on_a_forecast_alone(prometheus: PrometheusServer, tmp_path: Path) -> None:
    document, read_side = _run(tmp_path, prometheus, AT, units=60)
    (pool,) = document["pools"]
    assert read_side.writes == []
    assert pool["recommended_units"] == 60  # no unit has been observed idle yet
    assert pool["action"] == "hold"
    assert "not-idle: forecast allows" in pool["why"] and pool["why"].endswith("-> target 60")
    assert document["cost"]["change_per_day_usd"] == 0
    # what the forecast would let go once units are seen idle, apart from the recommendation itself
    releasable = pool["releasable_once_idle_units"]
    assert 0 < releasable < 60 and releasable == 60 - pool["decision"]["bounded"], (pool, document["cost"])
    assert f"forecast allows {60 - releasable} units" in pool["why"]
    per_day = releasable * 8 * 3.67 * 24
    assert pool["releasable_once_idle_per_day_usd"] == pytest.approx(per_day)
    assert document["cost"]["releasable_once_idle_per_day_usd"] == pytest.approx(per_day)
    assert f"save a further {per_day:,.2f} USD/day once" in (tmp_path / "out" / "report.md").read_text()


def test_recommend_during_an_outage_of_every_class_stops_with_one_reason(
    prometheus: PrometheusServer, tmp_path: Path
) -> None:
    expected = r"no usable data for any demand class: 'earth/vc6YE', 'earth/vcMod', 'earth/vcJkd': "
    with pytest.raises(MetricSourceUnavailable, match=expected):
        _run(tmp_path, prometheus, OUTAGE, units=30)
    assert not (tmp_path / "out" / "report.html").exists()


def test_a_class_without_data_is_named_in_the_report_and_its_pools_hold(
    prometheus: PrometheusServer, tmp_path: Path
) -> None:
    config = write_config(tmp_path, prometheus)
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    raw["demand_classes"].append({"name": "earth/vcGone"})
    raw["pools"][0]["serves"].append("earth/vcGone")
    # A ClusterQueue that was never recorded: the query answers with no series at all.
    never = 'sum(kueue_cluster_queue_resource_usage{cluster_queue=~"gone|lost"})'
    raw["prometheus"]["classes"] = {"earth/vcGone": {"query": never}}
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    settings = load_settings(config)
    read_side = SimulatedCluster(settings.pool_specs(), SimulatedClock(AT), initial_units={"a100-on-demand": 30})
    document = recommend(settings, str(config), tmp_path / "out", AT, read_side, pool_state_source="test")
    (gone,) = [c for c in document["classes"] if c["name"] == "earth/vcGone"]
    assert gone["observed"] is None and gone["forecast"] is None
    assert "no data" in gone["problem"]
    assert document["pools"][0]["recommended_units"] == 30  # held: one of the classes it serves is unseen
    markdown = (tmp_path / "out" / "report.md").read_text()
    (row,) = [line for line in markdown.splitlines() if line.startswith("| earth/vcGone |")]
    assert "| no data |" in row and "| 0 |" not in row
    assert never.replace("|", "\\|") in row  # the query as written, escaped only for the table
    page = (tmp_path / "out" / "report.html").read_text()
    assert html.escape(never) in page


def test_the_command_line_writes_the_files(
    prometheus: PrometheusServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, prometheus)
    out = tmp_path / "cli"
    code = main(
        [
            "recommend",
            "--config",
            str(config),
            "--out",
            str(out),
            "--at",
            "2020-05-08T12:00+08:00",
            "--current-units",
            "a100-on-demand=12",
        ]
    )
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == ["recommendation.json", "report.html", "report.md"]
    document = json.loads((out / "recommendation.json").read_text())
    assert document["at"] == AT.isoformat()
    assert document["pools"][0]["current_units"] == 12
    assert "USD/day" in capsys.readouterr().out


def test_the_command_line_needs_a_prometheus_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.yaml"
    plain = {
        "demand_classes": [{"name": "gpu"}],
        "pools": [
            {
                "id": "p",
                "kind": "gpu-node-pool",
                "chips_per_unit": 8,
                "max_units": 2,
                "price_per_unit_hour_usd": 1.0,
                "lead_time": "5m",
                "serves": ["gpu"],
            }
        ],
    }
    config.write_text(yaml.safe_dump(plain), encoding="utf-8")
    assert main(["recommend", "--config", str(config), "--out", str(tmp_path / "o")]) == 2
    assert "add a prometheus section" in capsys.readouterr().err
    with pytest.raises(SystemExit) as bad_units:
        main(["recommend", "--config", str(config), "--out", str(tmp_path / "o"), "--current-units", "p=x"])
    assert bad_units.value.code == 2


def test_an_unreachable_prometheus_stops_before_any_query(tmp_path: Path) -> None:
    never_started = PrometheusServer(tmp_path, tmp_path)  # a free port nobody listens on
    expected = r"cannot use Prometheus at http://127\.0\.0\.1:\d+: cannot connect to Prometheus: \[Errno 111\]"
    with pytest.raises(MetricSourceUnavailable, match=expected):
        _run(tmp_path, never_started, AT, units=7)


@pytest.mark.parametrize("at", ["2020-05-10T12:00+08:00", None], ids=["no-data-for-any-class", "unreachable"])
def test_the_command_line_exits_3_with_one_line(
    prometheus: PrometheusServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], at: str | None
) -> None:
    server = prometheus if at is not None else PrometheusServer(tmp_path, tmp_path)
    config = write_config(tmp_path, server)
    args = ["recommend", "--config", str(config), "--out", str(tmp_path / "o"), "--at", at or AT.isoformat()]
    assert main([*args, "--current-units", "a100-on-demand=4"]) == 3
    printed = capsys.readouterr()
    assert printed.out == ""
    (line,) = printed.err.splitlines()
    assert line.startswith("leadtime: ") and server.url in line
    assert "USD/day" not in line


def test_a_password_in_the_prometheus_url_is_never_written(
    prometheus: PrometheusServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    password = "hunter2Secret"
    config = write_config(tmp_path, prometheus)
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    raw["prometheus"]["url"] = prometheus.url.replace("://", f"://admin:{password}@")
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    out = tmp_path / "cli"
    caplog.set_level("DEBUG")
    args = ["recommend", "--config", str(config), "--out", str(out), "--at", "2020-05-08T12:00+08:00"]
    assert main([*args, "--current-units", "a100-on-demand=12"]) == 0
    written = {path.name: path.read_text(encoding="utf-8") for path in out.iterdir()}
    assert set(written) == {"recommendation.json", "report.html", "report.md"}
    leaked = [name for name, text in written.items() if password in text]
    assert leaked == []
    document = json.loads(written["recommendation.json"])
    assert document["prometheus"] == prometheus.url.replace("://", "://<redacted>@")
    assert all(c["forecast"] is not None for c in document["classes"])  # the credentials were used, not lost
    assert "&lt;redacted&gt;@" in written["report.html"] and "<redacted>@" in written["report.md"]
    printed = capsys.readouterr()
    assert password not in printed.out + printed.err + caplog.text

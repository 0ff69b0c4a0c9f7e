"""A default demand query over several ClusterQueues, several namespaces or a sharded kube-state-metrics answers
only while every part it selects is reported: a part that is missing leaves the class unavailable, never adds 0.

Each query is evaluated by promtool over the gauges as Kueue v0.18 (kubernetes-sigs/kueue pkg/metrics/metrics.go)
and kube-state-metrics (docs/metrics/workload/pod-metrics.md, docs/metrics/cluster/namespace-metrics.md, and its
telemetry: README "Kube-state-metrics self metrics", ``kube_state_metrics_shard_ordinal{shard_ordinal="0"} 0``,
``kube_state_metrics_total_shards 1``) export them; see tests/fakes/REFERENCE.md. The reviewer's cases are also
read through ``PrometheusSource`` from a Prometheus server holding the same series."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent.sources.prometheus import PrometheusSource
from agent.sources.prometheus_queries import kube_state_metrics_demand_query, kueue_demand_query
from config.prometheus import PrometheusSettings
from models import MetricsUnavailable
from tests.prometheus.promql_cases import Expect, assert_answers
from tests.prometheus.server import PrometheusServer, prometheus_available

GPU = 'resource="nvidia.com/gpu"'
INF = float("inf")
KUEUE_GAUGES = (
    "kueue_cluster_queue_resource_reservation",
    "kueue_cluster_queue_nominal_quota",
    "kueue_cluster_queue_borrowing_limit",
    "kueue_cluster_queue_resource_pending",
    "kueue_cluster_queue_status",
)


@dataclass(frozen=True)
class Flavor:
    name: str
    nominal: float
    reserved: float


@dataclass(frozen=True)
class Queue:
    name: str
    pending: float
    flavors: tuple[Flavor, ...]
    cohort: str = ""
    without: tuple[str, ...] = ()  # gauges this ClusterQueue does not report
    without_flavor: tuple[tuple[str, str], ...] = ()  # (gauge, flavor) it does not report

    def series(self) -> dict[str, float]:
        found: dict[str, float] = {}
        role = 'replica_role="leader"'
        for f in self.flavors:
            labels = f'cohort="{self.cohort}",cluster_queue="{self.name}",flavor="{f.name}",{GPU},{role}'
            for metric, value in (
                ("kueue_cluster_queue_resource_reservation", f.reserved),
                ("kueue_cluster_queue_nominal_quota", f.nominal),
                ("kueue_cluster_queue_borrowing_limit", INF),  # unset (Kueue v0.18.1 on)
            ):
                if (metric, f.name) not in self.without_flavor:
                    found[f"{metric}{{{labels}}}"] = value
        found[f'kueue_cluster_queue_resource_pending{{cluster_queue="{self.name}",{GPU},{role}}}'] = self.pending
        for status in ("pending", "active", "terminating"):
            found[f'kueue_cluster_queue_status{{cluster_queue="{self.name}",status="{status}",{role}}}'] = float(
                status == "active"
            )
        return {name: value for name, value in found.items() if not name.startswith(self.without)}


def _promtool(series: dict[str, float]) -> dict[str, str]:
    return {name: " ".join(["Inf" if value == INF else f"{value:g}"] * 6) for name, value in series.items()}


def _kueue(*queues: Queue) -> dict[str, float]:
    return {name: value for q in queues for name, value in q.series().items()}


# The reviewer's ClusterQueues: research reads 16 reserved + 8 pending (room 16) = 24; batch 8 + 8 (room 24) = 16.
RESEARCH = Queue("research", 8, (Flavor("a100", 32, 16),))
BATCH = Queue("batch", 8, (Flavor("a100", 32, 8),))
BOTH = 'cluster_queue=~"research|batch"'


def test_several_cluster_queues_add_up_while_each_reports_every_gauge(tmp_path: Path) -> None:
    assert_answers(tmp_path, _promtool(_kueue(RESEARCH, BATCH)), [Expect(kueue_demand_query(BOTH, "nvidia.com/gpu"),
                                                                         [("{}", 40)])])  # fmt: skip


@pytest.mark.parametrize("missing", KUEUE_GAUGES)
def test_a_cluster_queue_missing_a_gauge_leaves_the_class_unavailable(tmp_path: Path, missing: str) -> None:
    # batch in a cohort, so that its borrowing limit is read too; research answers alone
    batch = Queue("batch", 8, (Flavor("a100", 32, 8),), cohort="ml", without=(missing,))
    query = kueue_demand_query(BOTH, "nvidia.com/gpu")
    assert_answers(tmp_path, _promtool(_kueue(RESEARCH, batch)), [Expect(query)])


@pytest.mark.parametrize(
    ("gauge", "cohort", "complete"),
    [
        ("kueue_cluster_queue_resource_reservation", "", 24.0),  # 12 reserved + 12 of room
        ("kueue_cluster_queue_nominal_quota", "", 24.0),
        ("kueue_cluster_queue_borrowing_limit", "research", 44.0),  # unlimited borrowing: all 32 pending
    ],
)
def test_a_flavor_missing_a_gauge_leaves_the_class_unavailable(
    tmp_path: Path, gauge: str, cohort: str, complete: float
) -> None:
    # One ClusterQueue, two flavors: without h100's reservation (or quota) the sum and the room would leave h100 out.
    flavors = (Flavor("a100", 8, 8), Flavor("h100", 16, 4))
    query = kueue_demand_query('cluster_queue="ml"', "nvidia.com/gpu")
    for name, queue, demand in (
        ("complete", Queue("ml", 32, flavors, cohort=cohort), [("{}", complete)]),
        ("missing", Queue("ml", 32, flavors, cohort=cohort, without_flavor=((gauge, "h100"),)), []),
    ):
        (tmp_path / name).mkdir()
        assert_answers(tmp_path / name, _promtool(_kueue(queue)), [Expect(query, demand)])


def test_cluster_queues_a_flavor_or_cohort_matcher_leaves_out_are_not_missing(tmp_path: Path) -> None:
    # other is in no cohort ml and has no a100: neither matcher selects it, though its pending gauge matches the
    # cluster_queue regex. A ClusterQueue without quota for the resource (only its status) is not selected either.
    other = Queue("other", 8, (Flavor("h100", 32, 0),))
    cpu_only = Queue("cpu", 0, ())
    ml = Queue("research", 8, (Flavor("a100", 32, 16),), cohort="ml")
    series = _promtool(_kueue(ml, other) | {k: v for k, v in cpu_only.series().items() if "status" in k})
    every = 'cluster_queue=~"research|other|cpu"'
    assert_answers(
        tmp_path,
        series,
        [
            Expect(kueue_demand_query(f'{every}, cohort="ml"', "nvidia.com/gpu"), [("{}", 24)]),
            Expect(kueue_demand_query(f'{every}, flavor="a100"', "nvidia.com/gpu"), [("{}", 24)]),
            Expect(kueue_demand_query(every, "nvidia.com/gpu"), [("{}", 32)]),  # and other's 0 reserved + 8 pending
        ],
    )


def _namespaces(*names: str, instance: str = "ksm-0") -> dict[str, float]:
    return {f'kube_namespace_created{{instance="{instance}",namespace="{n}"}}': 1.5e9 for n in names}


def _pod(namespace: str, pod: str, gpus: float, phase: str, instance: str = "ksm-0") -> dict[str, float]:
    where = f'instance="{instance}",namespace="{namespace}",pod="{pod}",uid="u-{pod}"'
    found = {
        f'kube_pod_container_resource_requests{{{where},container="main",node="",resource="nvidia_com_gpu",'
        'unit="integer"}': gpus
    }
    for p in ("Pending", "Running", "Succeeded", "Failed", "Unknown"):
        found[f'kube_pod_status_phase{{{where},phase="{p}"}}'] = float(p == phase)
    return found


def _shards(total: int, *up: int, copies: int = 1) -> dict[str, float]:
    found: dict[str, float] = {}
    for ordinal in up:
        for copy in range(copies):
            instance = f'instance="ksm-{ordinal}-{copy}"'
            found[f"kube_state_metrics_total_shards{{{instance}}}"] = total
            found[f'kube_state_metrics_shard_ordinal{{{instance},shard_ordinal="{ordinal}"}}'] = ordinal
    return found


def _ksm(selector: str, cluster: list[str] | None = None) -> str:
    return kube_state_metrics_demand_query(selector, "nvidia.com/gpu", cluster or [])


def test_every_namespace_of_a_regex_alternation_must_be_reported(tmp_path: Path) -> None:
    # research runs a pending 8-GPU pod; research-batch exists without pods; research-btach is a typo of it
    series = _promtool(_namespaces("research", "research-batch") | _pod("research", "p1", 8, "Pending"))
    assert_answers(
        tmp_path,
        series,
        [
            Expect(_ksm('namespace=~"research|research-batch"'), [("{}", 8)]),
            Expect(_ksm('namespace=~"research|research-btach"')),
            Expect(_ksm('namespace=~"research-btach|research"')),
            Expect(_ksm('namespace=~"research|team-.*"')),  # no namespace matches team-.*
            Expect(_ksm('namespace=~"research(-batch)?"'), [("{}", 8)]),  # one alternative, which matches
            Expect(_ksm('namespace="research"'), [("{}", 8)]),
        ],
    )


def test_a_regex_alternation_without_pods_reads_zero_only_while_every_namespace_is_reported(tmp_path: Path) -> None:
    series = _promtool(_namespaces("research", "research-batch") | _pod("research", "p1", 8, "Succeeded"))
    assert_answers(
        tmp_path,
        series,
        [
            Expect(_ksm('namespace=~"research|research-batch"'), [("{}", 0)]),
            Expect(_ksm('namespace=~"research|research-btach"')),
        ],
    )


@pytest.mark.parametrize(
    ("total", "up", "copies", "demand"),
    [
        (None, (0, 1), 1, [("{}", 16.0)]),  # telemetry not scraped: nothing to check against
        (1, (0,), 1, [("{}", 8.0)]),  # not sharded
        (2, (0, 1), 1, [("{}", 16.0)]),  # both shards up
        (2, (0, 1), 2, [("{}", 16.0)]),  # each shard scraped twice
        (2, (0,), 1, []),  # shard 1 down: its pods are missing
        (3, (0, 1), 2, []),  # two scrapes of each of two shards are not three shards
    ],
)
def test_a_sharded_kube_state_metrics_with_a_shard_down_is_unavailable(
    tmp_path: Path, total: int | None, up: tuple[int, ...], copies: int, demand: list[tuple[str, float]]
) -> None:
    # shard 0 holds pod a and the namespace, shard 1 pod b; a shard that is down reports nothing
    series = _namespaces("research", instance="ksm-0-0")
    for ordinal, pod, phase in ((0, "a", "Running"), (1, "b", "Pending")):
        if ordinal in up:
            series |= _pod("research", pod, 8, phase, f"ksm-{ordinal}-0")
    if total is not None:
        series |= _shards(total, *up, copies=copies)
    assert_answers(tmp_path, _promtool(series), [Expect(_ksm('namespace="research"'), demand)])


# The reviewer's cases, read through PrometheusSource from a real Prometheus server.

T0 = 1_700_000_000
MINUTES = 10
NOW = datetime.fromtimestamp(T0 + (MINUTES - 1) * 60, UTC)


def _openmetrics(series: dict[str, float]) -> str:
    lines: list[str] = []
    for family in sorted({name.split("{")[0] for name in series}):
        lines.append(f"# TYPE {family} gauge\n")
        for name, value in series.items():
            if name.split("{")[0] == family:
                text = "+Inf" if value == INF else f"{value:g}"
                lines.extend(f"{name} {text} {T0 + m * 60}\n" for m in range(MINUTES))
    return "".join(lines) + "# EOF\n"


def _in_cluster(cluster: str, series: dict[str, float]) -> dict[str, float]:
    return {name.replace("{", f'{{cluster="{cluster}",', 1): value for name, value in series.items()}


REVIEWED, SHARDED = ['cluster="reviewed"'], ['cluster="sharded"']


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusSource]:
    if not prometheus_available():
        pytest.fail("prometheus and promtool must be on PATH (Debian package `prometheus`; `make prometheus`)")
    work = tmp_path_factory.mktemp("every-part")
    batch_without_quota = Queue("batch", 8, (Flavor("a100", 32, 8),), without=("kueue_cluster_queue_nominal_quota",))
    reviewed = _kueue(RESEARCH, batch_without_quota)
    reviewed |= _namespaces("research", "research-batch") | _pod("research", "p1", 8, "Pending")
    sharded = _pod("research", "a", 8, "Running", "ksm-0-0") | _namespaces("research", instance="ksm-0-0")
    sharded |= _shards(2, 0)
    series = _in_cluster("reviewed", reviewed) | _in_cluster("sharded", sharded)
    (work / "history.om").write_text(_openmetrics(series), encoding="utf-8")
    subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(work / "history.om"), str(work / "data")],
        check=True,
        capture_output=True,
        timeout=120,
    )
    server = PrometheusServer(work / "data", work)
    server.start()
    try:
        settings = PrometheusSettings(url=server.url, retries=0)
        yield PrometheusSource.from_settings(settings, {})
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("name", "query"),
    [
        ("kueue research|batch", kueue_demand_query(BOTH, "nvidia.com/gpu", REVIEWED)),
        ("kueue batch", kueue_demand_query('cluster_queue="batch"', "nvidia.com/gpu", REVIEWED)),
        ("ksm research|research-btach", _ksm('namespace=~"research|research-btach"', REVIEWED)),
        ("ksm sharded", _ksm('namespace="research"', SHARDED)),
    ],
)
def test_the_reviewed_readings_are_unavailable(reviewed: PrometheusSource, name: str, query: str) -> None:
    with pytest.raises(MetricsUnavailable) as caught:
        reviewed.newest(name, query, NOW)
    assert "no value" in caught.value.reason


@pytest.mark.parametrize(
    ("query", "demand"),
    [
        (kueue_demand_query('cluster_queue="research"', "nvidia.com/gpu", REVIEWED), 24.0),
        (_ksm('namespace=~"research|research-batch"', REVIEWED), 8.0),
    ],
)
def test_the_complete_readings_still_answer(reviewed: PrometheusSource, query: str, demand: float) -> None:
    assert reviewed.newest("complete", query, NOW)[1] == demand

"""The default Kueue query counts a ClusterQueue's pending work only as far as the ClusterQueue could still admit
it. Kueue admits against quota, not nodes, and ``kueue_cluster_queue_resource_pending`` sums every pending
workload, the inadmissible ones included (kubernetes-sigs/kueue pkg/cache/queue/pending_workloads.go:
"pendingResourcesTotal is the incremental sum of TotalRequests across workloads in active workloads heap and
inadmissible workloads list"): work waiting for quota that is all reserved would buy nodes nobody can use.

Each query is evaluated by promtool over the gauges as Kueue v0.18 exports them (kubernetes-sigs/kueue
pkg/metrics/metrics.go): the reservation, nominal quota and borrowing limit per cohort, cluster_queue, flavor and
resource (the borrowing limit ``+Inf`` when unset, and so always for a ClusterQueue without a cohort: v0.18.1,
#12105), the pending gauge per cluster_queue and resource, and ``kueue_cluster_queue_status`` per cluster_queue and
status, each with ``replica_role``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.sources.prometheus_queries import demand_query
from config.prometheus import PrometheusSettings
from models import DemandClass
from tests.prometheus.promql_cases import Expect, assert_answers

GPU = 'resource="nvidia.com/gpu"'
INF = math.inf


@dataclass(frozen=True)
class Flavor:
    name: str
    nominal: float
    reserved: float
    borrowing: float = INF  # unset


@dataclass(frozen=True)
class Queue:
    name: str
    pending: float
    flavors: tuple[Flavor, ...]
    cohort: str = ""
    active: bool = True
    role: str = "leader"


def _values(value: float) -> str:
    return " ".join(["Inf" if value == INF else f"{value:g}"] * 6)


def _series(*queues: Queue, without: tuple[str, ...] = ()) -> dict[str, str]:
    series: dict[str, str] = {}
    for q in queues:
        role = f'replica_role="{q.role}"'
        for f in q.flavors:
            labels = f'cohort="{q.cohort}",cluster_queue="{q.name}",flavor="{f.name}",{GPU},{role}'
            for metric, value in (
                ("kueue_cluster_queue_resource_reservation", f.reserved),
                ("kueue_cluster_queue_nominal_quota", f.nominal),
                ("kueue_cluster_queue_borrowing_limit", f.borrowing),
            ):
                series[f"{metric}{{{labels}}}"] = _values(value)
        series[f'kueue_cluster_queue_resource_pending{{cluster_queue="{q.name}",{GPU},{role}}}'] = _values(q.pending)
        for status in ("pending", "active", "terminating"):
            on = (status == "active") == q.active
            series[f'kueue_cluster_queue_status{{cluster_queue="{q.name}",status="{status}",{role}}}'] = _values(
                1.0 if on else 0.0
            )
    return {name: values for name, values in series.items() if not name.startswith(without)}


def _query(series: str = "ml", selector: str | None = None) -> str:
    classes = {"ml": {"selector": selector}} if selector else {}
    settings = PrometheusSettings.model_validate(
        {"url": "http://p:9090", "demand_metrics": "kueue", "classes": classes}
    )
    return demand_query(DemandClass("ml", series=series), settings)


@pytest.mark.parametrize(
    ("queue", "demand"),
    [
        # nominal quota 16 GPUs, all reserved, 32 pending: no node lets any of it in
        (Queue("ml", 32, (Flavor("a100", 16, 16),)), 16),
        # 16 of 32 reserved: 16 of the 32 pending can be admitted
        (Queue("ml", 32, (Flavor("a100", 32, 16),)), 32),
        # pending work that fits counts whole
        (Queue("ml", 8, (Flavor("a100", 32, 16),)), 24),
        # in a cohort, up to the borrowing limit above the nominal quota
        (Queue("ml", 32, (Flavor("a100", 16, 16, borrowing=8),), cohort="research"), 24),
        # borrowing the queue already does leaves less room
        (Queue("ml", 32, (Flavor("a100", 16, 20, borrowing=8),), cohort="research"), 24),
        # unlimited borrowing in a cohort: the cohort's free quota is not read, the pending work counts whole
        (Queue("ml", 32, (Flavor("a100", 16, 16),), cohort="research"), 48),
        # the room of every flavor of the ClusterQueue: 0 on a100, 8 on h100
        (Queue("ml", 32, (Flavor("a100", 8, 8), Flavor("h100", 8, 0))), 16),
        # a stopped ClusterQueue (or one missing a flavor or an admission check) admits nothing
        (Queue("ml", 32, (Flavor("a100", 32, 8),), active=False), 8),
        # a queue over its quota (the quota lowered under running work) has no room, never a negative one
        (Queue("ml", 32, (Flavor("a100", 8, 16),)), 16),
    ],
)
def test_pending_work_counts_up_to_the_cluster_queues_room(tmp_path: Path, queue: Queue, demand: float) -> None:
    assert_answers(tmp_path, _series(queue), [Expect(_query(), [("{}", demand)])])


def test_the_room_is_each_cluster_queues_own(tmp_path: Path) -> None:
    # One class over two ClusterQueues: a's 16 pending have no room, b has room but nothing pending. Capping the
    # total (16 pending, 16 of room) would count a's 16.
    full = Queue("a", 16, (Flavor("a100", 8, 8),))
    idle = Queue("b", 0, (Flavor("a100", 24, 8),))
    assert_answers(tmp_path, _series(full, idle), [Expect(_query(selector='cluster_queue=~"a|b"'), [("{}", 16)])])


def test_a_flavor_selector_counts_the_room_of_that_flavor(tmp_path: Path) -> None:
    queue = Queue("ml", 32, (Flavor("a100", 8, 8), Flavor("h100", 16, 0)))
    assert_answers(
        tmp_path,
        _series(queue),
        [
            Expect(_query(selector='cluster_queue="ml", flavor="a100"'), [("{}", 8)]),  # no room on a100
            Expect(_query(selector='cluster_queue="ml", flavor="h100"'), [("{}", 16)]),  # 0 reserved + 16 of room
        ],
    )


@pytest.mark.parametrize(
    "missing",
    ["kueue_cluster_queue_nominal_quota", "kueue_cluster_queue_status", "kueue_cluster_queue_resource_pending"],
)
def test_a_missing_gauge_leaves_the_class_unavailable(tmp_path: Path, missing: str) -> None:
    queue = Queue("ml", 32, (Flavor("a100", 32, 8),))
    assert_answers(tmp_path, _series(queue, without=(missing,)), [Expect(_query())])


def test_quota_and_status_are_read_from_any_replica(tmp_path: Path) -> None:
    # A leader without the nominal quota and status gauges (kubernetes-sigs/kueue#9288) beside a follower that has
    # them: the quota is the ClusterQueue's spec, the same on every replica. The reservation and the pending work
    # are the leader's.
    leader = Queue("ml", 32, (Flavor("a100", 32, 8),))
    follower = Queue("ml", 40, (Flavor("a100", 32, 0),), role="follower")  # a stale cache
    series = _series(leader, without=("kueue_cluster_queue_nominal_quota", "kueue_cluster_queue_status"))
    series |= {
        name: values
        for name, values in _series(follower).items()
        if name.startswith(
            ("kueue_cluster_queue_nominal_quota", "kueue_cluster_queue_borrowing_limit", "kueue_cluster_queue_status")
        )
    }
    assert_answers(tmp_path, series, [Expect(_query(), [("{}", 32)])])

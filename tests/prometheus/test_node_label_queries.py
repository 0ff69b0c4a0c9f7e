"""The node-count queries the documentation gives (README's on-prem capacity query and its cluster-scoped form, the
``capacity_query`` examples of README and of the field docs), read on a real Prometheus as kube-state-metrics
reports nodes: each node twice (two HA replicas, ``instance`` ksm-0 and ksm-1), in one cluster (``cluster="prod"``).

kube-state-metrics facts the history relies on (tests/fakes/REFERENCE.md, kube-state-metrics): since v2.0 (PR
#1125) ``kube_node_labels`` carries only ``node`` unless ``--metric-labels-allowlist`` names the labels to export,
which then become ``label_<name>`` (``cloud.google.com/gke-nodepool`` -> ``label_cloud_google_com_gke_nodepool``);
``kube_node_status_allocatable{resource="nvidia_com_gpu", unit="integer"}`` is a node's allocatable GPUs (0 while
the device plugin reports none healthy); ``kube_node_status_condition{condition="Ready", status}`` and
``kube_node_spec_unschedulable`` as in test_onprem_capacity. Minutes after T0:

- 0 to 10, ``DEFAULT``: kube-state-metrics v2's default, no allowlist: ``kube_node_labels{node}`` only, for four
  on-prem nodes (Ready, schedulable, 8 GPUs allocatable) and four GKE nodes of node pool ``a100``;
- 20 to 30, ``WHOLE``: the allowlist set (``nodes=[pool,cloud.google.com/gke-nodepool]``), the same nodes, all
  taking work; node pool ``spot-a100`` has no nodes;
- 40 to 50, ``DEGRADED``: the allowlist set; on-prem op-1 NotReady, op-2 cordoned, op-3 Ready and schedulable with
  no allocatable GPU (its device plugin down), op-4 whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent.onprem_capacity import onprem_capacity_events, read_onprem
from agent.sources.onprem_capacity import PrometheusOnPremCapacity
from agent.sources.prometheus import PrometheusSource
from config import settings_from_mapping
from config.field_docs import FIELDS
from config.prometheus import PrometheusSettings
from config.schema import Settings
from models import AlertKind, MetricsUnavailable, Severity
from tests.prometheus.server import PrometheusServer, serving_openmetrics

pytestmark = pytest.mark.xdist_group("prometheus")

T0 = datetime(2026, 2, 2, 9, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
KSM = ('cluster="prod",instance="ksm-0"', 'cluster="prod",instance="ksm-1"')
ONPREM = [f"op-{n}" for n in range(1, 5)]
GKE = [f"gke-a100-{n}" for n in range(1, 5)]
DEFAULT, WHOLE, DEGRADED = range(0, 10), range(20, 30), range(40, 50)
ONPREM_POOL = "onprem-a100"


def _one_line(query: str) -> str:
    return " ".join(query.split())


def _onprem_queries() -> list[str]:
    """README's on-prem capacity queries, as written (the plain one and the one scoped to ``cluster="prod"``)."""
    section = README[README.index("**On-prem capacity.**") :]
    return re.findall(r"```promql\n(.*?)```", section, re.DOTALL)[:2]


def _simulate_example() -> str:
    """The ``capacity_query`` example of README's ``simulate --source prometheus`` paragraph."""
    found = re.search(r"capacity_query` \(e\.g\.\s+`([^`]*)`, in\s+nodes or slices\)", README)
    assert found is not None, "README's simulate example of a capacity_query moved"
    return _one_line(found.group(1))


def _yaml_example() -> str:
    """The ``capacity_query`` of README's configuration example (a GKE node pool, scoped to ``cluster="prod"``)."""
    found = re.search(r"\{capacity_query: '([^']*)'\}", README)
    assert found is not None, "README's configuration example of a capacity_query moved"
    return found.group(1)


def _field_doc_example() -> str:
    found = re.search(r"e\.g\. `(count\([^`]*)`", FIELDS["PoolQuerySettings.capacity_query"])
    assert found is not None, "the capacity_query field doc lost its example"
    return found.group(1)


def _openmetrics() -> Iterator[str]:
    def family(name: str, series: list[tuple[str, float, range]]) -> Iterator[str]:
        yield f"# TYPE {name} gauge\n"
        for labels, value, minutes in series:
            for m in minutes:
                yield f"{name}{{{labels}}} {value:g} {int((T0 + timedelta(minutes=m)).timestamp())}\n"

    nodes = [(r, n) for r in KSM for n in ONPREM + GKE]
    windows = (DEFAULT, WHOLE, DEGRADED)

    def node_labels(node: str, window: range) -> str:
        if window is DEFAULT:
            return ""  # kube-state-metrics v2 without --metric-labels-allowlist
        if node in ONPREM:
            return f',label_pool="{ONPREM_POOL}"'
        return ',label_cloud_google_com_gke_nodepool="a100"'

    def ready(node: str, window: range) -> bool:
        return not (window is DEGRADED and node == "op-1")

    yield from family("kube_node_info", [(f'{r},node="{n}"', 1, w) for r, n in nodes for w in windows])
    yield from family(
        "kube_node_labels", [(f'{r},node="{n}"{node_labels(n, w)}', 1, w) for r, n in nodes for w in windows]
    )
    yield from family(
        "kube_node_status_condition",
        [
            (
                f'{r},node="{n}",condition="Ready",status="{status}"',
                float(status == ("true" if ready(n, w) else "false")),
                w,
            )
            for r, n in nodes
            for w in windows
            for status in ("true", "false", "unknown")
        ],
    )
    yield from family(
        "kube_node_spec_unschedulable",
        [(f'{r},node="{n}"', float(w is DEGRADED and n == "op-2"), w) for r, n in nodes for w in windows],
    )
    yield from family(
        "kube_node_status_allocatable",
        [
            (
                f'{r},node="{n}",resource="nvidia_com_gpu",unit="integer"',
                0.0 if (w is DEGRADED and n == "op-3") else 8,
                w,
            )
            for r, n in nodes
            for w in windows
        ],
    )
    yield "# EOF\n"


@pytest.fixture(scope="module")
def nodes_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    with serving_openmetrics("".join(_openmetrics()), tmp_path_factory.mktemp("prometheus-node-labels")) as server:
        yield server


def _settings(url: str, query: str, max_units: int = 4) -> Settings:
    onprem: dict[str, Any] = {
        "id": ONPREM_POOL, "kind": "on-prem", "chips_per_unit": 8, "min_units": max_units, "max_units": max_units,
        "price_per_chip_hour_usd": 0.0, "lead_time": "0s", "serves": ["train"],
    }  # fmt: skip
    document = {
        "demand_classes": [{"name": "train"}],
        "pools": [onprem],
        "prometheus": {"url": url, "retries": 0, "timeout": "5s", "pools": {ONPREM_POOL: {"capacity_query": query}}},
    }
    return settings_from_mapping(document, source="node label queries test")


def _prometheus(settings: Settings) -> PrometheusSettings:
    assert settings.prometheus is not None
    return settings.prometheus


def _read(url: str, query: str, minute: int) -> float | None:
    """The query's value at ``minute`` after T0, None when it answers nothing."""
    source = PrometheusSource.from_settings(_prometheus(_settings(url, query)), {})
    try:
        return source.newest("capacity", query, T0 + timedelta(minutes=minute))[1]
    except MetricsUnavailable:
        return None


def test_the_documentation_gives_the_queries_read_here() -> None:
    onprem = _onprem_queries()
    assert len(onprem) == 2 and all("kube_node_status_allocatable" in q for q in onprem)
    assert 'cluster="prod"' in onprem[1] and 'cluster="prod"' not in onprem[0]
    for example in (_simulate_example(), _yaml_example(), _field_doc_example()):
        assert example.startswith("count(max by (node) (kube_node_labels{") and "kube_node_info" not in example


@pytest.mark.parametrize("which", ["onprem", "onprem-cluster", "simulate", "yaml", "field-doc"])
def test_without_the_allowlist_every_documented_query_answers_nothing_never_zero(
    nodes_prometheus: PrometheusServer, which: str
) -> None:
    query = {
        "onprem": _onprem_queries()[0],
        "onprem-cluster": _onprem_queries()[1],
        "simulate": _simulate_example(),
        "yaml": _yaml_example(),
        "field-doc": _field_doc_example(),
    }[which]
    assert _read(nodes_prometheus.url, query, DEFAULT[-1]) is None
    # the example the documentation gave before, falling back on every node, read 0 on the same data
    old = 'count(kube_node_labels{label_cloud_google_com_gke_nodepool="a100"}) or on() (0 * count(kube_node_info))'
    assert _read(nodes_prometheus.url, old, DEFAULT[-1]) == 0.0


def test_an_on_prem_pool_read_without_the_allowlist_is_unread_and_the_alert_names_the_flag(
    nodes_prometheus: PrometheusServer,
) -> None:
    settings = _settings(nodes_prometheus.url, _onprem_queries()[0])
    reader = PrometheusOnPremCapacity.from_settings(_prometheus(settings), settings.pool_specs())
    now = T0 + timedelta(minutes=DEFAULT[-1])
    reading = read_onprem(reader, settings.pool_specs(), now)
    assert reading.units == {}
    why = reading.problems[ONPREM_POOL]
    assert "--metric-labels-allowlist=nodes=[pool]" in why and "label_pool" in why and "no value" in why
    (alert,) = onprem_capacity_events(reading, settings.pool_specs(), now)
    assert alert.kind is AlertKind.ONPREM_CAPACITY and "planning on its configured 4 units" in alert.summary
    assert "--metric-labels-allowlist" in alert.details["error"]


def test_a_replayed_capacity_without_the_allowlist_names_the_flag(nodes_prometheus: PrometheusServer) -> None:
    query = _yaml_example()
    source = PrometheusSource.from_settings(_prometheus(_settings(nodes_prometheus.url, query)), {})
    start = T0 + timedelta(minutes=DEFAULT[0])
    with pytest.raises(MetricsUnavailable) as raised:
        source.series("pool a100-spot", query, start, start + timedelta(minutes=10), timedelta(minutes=1), True)
    assert "no data for the whole range" in raised.value.reason
    assert "--metric-labels-allowlist=nodes=[cloud.google.com/gke-nodepool]" in raised.value.reason


@pytest.mark.parametrize(
    ("which", "minute", "units"),
    [
        ("onprem", WHOLE[-1], 4.0),  # two replicas, four nodes: 4, not 8
        ("onprem-cluster", WHOLE[-1], 4.0),
        ("onprem", DEGRADED[-1], 1.0),  # NotReady, cordoned and no allocatable GPU: one node takes work
        ("onprem-cluster", DEGRADED[-1], 1.0),
        ("simulate", WHOLE[-1], 4.0),  # node pool a100: four nodes, each reported twice
        ("field-doc", DEGRADED[-1], 4.0),
        ("yaml", WHOLE[-1], 0.0),  # node pool spot-a100 has no nodes, others carry the label: 0
    ],
)
def test_with_the_allowlist_the_documented_queries_count_each_node_that_takes_work_once(
    nodes_prometheus: PrometheusServer, which: str, minute: int, units: float
) -> None:
    query = {
        "onprem": _onprem_queries()[0],
        "onprem-cluster": _onprem_queries()[1],
        "simulate": _simulate_example(),
        "yaml": _yaml_example(),
        "field-doc": _field_doc_example(),
    }[which]
    assert _read(nodes_prometheus.url, query, minute) == units


def test_a_read_above_max_units_is_planned_on_max_units_with_a_warning(nodes_prometheus: PrometheusServer) -> None:
    twice = f'count(kube_node_labels{{label_pool="{ONPREM_POOL}"}})'  # each node once per replica: 8
    settings = _settings(nodes_prometheus.url, twice, max_units=6)
    reader = PrometheusOnPremCapacity.from_settings(_prometheus(settings), settings.pool_specs())
    now = T0 + timedelta(minutes=WHOLE[-1])
    reading = read_onprem(reader, settings.pool_specs(), now)
    assert reading.units == {ONPREM_POOL: 6} and reading.above_max == {ONPREM_POOL: 8.0}
    (alert,) = onprem_capacity_events(reading, settings.pool_specs(), now)
    assert (alert.kind, alert.severity, alert.subject) == (AlertKind.ONPREM_CAPACITY, Severity.WARNING, ONPREM_POOL)
    assert "reads 8 units, more than its max_units 6" in alert.summary and "max by (node)" in alert.summary
    documented = _settings(nodes_prometheus.url, _onprem_queries()[0], max_units=6)
    whole = read_onprem(
        PrometheusOnPremCapacity.from_settings(_prometheus(documented), documented.pool_specs()),
        documented.pool_specs(),
        now,
    )
    assert whole.units == {ONPREM_POOL: 4} and whole.above_max == {}

"""An on-prem pool's capacity in a Prometheus view of several clusters (Google Managed Prometheus, Thanos, Mimir):
missing capacity never reads 0 units.

The README's capacity queries (the one for a Prometheus of one cluster, and the one scoped with the
``cluster_selector`` matchers) are evaluated by promtool, Prometheus' own engine (``tests.prometheus.promql_cases``),
over the series such a view holds: kube-state-metrics of ``prod`` (the agent's cluster, one on-prem node Ready and
schedulable) and of ``staging``, label sets as kube-state-metrics gives them (docs/metrics/cluster/node-metrics.md)
with the ``cluster`` label the view adds. While prod's kube-state-metrics is down and staging's is up, each answers
nothing (the pool is planned on its max_units with an alert), never 0.

And with ``cluster_selector`` set, a capacity query with a selector that lacks its matchers is named at start, once,
with the pool and the matcher."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agent.sources.onprem_capacity import PrometheusOnPremCapacity
from agent.sources.promql_scope import unscoped_selectors
from config import settings_from_mapping
from config.schema import Settings
from tests.prometheus.promql_cases import Expect, assert_answers

README = Path(__file__).resolve().parents[1] / "README.md"
PROD = 'cluster="prod"'
UNSCOPED = 'count(max by (node) (kube_node_labels{label_pool="onprem-a100"})) or on() (0 * count(kube_node_info))'


def _readme_queries() -> list[str]:
    """The PromQL blocks of README's "On-prem capacity" paragraph, in order: the query for one cluster, then the
    one scoped with the cluster's matchers."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("**On-prem capacity.**") :]
    section = section[: section.index("\n`leadtime run` (without `--replay`)")]
    blocks = section.split("```promql\n")[1:]
    return [block[: block.index("```")] for block in blocks]


def _dir(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.mkdir()
    return path


def _node(cluster: str, node: str, pool: str | None) -> dict[str, str]:
    """One node of ``cluster`` as kube-state-metrics reports it: Ready, schedulable, with 8 allocatable GPUs,
    labelled ``pool`` if any."""
    labels = f'cluster="{cluster}",node="{node}"'
    node_labels = labels + (f',label_pool="{pool}"' if pool else "")
    series = {
        f"kube_node_info{{{labels}}}": "1x5",
        f"kube_node_labels{{{node_labels}}}": "1x5",
        f"kube_node_spec_unschedulable{{{labels}}}": "0x5",
        f'kube_node_status_allocatable{{{labels},resource="nvidia_com_gpu",unit="integer"}}': "8x5",
    }
    for status in ("true", "false", "unknown"):
        value = "1x5" if status == "true" else "0x5"
        series[f'kube_node_status_condition{{{labels},condition="Ready",status="{status}"}}'] = value
    return series


def test_readme_gives_a_query_for_one_cluster_and_one_scoped_to_the_cluster() -> None:
    single, scoped = _readme_queries()
    assert unscoped_selectors(single, []) == []
    assert unscoped_selectors(scoped, [PROD]) == []  # the matchers on every selector, the fallback's too


@pytest.mark.parametrize("which", [0, 1], ids=["one-cluster query", "scoped query"])
def test_while_this_clusters_exporter_is_down_another_cluster_cannot_make_the_pool_read_zero(
    which: int, tmp_path: Path
) -> None:
    """staging's nodes are none of the pool's: either query reads prod's one node while prod reports, and nothing
    (not 0) while only staging does."""
    query = _readme_queries()[which]
    staging = {**_node("staging", "s1", None), **_node("staging", "s2", "onprem-h100")}
    assert_answers(
        _dir(tmp_path, "up"), {**_node("prod", "n1", "onprem-a100"), **staging}, [Expect(query, [("{}", 1)])]
    )
    assert_answers(_dir(tmp_path, "down"), staging, [Expect(query, [])])


def test_the_scoped_query_counts_this_clusters_nodes_only(tmp_path: Path) -> None:
    """staging labels its own nodes for a pool of the same name: the scoped query counts prod's alone, and answers
    nothing while prod's kube-state-metrics is down."""
    query = _readme_queries()[1]
    staging = {**_node("staging", "s1", "onprem-a100"), **_node("staging", "s2", "onprem-a100")}
    assert_answers(
        _dir(tmp_path, "up"), {**_node("prod", "n1", "onprem-a100"), **staging}, [Expect(query, [("{}", 1)])]
    )
    assert_answers(_dir(tmp_path, "down"), staging, [Expect(query, [])])


def _settings(queries: dict[str, str], cluster_selector: str | None) -> Settings:
    pools = [
        {"id": pool, "kind": "on-prem", "tier": "on-prem", "chips_per_unit": 8, "min_units": 40, "max_units": 40,
         "price_per_chip_hour_usd": 0.0, "lead_time": "0s", "serves": ["train"]}
        for pool in queries
    ]  # fmt: skip
    prometheus: dict[str, object] = {
        "url": "http://prometheus:9090",
        "pools": {pool: {"capacity_query": query} for pool, query in queries.items()},
    }
    if cluster_selector is not None:
        prometheus["cluster_selector"] = cluster_selector
    return settings_from_mapping(
        {"demand_classes": [{"name": "train"}], "pools": pools, "prometheus": prometheus}, source="scope test"
    )


def _warnings(caplog: pytest.LogCaptureFixture, settings: Settings) -> list[str]:
    assert settings.prometheus is not None
    with caplog.at_level(logging.WARNING, logger="agent.sources.onprem_capacity"):
        PrometheusOnPremCapacity.from_settings(settings.prometheus, settings.pool_specs())
    return [r.getMessage() for r in caplog.records if r.name == "agent.sources.onprem_capacity"]


def test_a_capacity_query_without_the_cluster_matchers_is_named_once_at_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = _settings({"onprem-a": UNSCOPED, "onprem-b": _readme_queries()[1]}, PROD)

    warnings = _warnings(caplog, settings)

    assert len(warnings) == 1
    assert "on-prem pool onprem-a:" in warnings[0] and f"lacks {PROD} of prometheus.cluster_selector" in warnings[0]
    assert "count(kube_node_info)" not in warnings[0] and "kube_node_info" in warnings[0]  # the selector is named
    assert "onprem-b" not in warnings[0]


def test_every_matcher_of_the_selector_is_required_and_none_without_one(caplog: pytest.LogCaptureFixture) -> None:
    scoped = _readme_queries()[1]
    two = _settings({"onprem-a": scoped}, 'cluster="prod", location="europe-west4"')
    assert [w for w in _warnings(caplog, two) if 'lacks location="europe-west4" of' in w] != []
    caplog.clear()
    assert _warnings(caplog, _settings({"onprem-a": UNSCOPED}, None)) == []


@pytest.mark.parametrize(
    ("query", "unscoped"),
    [
        ('sum by (node) (up{cluster="prod"})', []),
        ("sum by (node) (up)", ["up"]),
        ("count(up) without (node) or vector(0)", ["up"]),  # vector() and without's labels are no selectors
        ('a{cluster="prod"} * on(node) group_left(pool) b', ["b"]),
        ("rate(x{cluster='prod'}[5m] offset 1h) > bool 1e+06", []),  # the quoting is PromQL's either way
        ('label_replace(a{cluster="prod"}, "dst", "$1", "src", "(.*)")', []),  # strings are no selectors
        ('{__name__="up", cluster="prod"} unless c:recorded{cluster="prod",}', []),
        ('up{cluster="staging"}', ['up{cluster="staging"}']),
    ],
)
def test_the_selectors_a_query_reads(query: str, unscoped: list[str]) -> None:
    assert [selector for selector, _ in unscoped_selectors(query, [PROD])] == unscoped

"""On-prem capacity observed, on a real Prometheus: the units of an on-prem pool that can take work are read at each
tick with its ``capacity_query``, the query README gives for it (Ready, schedulable nodes with the pool's label, from
kube-state-metrics), and the planner fills the pool only that far; the rest of the demand bursts to the cloud pool.

The history is kube-state-metrics as two HA replicas report it (every series twice, ``instance`` ksm-0 and ksm-1),
for 40 on-prem 8-GPU nodes with the label ``pool=onprem-a100``: ``kube_node_labels`` (a node label becomes
``label_<name>``, exported since kube-state-metrics v2.0 only as ``--metric-labels-allowlist=nodes=[pool]`` names
it), ``kube_node_status_condition`` (``condition="Ready"``, one series per ``status`` true, false and unknown, the one
that holds at 1), ``kube_node_spec_unschedulable`` (1 for a cordoned node) and ``kube_node_status_allocatable``
(``resource="nvidia_com_gpu"``: 8, 0 on a node that is not Ready), as kube-state-metrics
documents them (kubernetes/kube-state-metrics, docs/metrics/cluster/node-metrics.md; internal/store/node.go). Minutes
after T0:

- before 20: all 40 nodes Ready and schedulable;
- 20 to 40: 8 nodes NotReady (down) and 2 Ready but cordoned (maintenance): 30 can take work;
- 40 to 50: kube-state-metrics is down, no node series at all;
- 50 to 55: every node NotReady (a power cut): 0;
- from 55: all 40 back.

Demand (``demand_gpus``, another exporter) is 300 GPUs throughout: 240 running and 60 queued while 30 nodes are up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from actuators.simulated import SimulatedCluster
from agent.commands.recommend import recommend
from agent.daemon.live import live_parts
from agent.daemon.wiring import DaemonParts, assemble
from agent.ledger.memory import InMemoryLedger
from agent.loop import Agent, AgentParts, TickReport
from agent.notify import RecordingNotifier
from agent.sources.onprem_capacity import PrometheusOnPremCapacity
from agent.sources.prometheus import PrometheusSource
from config import settings_from_mapping
from config.schema import Settings
from forecasting.factory import build_forecaster
from models import AlertKind, Severity
from models.clock import SimulatedClock
from tests.prometheus.server import PrometheusServer, serving_openmetrics

pytestmark = pytest.mark.xdist_group("prometheus")

T0 = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
ONPREM, SPOT, CLASS = "onprem-a100", "a100-spot", "train"
NODES, DOWN, CORDONED = 40, range(33, 41), (31, 32)
DEMAND = 300.0
KSM = ('instance="ksm-0"', 'instance="ksm-1"')
README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_query() -> str:
    """The capacity query README gives for an on-prem pool (its Ready, schedulable nodes), as written there."""
    text = README.read_text(encoding="utf-8")
    start = text.index("```promql\n", text.index("**On-prem capacity.**")) + len("```promql\n")
    return text[start : text.index("```", start)]


# README's query: each node once, whichever kube-state-metrics replica reports it; 0 while kube-state-metrics
# reports nodes but none of the pool's can take work; no value while it reports none.
ONPREM_QUERY = _readme_query()


def _minute_states(minute: int) -> dict[int, tuple[bool, bool]] | None:
    """Node -> (Ready, cordoned) at ``minute`` after T0; None while kube-state-metrics is down."""
    if 40 <= minute < 50:
        return None
    if 50 <= minute < 55:
        return dict.fromkeys(range(1, NODES + 1), (False, False))
    if 20 <= minute < 40:
        return {n: (n not in DOWN, n in CORDONED) for n in range(1, NODES + 1)}
    return dict.fromkeys(range(1, NODES + 1), (True, False))


def _ready_is(status: str) -> Callable[[tuple[bool, bool]], float]:
    """``kube_node_status_condition{condition="Ready", status}`` of a node: 1 for the status that holds (never
    ``unknown`` here), 0 for the others."""
    return lambda node: float(status == ("true" if node[0] else "false"))


def _openmetrics() -> Iterator[str]:
    minutes = range(-120, 61)
    stamps = {m: int((T0 + timedelta(minutes=m)).timestamp()) for m in minutes}
    states = {m: _minute_states(m) for m in minutes}

    def family(name: str, series: list[tuple[str, Any]]) -> Iterator[str]:
        yield f"# TYPE {name} gauge\n"
        for labels, value_at in series:
            for m in minutes:
                value = value_at(m)
                if value is not None:
                    yield f"{name}{{{labels}}} {value:g} {stamps[m]}\n"

    def node_value(node: int, of: Callable[[tuple[bool, bool]], float]) -> Callable[[int], float | None]:
        def value(m: int) -> float | None:
            nodes = states[m]
            return None if nodes is None else of(nodes[node])

        return value

    def up(m: int) -> float | None:
        return None if states[m] is None else 1.0

    def gpus(node: int) -> Callable[[int], float | None]:
        """Allocatable GPUs: 8, but none on a node that is down (its device plugin reports no healthy GPU)."""
        return node_value(node, lambda s: 8.0 if s[0] else 0.0)

    names = {n: f"op-gpu-{n:03d}" for n in range(1, NODES + 1)}
    yield from family("demand_gpus", [("", lambda m: DEMAND)])
    yield from family("kube_node_info", [(f'{r},node="{names[n]}"', up) for r in KSM for n in names])
    yield from family(
        "kube_node_labels", [(f'{r},node="{names[n]}",label_pool="{ONPREM}"', up) for r in KSM for n in names]
    )
    yield from family(
        "kube_node_status_condition",
        [
            (
                f'{r},node="{names[n]}",condition="Ready",status="{status}"',
                node_value(n, _ready_is(status)),
            )
            for r in KSM
            for n in names
            for status in ("true", "false", "unknown")
        ],
    )
    yield from family(
        "kube_node_spec_unschedulable",
        [(f'{r},node="{names[n]}"', node_value(n, lambda s: float(s[1]))) for r in KSM for n in names],
    )
    yield from family(
        "kube_node_status_allocatable",
        [(f'{r},node="{names[n]}",resource="nvidia_com_gpu",unit="integer"', gpus(n)) for r in KSM for n in names],
    )
    yield "# EOF\n"


@pytest.fixture(scope="module")
def cluster_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    with serving_openmetrics("".join(_openmetrics()), tmp_path_factory.mktemp("prometheus-onprem")) as server:
        yield server


def _settings(
    url: str, tmp_path: Path, with_spot: bool = True, query: bool = True, capacity_query: str = ONPREM_QUERY
) -> Settings:
    onprem: dict[str, Any] = {
        "id": ONPREM, "kind": "on-prem", "chips_per_unit": 8, "min_units": NODES, "max_units": NODES,
        "price_per_chip_hour_usd": 0.0, "lead_time": "0s", "serves": [CLASS],
    }  # fmt: skip
    spot: dict[str, Any] = {
        "id": SPOT, "kind": "gpu-node-pool", "tier": "spot", "chips_per_unit": 8, "max_units": 48,
        "price_per_chip_hour_usd": 1.3, "lead_time": "10m", "serves": [CLASS],
    }  # fmt: skip
    prometheus: dict[str, Any] = {
        "url": url, "retries": 0, "timeout": "5s", "classes": {CLASS: {"query": "max(demand_gpus)"}},
    }  # fmt: skip
    if query:
        prometheus["pools"] = {ONPREM: {"capacity_query": capacity_query}}
    document = {
        "demand_classes": [{"name": CLASS}],
        "pools": [onprem, spot] if with_spot else [onprem],
        "forecast": {"model": "persistence", "history": "1h", "step": "1m", "max_staleness": "5m"},
        "prometheus": prometheus,
        "ledger": {"path": str(tmp_path / "ledger.sqlite")},
        "daemon": {"leader_election": {"enabled": False}, "endpoints": {"port": 0}},
    }
    return settings_from_mapping(document, source="on-prem capacity test")


def _at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_the_documented_query_counts_ready_schedulable_nodes_and_nothing_while_unreported(
    cluster_prometheus: PrometheusServer, tmp_path: Path
) -> None:
    settings = _settings(cluster_prometheus.url, tmp_path)
    assert settings.prometheus is not None
    reader = PrometheusOnPremCapacity.from_settings(settings.prometheus, settings.pool_specs())
    pools = settings.pool_specs()
    assert reader.ready_units(pools, _at(10)) == ({ONPREM: 40.0}, {})
    assert reader.ready_units(pools, _at(30)) == ({ONPREM: 30.0}, {})
    assert reader.ready_units(pools, _at(52)) == ({ONPREM: 0.0}, {})  # reported, none ready: 0
    units, problems = reader.ready_units(pools, _at(46))  # kube-state-metrics down: no value, not 0
    assert units == {} and "no value" in problems[ONPREM]


def _agent(settings: Settings, clock: SimulatedClock, notifier: RecordingNotifier) -> Agent:
    prometheus = settings.prometheus
    assert prometheus is not None
    demand = PrometheusSource.from_settings(prometheus, {CLASS: "max(demand_gpus)"})
    pools = settings.pool_specs()
    cluster = SimulatedCluster(pools, clock, initial_units={ONPREM: NODES, SPOT: 0})
    parts = AgentParts(
        demand,
        build_forecaster(settings.forecast),
        cluster,
        InMemoryLedger(),
        notifier,
        onprem=PrometheusOnPremCapacity.from_settings(prometheus, pools),
    )
    return Agent(settings, parts)


def _tick(agent: Agent, clock: SimulatedClock, minutes: int) -> TickReport:
    clock.set(_at(minutes))
    return agent.run_once(_at(minutes))


def _targets(report: TickReport) -> dict[str, int]:
    return {r.pool_id: r.to_units for r in report.plan.resizes}


def _onprem_alerts(report: TickReport) -> list[Any]:
    return [a for a in report.alerts if a.kind is AlertKind.ONPREM_CAPACITY]


def test_demand_the_down_and_cordoned_nodes_would_run_bursts_to_spot(
    cluster_prometheus: PrometheusServer, tmp_path: Path
) -> None:
    clock = SimulatedClock(_at(10))
    notifier = RecordingNotifier()
    agent = _agent(_settings(cluster_prometheus.url, tmp_path), clock, notifier)

    whole = _tick(agent, clock, 10)
    assert _targets(whole) == {} and _onprem_alerts(whole) == []  # 320 chips on-prem hold the 300

    short = _tick(agent, clock, 30)
    assert short.plan.decisions[ONPREM].need_chips == 240.0
    assert _targets(short) == {SPOT: 8}  # the 60 GPUs the 10 missing nodes would run: 8 nodes of 8
    (alert,) = _onprem_alerts(short)
    assert (alert.severity, alert.subject) == (Severity.WARNING, ONPREM)
    assert "30 of its 40 units" in alert.summary and "10 missing (80 chips)" in alert.summary
    assert f"goes to {SPOT}" in alert.summary

    unread = _tick(agent, clock, 46)
    (alert,) = _onprem_alerts(unread)
    assert alert.severity is Severity.WARNING and "planning on its configured 40 units" in alert.summary
    assert unread.plan.decisions[ONPREM].need_chips == 300.0  # unknown capacity is not 0: the pool is planned whole

    dark = _tick(agent, clock, 52)
    (alert,) = _onprem_alerts(dark)
    assert alert.severity is Severity.CRITICAL and "0 of its 40 units" in alert.summary
    assert dark.plan.decisions[ONPREM].need_chips == 0.0
    assert _targets(dark) == {SPOT: 38}  # all 300 GPUs in the cloud: ceil(300 / 8)

    back = _tick(agent, clock, 58)
    assert _onprem_alerts(back) == []
    assert [(e.kind, e.subject) for e in back.resolved] == [(AlertKind.ONPREM_CAPACITY, ONPREM)]


def _onprem_warnings(parts: DaemonParts) -> list[str]:
    """What the start-up check of the on-prem pools says (the other checks ask Prometheus about resources)."""
    return [w for check in parts.checks if check.__name__ == "onprem_unobserved" for w in check()]


def test_the_daemon_reads_each_on_prem_pools_query_and_names_a_pool_without_one(
    cluster_prometheus: PrometheusServer, tmp_path: Path
) -> None:
    clock = SimulatedClock(_at(30))
    notifier = RecordingNotifier()
    settings = _settings(cluster_prometheus.url, tmp_path, with_spot=False)
    parts = live_parts(settings, "test", clock, notifier, None, CollectorRegistry())
    assert parts.onprem is not None
    assert _onprem_warnings(parts) == []
    assembled = assemble(settings, "enforce", parts, {"POD_NAME": "leadtime-0", "POD_NAMESPACE": "leadtime"})
    assembled.endpoints.stop()
    assert assembled.loop.agent.parts.onprem is parts.onprem
    report = assembled.loop.agent.run_once(_at(30))
    (alert,) = _onprem_alerts(report)
    assert "no other pool serves its demand classes" in alert.summary

    other = tmp_path / "without-query"
    other.mkdir()
    unobserved = live_parts(
        _settings(cluster_prometheus.url, other, with_spot=False, query=False),
        "test",
        clock,
        notifier,
        None,
        CollectorRegistry(),
    )
    assert unobserved.onprem is None
    (warning,) = _onprem_warnings(unobserved)
    assert f"on-prem pool {ONPREM} has no prometheus.pools.{ONPREM}.capacity_query" in warning


def test_recommend_plans_the_on_prem_pool_on_what_its_nodes_can_take_as_the_daemon_does(
    cluster_prometheus: PrometheusServer, tmp_path: Path
) -> None:
    """``recommend`` is the daemon's tick, dry-run: with 10 of the 40 nodes unable to take work, it recommends the
    spot nodes the daemon would buy for the 60 GPUs they would run, and carries the alert."""
    settings = _settings(cluster_prometheus.url, tmp_path)
    pools = settings.pool_specs()
    read_side = SimulatedCluster(pools, SimulatedClock(_at(30)), initial_units={ONPREM: NODES, SPOT: 0})
    config = tmp_path / "config.yaml"
    config.write_text("# the settings are passed in\n", encoding="utf-8")
    document = recommend(settings, str(config), tmp_path / "out", _at(30), read_side, pool_state_source="test")
    units = {p["pool_id"]: p["recommended_units"] for p in document["pools"]}
    assert units[SPOT] == 8
    kinds = [a["kind"] for a in document["alerts"]]
    assert "onprem-capacity" in kinds


# The query with the pool's name misspelt, its fallback on any value of the label (as docs/configuration.md's cloud
# example writes it): it reads 0, not nothing, while every node of the pool is up.
MISSPELT = (
    'count(max by (node) (kube_node_labels{label_pool="onprem-a10O"})) '
    'or on() (0 * count(kube_node_labels{label_pool!=""}))'
)


def test_a_read_of_0_is_told_naming_the_query_in_recommend_and_the_daemons_alert(
    cluster_prometheus: PrometheusServer, tmp_path: Path
) -> None:
    """With all 40 nodes up, the misspelt query reads 0: recommend sent all 300 GPUs to spot (38 nodes) with no
    warning, the on-prem pool's reason "no demand assigned -> fixed pool of 40 units". Now the reason says what was
    available, and a warning, like the daemon's alert, says to check the label value in the query."""
    pools = _settings(cluster_prometheus.url, tmp_path).pool_specs()
    config = tmp_path / "config.yaml"
    config.write_text("# the settings are passed in\n", encoding="utf-8")

    def recommended(query: str, out: str) -> dict[str, Any]:
        settings = _settings(cluster_prometheus.url, tmp_path, capacity_query=query)
        read_side = SimulatedCluster(pools, SimulatedClock(_at(10)), initial_units={ONPREM: NODES, SPOT: 0})
        return recommend(settings, str(config), tmp_path / out, _at(10), read_side, pool_state_source="test")

    right = recommended(ONPREM_QUERY, "right")
    onprem = {p["pool_id"]: p for p in right["pools"]}[ONPREM]
    assert "fixed pool of 40 units, available: 40 of 40" in onprem["why"]
    assert not [w for w in right["warnings"] if ONPREM in w]

    wrong = recommended(MISSPELT, "wrong")
    pools_now = {p["pool_id"]: p for p in wrong["pools"]}
    assert pools_now[SPOT]["recommended_units"] == 38  # all 300 GPUs in the cloud: ceil(300 / 8)
    assert "no demand assigned -> fixed pool of 40 units, available: 0 of 40" in pools_now[ONPREM]["why"]
    (warning,) = [w for w in wrong["warnings"] if ONPREM in w]
    assert warning.startswith(
        f"on-prem pool {ONPREM}: its prometheus.pools.{ONPREM}.capacity_query reads 0 of its 40 units ready and "
        "schedulable"
    )
    assert (
        f"a misspelt pool name) reads 0 through a fallback on the label, not nothing; check the value in {MISSPELT}"
        in (warning)
    )

    clock = SimulatedClock(_at(10))
    notifier = RecordingNotifier()
    agent = _agent(_settings(cluster_prometheus.url, tmp_path, capacity_query=MISSPELT), clock, notifier)
    (alert,) = _onprem_alerts(_tick(agent, clock, 10))
    assert alert.severity is Severity.CRITICAL and "0 of its 40 units" in alert.summary
    assert f"If its nodes are up, its prometheus.pools.{ONPREM}.capacity_query selects none of them" in alert.summary

"""``leadtime recommend`` projects a budget with the nodes leadtime is draining as the daemon does: out of their pool's
units, billed one more tick, not to the period's end. The pools are read from the fake GKE and Compute Engine APIs,
the drains in progress from the nodes' drain marks on the fake Kubernetes API (``leadtime.io/drain-key`` on a
cordoned node, ``actuators.drain_units``), with the real clients; nothing is written to either.

Before, recommend read the pools through the cloud's adapters alone, whose target still counts the nodes being
drained: with 4 nodes of 10 USD an hour, 2 of them being drained, and 572 hours left in the month, the current
projection counted 4 nodes to the month's end (22,880 USD over the spend so far) where the daemon counts 2 to its end
and 2 for one more tick (11,440.33 USD), and the plan sized the pool as if the 2 served. A day's cost and the budget's
rate per hour leave them out as well.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from actuators.drain_mark_names import DRAIN_ANNOTATION, FORCED_ANNOTATION
from agent.cli import main
from agent.ledger.sqlite import SqliteLedger
from models import LedgerEntry
from tests.fakes import kube_objects as objs
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.prometheus.server import TENANTS, PrometheusServer

pytestmark = pytest.mark.xdist_group("prometheus")
AT = "2020-05-08T04:00:00+00:00"  # within the test Prometheus's trace
MONTH = datetime(2020, 5, 1, tzinfo=UTC)
HOURS_LEFT = 23 * 24 + 20  # to 1 June
PRICE = 10.0  # USD a node-hour
SPENT = 1000.0
TICK_HOURS = 1 / 60


def _config(tmp_path: Path, prometheus: PrometheusServer, gke: FakeGkeApi, kube_url: str | None) -> Path:
    ledger = tmp_path / "ledger.sqlite"
    with SqliteLedger(ledger, fresh_if_empty=True) as book:
        book.record(LedgerEntry("a100", MONTH, datetime.fromisoformat(AT), 4, SPENT))
    document: dict[str, Any] = {
        "demand_classes": [{"name": t} for t in TENANTS],
        "pools": [
            {
                "id": "a100",
                "kind": "gpu-node-pool",
                "chips_per_unit": 8,
                "min_units": 0,
                "max_units": 60,
                "price_per_unit_hour_usd": PRICE,
                "lead_time": "10m",
                "serves": list(TENANTS),
            }
        ],
        "budgets": [{"name": "research", "pools": ["a100"], "monthly_cap_usd": 1_000_000}],
        "forecast": {"model": "persistence", "history": "2h", "step": "1m", "max_staleness": "5m"},
        "loop": {"tick_interval": "1m"},
        "prometheus": {"url": prometheus.url, "retries": 0},
        "cloud": {
            "project": gke.project,
            "location": gke.location,
            "cluster": gke.cluster,
            "endpoint": gke.url,
            "node_pools": [{"pool": "a100", "node_pool": "a100"}],
        },
        "ledger": {"path": str(ledger)},
    }
    if kube_url is not None:
        document["daemon"] = {"kubernetes": {"api_url": kube_url}}
    path = tmp_path / "leadtime.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def _four_nodes_two_draining(gke: FakeGkeApi, kube: FakeKubeApi, forced: bool = True) -> list[str]:
    """4 nodes of the pool, the last 2 cordoned by a release of leadtime's: a budget's forced release (kept draining
    by the daemon whatever it plans) or a release of idle nodes (which a scale-up takes back before it buys)."""
    gke.add_pool("a100", nodes=4)
    nodes = [i.name for m in gke.pools["a100"].migs for i in m.instances]
    for i, name in enumerate(nodes):
        node = objs.node(name, "a100", unschedulable=i >= 2)
        if i >= 2:
            marks = {DRAIN_ANNOTATION: f"release-{i}"}
            node["metadata"]["annotations"] = {**marks, FORCED_ANNOTATION: f"release-{i}"} if forced else marks
        kube.put("nodes", node)
    return nodes


def _recommend(config: Path, out: Path) -> dict[str, Any]:
    assert main(["recommend", "--config", str(config), "--out", str(out), "--at", AT]) == 0
    document: dict[str, Any] = json.loads((out / "recommendation.json").read_text(encoding="utf-8"))
    return document


def test_the_current_projection_counts_the_nodes_being_drained_one_more_tick(
    prometheus: PrometheusServer, gke_api: FakeGkeApi, kube_api: FakeKubeApi, tmp_path: Path
) -> None:
    _four_nodes_two_draining(gke_api, kube_api)

    document = _recommend(_config(tmp_path, prometheus, gke_api, kube_api.url), tmp_path / "out")

    (pool,) = document["pools"]
    assert (pool["current_units"], pool["ready_units"], pool["billed_units"]) == (2, 2, 4)
    (budget,) = document["budgets"]
    assert budget["hours_left"] == HOURS_LEFT
    # 2 nodes to the month's end, the 2 being drained one more tick (before: all 4 to its end, SPENT + 22,880.00)
    now = SPENT + 2 * PRICE * HOURS_LEFT + 2 * PRICE * TICK_HOURS
    assert budget["current_projected_period_usd"] == pytest.approx(now, abs=0.01)
    # the plan's (a scale-up) counts the recommended target to the month's end and the 2 being drained not beyond its
    # next tick, which the planner bills at the more of the units before and after (``budget.project``)
    recommended = pool["recommended_units"]
    assert recommended > 4
    then = SPENT + recommended * PRICE * HOURS_LEFT
    assert budget["recommended_projected_period_usd"] == pytest.approx(then, abs=0.01)
    assert (pool["recommended_billed_units"], pool["draining_units"], pool["recommended_draining_units"]) == (
        recommended + 2,
        2,
        2,
    )
    # a day's cost and an hour's rate leave them out too (960 and 40 USD now before, the 2 counted)
    assert (pool["current_cost_per_day_usd"], budget["current_per_hour_usd"]) == (2 * PRICE * 24, 2 * PRICE)
    assert pool["recommended_cost_per_day_usd"] == recommended * PRICE * 24
    assert budget["recommended_per_hour_usd"] == recommended * PRICE
    assert [w for w in document["warnings"] if "drains in progress" in w] == []
    # only read: no node patched, cordoned or evicted, and no size change sent
    assert {r.verb for r in kube_api.requests} <= {"get", "list"}
    assert [(m, p) for m, p in gke_api.requests if m != "GET" and "listManagedInstances" not in p] == []


def test_a_scale_up_that_takes_back_the_nodes_being_drained_keeps_them(
    prometheus: PrometheusServer, gke_api: FakeGkeApi, kube_api: FakeKubeApi, tmp_path: Path
) -> None:
    # releases of idle nodes: the daemon's scale-up ends their drains before it buys, so they stay
    _four_nodes_two_draining(gke_api, kube_api, forced=False)

    document = _recommend(_config(tmp_path, prometheus, gke_api, kube_api.url), tmp_path / "out")

    (pool,) = document["pools"]
    (budget,) = document["budgets"]
    recommended = pool["recommended_units"]
    assert recommended > 4
    assert (pool["current_units"], pool["draining_units"], pool["recommended_draining_units"]) == (2, 2, 0)
    assert pool["recommended_billed_units"] == recommended
    now = SPENT + 2 * PRICE * HOURS_LEFT + 2 * PRICE * TICK_HOURS  # with no resize they go
    assert budget["current_projected_period_usd"] == pytest.approx(now, abs=0.01)
    assert budget["recommended_projected_period_usd"] == pytest.approx(
        SPENT + recommended * PRICE * HOURS_LEFT, abs=0.01
    )
    assert (pool["current_cost_per_day_usd"], pool["recommended_cost_per_day_usd"]) == (480.0, recommended * 240.0)


def test_drains_that_cannot_be_read_are_told(
    prometheus: PrometheusServer,
    gke_api: FakeGkeApi,
    kube_api: FakeKubeApi,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _four_nodes_two_draining(gke_api, kube_api)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))

    document = _recommend(_config(tmp_path, prometheus, gke_api, None), tmp_path / "out")

    (pool,) = document["pools"]
    assert (pool["current_units"], pool["billed_units"], pool["draining_units"]) == (4, 4, 0)
    (budget,) = document["budgets"]
    assert budget["current_projected_period_usd"] == pytest.approx(SPENT + 4 * PRICE * HOURS_LEFT, abs=0.01)
    (warning,) = [w for w in document["warnings"] if "drains in progress" in w]
    assert warning.startswith("drains in progress not read: cannot reach a Kubernetes API")
    assert "daemon.kubernetes.api_url" in warning and "counted as staying" in warning and "a100" in warning
    assert kube_api.requests == []


def test_drains_whose_read_fails_are_told(
    prometheus: PrometheusServer, gke_api: FakeGkeApi, kube_api: FakeKubeApi, tmp_path: Path
) -> None:
    _four_nodes_two_draining(gke_api, kube_api)
    kube_api.fail_next(100, 403, verb="list", resource="nodes")  # a role that may not list nodes

    document = _recommend(_config(tmp_path, prometheus, gke_api, kube_api.url), tmp_path / "out")

    (pool,) = document["pools"]
    assert (pool["current_units"], pool["draining_units"]) == (4, 0)
    (budget,) = document["budgets"]
    assert budget["current_projected_period_usd"] == pytest.approx(SPENT + 4 * PRICE * HOURS_LEFT, abs=0.01)
    # the one refusal (nodes may not be listed) leaves both the drains in progress and the idle nodes unread: one
    # warning says both consequences (before: two warnings, the second saying the pool's size was held while the
    # same report planned its scale-up)
    assert pool["action"] == "scale-up" and pool["recommended_units"] > pool["current_units"]
    (warning,) = [w for w in document["warnings"] if "a100" in w and ("drains" in w or "idle" in w)]
    assert warning.startswith("pool a100: the drains in progress could not be read, nor its idle nodes (")
    assert "403" in warning and "counted as staying" in warning
    assert "not shrunk for idleness" in warning and "still scaled up when demand needs more" in warning
    assert "holding" not in warning

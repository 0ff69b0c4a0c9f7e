"""The HTTP endpoints on a real socket: liveness, readiness from the last successful tick, Prometheus metrics."""

from __future__ import annotations

import importlib.metadata
import platform
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.daemon.endpoints import EndpointServer
from agent.daemon.health import HealthState
from agent.daemon.metrics import DaemonMetrics
from models import (
    ActionResult,
    ActionStatus,
    BudgetCut,
    BudgetSnapshot,
    CapacityPlan,
    DemandForecast,
    DemandShare,
    PoolDecision,
    PoolState,
    Resize,
    Skip,
    SkipReason,
)
from models.clock import SimulatedClock
from tests.daemon.conftest import T0
from tests.daemon.fake_loop import FakeTickReport


@pytest.fixture
def served(clock: SimulatedClock) -> Iterator[tuple[str, HealthState, DaemonMetrics]]:
    health = HealthState(max_tick_age=timedelta(minutes=3))
    metrics = DaemonMetrics()
    server = EndpointServer("127.0.0.1", 0, health, metrics, clock)
    server.start()
    host, port = server.address
    try:
        yield f"http://{host}:{port}", health, metrics
    finally:
        server.stop()


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_healthz_answers_while_the_process_runs(served: tuple[str, HealthState, DaemonMetrics]) -> None:
    url, _, _ = served
    assert _get(f"{url}/healthz") == (200, "ok\n")
    assert _get(f"{url}/nope")[0] == 404


def test_healthz_fails_while_a_tick_runs_past_its_bound(clock: SimulatedClock) -> None:
    health = HealthState(max_tick_age=timedelta(minutes=3), max_tick_duration=timedelta(minutes=10))
    server = EndpointServer("127.0.0.1", 0, health, DaemonMetrics(), clock)
    server.start()
    host, port = server.address
    try:
        health.tick_started(clock.now())
        clock.advance(timedelta(minutes=10))
        assert _get(f"http://{host}:{port}/healthz") == (200, "ok\n")
        clock.advance(timedelta(seconds=1))
        assert _get(f"http://{host}:{port}/healthz") == (503, "a tick has been running 601s (bound 600s)\n")
        health.tick_ended()
        assert _get(f"http://{host}:{port}/healthz") == (200, "ok\n")
    finally:
        server.stop()


def test_readyz_follows_the_last_successful_tick(
    served: tuple[str, HealthState, DaemonMetrics], clock: SimulatedClock
) -> None:
    url, health, _ = served
    status, body = _get(f"{url}/readyz")
    assert status == 503
    assert "no successful tick yet" in body
    health.tick_succeeded(clock.now())
    assert _get(f"{url}/readyz")[0] == 200
    clock.advance(timedelta(minutes=2))
    health.tick_failed(clock.now(), "MetricsUnavailable: Prometheus answered 503")
    assert _get(f"{url}/readyz")[0] == 200  # one failure inside the bound does not flap readiness
    clock.advance(timedelta(minutes=1, seconds=1))
    status, body = _get(f"{url}/readyz")
    assert status == 503
    assert "181s ago" in body
    assert "Prometheus answered 503" in body


def test_metrics_expose_what_the_tick_saw_decided_and_did(served: tuple[str, HealthState, DaemonMetrics]) -> None:
    url, _, metrics = served
    plan = CapacityPlan(
        now=T0,
        resizes=(Resize("a100", 2, 4, "forecast p90 above capacity", "k1"),),
        skips=(Skip("v5e", SkipReason.COOLDOWN, "changed 3m ago"), Skip("v5e", SkipReason.BUDGET, "cap")),
        targets={"a100": 4, "v5e": 1},
    )
    report = FakeTickReport(
        forecasts=[DemandForecast("train", T0, timedelta(minutes=5), {0.5: (10.0, 12.0), 0.9: (14.0, 19.0)}, 9.0, "m")],
        pools=[PoolState("a100", T0, ready_units=2, target_units=4), PoolState("v5e", T0, 1, 1)],
        plan=plan,
        results=[ActionResult("k1", "a100", ActionStatus.STARTED, T0)],
        budgets=[BudgetSnapshot("fleet", T0, T0 + timedelta(days=30), 1200.0, 5000.0, 4100.0)],
        errors=[ValueError("x")],
    )
    metrics.record_tick(report)
    metrics.is_leader.set(1)
    metrics.tick_duration.labels("leader").observe(0.4)
    status, body = _get(f"{url}/metrics")
    assert status == 200
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }
    assert samples[("leadtime_forecast_accelerators", (("demand_class", "train"), ("quantile", "0.9")))] == 19.0
    assert samples[("leadtime_forecast_accelerators", (("demand_class", "train"), ("quantile", "0.5")))] == 12.0
    assert samples[("leadtime_pool_recommended_units", (("pool", "a100"),))] == 4
    assert samples[("leadtime_pool_ready_units", (("pool", "a100"),))] == 2
    assert samples[("leadtime_pool_target_units", (("pool", "a100"),))] == 4
    decided = (("action", "scale-up"), ("pool", "a100"), ("status", "started"))
    assert samples[("leadtime_decisions_total", decided)] == 1
    assert samples[("leadtime_skips_total", (("pool", "v5e"), ("reason", "cooldown")))] == 1
    assert samples[("leadtime_budget_remaining_usd", (("budget", "fleet"),))] == 3800.0
    assert samples[("leadtime_budget_projected_usd", (("budget", "fleet"),))] == 4100.0
    assert samples[("leadtime_errors_total", (("error", "ValueError"),))] == 1
    assert samples[("leadtime_is_leader", ())] == 1
    assert samples[("leadtime_tick_duration_seconds_count", (("role", "leader"),))] == 1


def test_pool_group_demand_has_metrics_of_its_own_and_never_a_demand_class_label(
    served: tuple[str, HealthState, DaemonMetrics],
) -> None:
    url, _, metrics = served
    bands: dict[float, tuple[float, ...]] = {0.9: (14.0, 19.0)}
    metrics.record_forecasts(
        [
            DemandForecast("train", T0, timedelta(minutes=5), bands, 9.0, "m"),
            DemandForecast("pool-group:a100+v5e", T0, timedelta(minutes=5), {0.9: (30.0, 41.0)}, 25.0, "m"),
        ]
    )
    body = _get(f"{url}/metrics")[1]
    families = {family.name: family for family in text_string_to_metric_families(body)}
    classes = {s.labels["demand_class"] for s in families["leadtime_forecast_accelerators"].samples}
    assert classes == {"train"}
    observed = {s.labels["demand_class"] for s in families["leadtime_demand_observed_accelerators"].samples}
    assert observed == {"train"}
    (group,) = families["leadtime_pool_group_forecast_accelerators"].samples
    assert group.labels == {"pool_group": "a100+v5e", "quantile": "0.9"} and group.value == 41.0
    (group_observed,) = families["leadtime_pool_group_demand_observed_accelerators"].samples
    assert group_observed.value == 25.0


def test_a_class_without_data_this_tick_has_no_demand_or_forecast_series(
    served: tuple[str, HealthState, DaemonMetrics],
) -> None:
    url, _, metrics = served
    step = timedelta(minutes=5)

    def forecasts(*names: str) -> list[DemandForecast]:
        return [DemandForecast(name, T0, step, {0.5: (10.0, 12.0), 0.9: (14.0, 19.0)}, 9.0, "m") for name in names]

    def exposed(name: str) -> set[tuple[str, ...]]:
        """The label values of each series of the metric ``name`` on /metrics now."""
        body = _get(f"{url}/metrics")[1]
        (family,) = [f for f in text_string_to_metric_families(body) if f.name == name]
        return {tuple(s.labels.values()) for s in family.samples}

    metrics.record_forecasts(forecasts("train", "serve", "pool-group:a100+v5e"))
    metrics.record_forecasts(forecasts("serve"))  # train and the group lost their data: held, not forecast
    assert exposed("leadtime_forecast_accelerators") == {("serve", "0.5"), ("serve", "0.9")}
    assert exposed("leadtime_demand_observed_accelerators") == {("serve",)}
    assert exposed("leadtime_pool_group_forecast_accelerators") == set()
    assert exposed("leadtime_pool_group_demand_observed_accelerators") == set()
    metrics.record_forecasts(forecasts("train"))  # train is back, serve is out
    assert exposed("leadtime_demand_observed_accelerators") == {("train",)}


def test_build_info_names_the_installed_version(served: tuple[str, HealthState, DaemonMetrics]) -> None:
    url, _, _ = served
    body = _get(f"{url}/metrics")[1]
    (info,) = next(f for f in text_string_to_metric_families(body) if f.name == "leadtime_build_info").samples
    assert info.value == 1
    assert info.labels["version"] == importlib.metadata.version("leadtime")
    assert info.labels["python"] == platform.python_version()


def test_each_pools_decision_is_a_gauge_per_stage_and_an_unknown_target_is_absent(
    served: tuple[str, HealthState, DaemonMetrics],
) -> None:
    url, _, metrics = served
    # 20 chips need 3 whole 8-chip units; +1 headroom = 4 within bounds; a step of 1 from 2 units: 3; a budget cut
    # of 1: 2.
    share = DemandShare("train", 0.9, 20.0, 12.0, 20.0, 20.0)
    cut = BudgetCut("fleet", "monthly", 1, "cap")
    a100 = PoolDecision(
        "a100", False, timedelta(minutes=10), 8, 0, 10, 2, (share,), 3, 1, 0, 4, 3, 2, step_limit=1,
        budget_cuts=(cut,),
    )  # fmt: skip
    metrics.record_plan(CapacityPlan(T0, decisions={"a100": a100}))
    v5e = replace(a100, pool_id="v5e")
    metrics.record_plan(CapacityPlan(T0, decisions={"v5e": v5e}))  # observed: it has a target ...
    unobserved = replace(v5e, current_units=None, target_units=None, step_limit=None, stepped_units=4, budget_cuts=())
    metrics.record_plan(CapacityPlan(T0, decisions={"v5e": unobserved}))  # ... and then it is not: no stale target
    _, body = _get(f"{url}/metrics")
    stages = {
        (s.labels["pool"], s.labels["stage"]): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
        if s.name == "leadtime_pool_decision_units"
    }
    assert {stage: value for (pool, stage), value in stages.items() if pool == "a100"} == {
        "need": 2.5,
        "rounded": 3.0,
        "bounded": 4.0,
        "stepped": 3.0,
        "budgeted": 2.0,
        "target": 2.0,
    }
    assert ("v5e", "target") not in stages and stages[("v5e", "need")] == 2.5

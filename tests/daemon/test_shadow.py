"""The dry-run shadow account: what the recommendations would have cost and served, beside what ran.

The account of a replayed day of the bundled trace is checked against the simulator run on the same window
(``agent.simulation.runner``): the recommended targets carried out on the simulated cluster, and the pools as
they ran (held in dry-run). Both sides bill paid units per step at the pool's price and serve each step's
demand cheapest first with the ready units, so the totals agree to float rounding (relative 1e-9). The daemons
here forecast with the last value: the accounting does not depend on the model, and the configured one makes a
test take tens of seconds.
"""

from __future__ import annotations

import json
import urllib.request
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from actuators import SimulatedCluster
from agent.daemon.endpoints import EndpointServer
from agent.daemon.replay import RehearsalCluster, ShiftedTraceSource
from agent.daemon.shadow import ShadowAccount
from agent.daemon.shadow_book import FileShadowStore, ShadowBook, shadow_store
from agent.daemon.wiring import AssembledDaemon, DaemonParts, assemble
from agent.ledger import InMemoryLedger
from agent.notify import RecordingNotifier
from agent.simulation.runner import run_actual, run_schedule
from agent.simulation.window import select_window
from config.ledger import LedgerSettings
from forecasting.last_value import PersistenceForecaster
from models import CapacityTier, LedgerUnavailable, PoolKind, PoolSpec, PoolState
from models.clock import SimulatedClock
from models.demand import AcceleratorFamily
from tests.daemon.scenario import TRACE_START, helios_settings, helios_trace

STEP = timedelta(minutes=5)  # the trace's step: one tick per step, as the simulator steps
POOL = "a100-on-demand"
RUNNING = 60  # units the pool runs throughout (dry-run never changes it)
TOLERANCE = 1e-9


def _pool(pool_id: str, tier: CapacityTier, price: float, lead: timedelta) -> PoolSpec:
    return PoolSpec(pool_id, PoolKind.GPU_NODE_POOL, tier, AcceleratorFamily.GPU, 8, 0, 10, price, lead, ("train",))


def _state(pool_id: str, ready: int, target: int | None = None) -> PoolState:
    return PoolState(pool_id, TRACE_START, ready, ready if target is None else target)


def _replica(
    clock: SimulatedClock, mode: str = "dry-run", store: FileShadowStore | None = None
) -> tuple[AssembledDaemon, SimulatedCluster]:
    """A whole daemon on the replayed trace and the simulated cluster (running RUNNING units). The forecaster is
    the last value (the accounting under test does not depend on the model, and the configured one takes seconds
    per refit)."""
    settings = helios_settings(kube_url=None, mode_tick=STEP)
    cluster = SimulatedCluster(settings.pool_specs(), clock, {POOL: RUNNING})
    parts = DaemonParts(
        source=ShiftedTraceSource(helios_trace(), TRACE_START, clock.now()),
        actuator=RehearsalCluster(cluster, clock),
        ledger=InMemoryLedger(),
        notifier=RecordingNotifier(),
        clock=clock,
        forecaster=PersistenceForecaster(),
        shadow_store=store,
    )
    assembled = assemble(settings, mode, parts, {"POD_NAME": "leadtime-a", "POD_NAMESPACE": "leadtime"})
    assembled.endpoints.stop()  # driven job by job; the endpoint test serves on a server of its own
    return assembled, cluster


def test_replayed_day_matches_the_simulator_on_the_same_window(clock: SimulatedClock) -> None:
    settings = helios_settings(kube_url=None, mode_tick=STEP)
    replica, cluster = _replica(clock)
    shadow = replica.shadow
    assert shadow is not None
    started = clock.now()
    ticks = 24 * 12 + 1  # a day of intervals
    recommended: list[int] = []
    for _ in range(ticks):
        clock.advance(STEP)
        replica.daemon.tick()
        recommended.append(shadow.account.what_if[POOL].target)
    assert cluster.scale_actions == 0  # dry-run: the pool ran RUNNING units all along
    assert len(set(recommended)) > 1  # the recommendations moved, so lead times and billing are exercised

    offset = TRACE_START - started  # the replay maps daemon time to trace time
    first, last = started + STEP, clock.now()  # intervals [first, last) were charged
    classes = settings.demand_class_models()
    window = select_window(helios_trace(), classes, first + offset, last + offset)
    assert len(window.index) == ticks - 1
    schedule = run_schedule(settings, window, {POOL: np.array(recommended[:-1])}, {POOL: RUNNING})
    actual = run_actual(settings, window, {POOL: np.full(len(window.index), float(RUNNING))})

    total = shadow.account.total
    gaps = int((~window.observed).sum())  # steps the trace has no value for: neither side charges them
    assert gaps >= 1 and total.skipped == gaps and total.intervals == ticks - 1 - gaps
    for run, simulated in (("recommended", schedule), ("actual", actual)):
        got = total.runs[run]
        assert got.cost_usd == pytest.approx(simulated.cost_usd, rel=TOLERANCE)
        assert got.unserved_chip_hours == pytest.approx(simulated.unserved_accelerator_hours, rel=TOLERANCE)
        assert got.demanded_chip_hours == pytest.approx(simulated.demanded_accelerator_hours, rel=TOLERANCE)
    assert total.savings_usd == pytest.approx(actual.cost_usd - schedule.cost_usd, rel=TOLERANCE)
    registry = replica.metrics.registry
    assert registry.get_sample_value("leadtime_shadow_savings_usd_total") == pytest.approx(total.savings_usd)
    assert registry.get_sample_value("leadtime_shadow_cost_usd_total", {"run": "actual"}) == pytest.approx(
        actual.cost_usd, rel=TOLERANCE
    )


def test_lead_time_delays_service_but_not_billing_and_missing_demand_is_skipped() -> None:
    hour = timedelta(hours=1)
    spec = _pool("gpu", CapacityTier.ON_DEMAND, 10.0, lead=hour)
    account = ShadowAccount([spec], ["train"], max_interval=hour)
    t0 = TRACE_START
    account.record(t0, {}, [_state("gpu", 1)], {"gpu": 3})  # asks for 2 more units, ready an hour later
    assert account.record(t0 + hour, {"train": 24.0}, [_state("gpu", 1)], {"gpu": 3})
    rec, act = account.total.runs["recommended"], account.total.runs["actual"]
    assert rec.cost_usd == pytest.approx(3 * 10.0) and act.cost_usd == pytest.approx(1 * 10.0)
    assert rec.unserved_chip_hours == pytest.approx(24.0 - 8.0)  # the new units were still in flight
    assert account.record(t0 + 2 * hour, {"train": 24.0}, [_state("gpu", 1)], {"gpu": 3})
    assert rec.unserved_chip_hours == pytest.approx(16.0)  # ready now: the second hour is fully served
    assert act.unserved_chip_hours == pytest.approx(2 * 16.0)

    assert not account.record(t0 + 3 * hour, {}, [_state("gpu", 1)], {"gpu": 3})  # no demand: not zero demand
    assert not account.record(t0 + 5 * hour, {"train": 1.0}, [_state("gpu", 1)], {"gpu": 3})  # a 2 h gap
    assert account.total.intervals == 2 and account.total.skipped == 2
    assert rec.cost_usd == pytest.approx(60.0)


def test_the_account_survives_a_restart_and_a_damaged_file_is_refused(tmp_path: Path) -> None:
    hour = timedelta(hours=1)
    spec = _pool("gpu", CapacityTier.ON_DEMAND, 10.0, lead=2 * hour)
    path = tmp_path / "ledger.sqlite.shadow.json"
    store = shadow_store(LedgerSettings(path=str(tmp_path / "ledger.sqlite")), InMemoryLedger(), [spec])
    assert isinstance(store, FileShadowStore) and store.path == path
    book = ShadowBook([spec], ["train"], hour, store)
    book.record(TRACE_START, {}, [_state("gpu", 1)], {"gpu": 4})
    book.record(TRACE_START + hour, {"train": 8.0}, [_state("gpu", 1)], {"gpu": 4})

    again = ShadowBook([spec], ["train"], hour, FileShadowStore(path))  # a restarted daemon
    assert again.account.to_dict() == book.account.to_dict()
    again.record(TRACE_START + 2 * hour, {"train": 40.0}, [_state("gpu", 1)], {"gpu": 4})
    book.record(TRACE_START + 2 * hour, {"train": 40.0}, [_state("gpu", 1)], {"gpu": 4})
    assert again.account.to_dict() == book.account.to_dict()  # units in flight carried over the restart
    assert again.account.total.runs["recommended"].unserved_chip_hours == pytest.approx(0.0 + 32.0)

    path.write_text(json.dumps({"version": 1, "total": {}}), encoding="utf-8")
    with pytest.raises(LedgerUnavailable, match=r"shadow account in .*shadow\.json.*'runs'"):
        ShadowBook([spec], ["train"], hour, FileShadowStore(path))


def test_report_endpoint_serves_the_account_and_the_daily_file_is_written(
    clock: SimulatedClock, tmp_path: Path
) -> None:
    replica, _ = _replica(clock)
    for _ in range(3):
        clock.advance(STEP)
        replica.daemon.tick()
    shadow = replica.shadow
    assert shadow is not None
    shadow.reports = tmp_path
    replica.daemon.daily_report()
    daily = tmp_path / f"shadow-{clock.now().date().isoformat()}.html"
    savings = f"{shadow.account.total.savings_usd:,.2f} USD"
    assert savings in daily.read_text(encoding="utf-8")

    server = EndpointServer("127.0.0.1", 0, replica.health, replica.metrics, clock, report=shadow.html)
    server.start()
    try:
        host, port = server.address
        with urllib.request.urlopen(f"http://{host}:{port}/report", timeout=5) as response:
            assert response.headers["Content-Type"].startswith("text/html")
            page = response.read().decode()
            assert savings in page
            what_if = shadow.account.what_if[POOL]
            assert f"<td>{POOL}</td><td>{what_if.target}</td><td>{what_if.ready}</td><td>{RUNNING}</td>" in page
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as response:
            assert b"leadtime_shadow_savings_usd_total" in response.read()
    finally:
        server.stop()


def test_enforce_mode_keeps_no_shadow_account(clock: SimulatedClock) -> None:
    replica, _ = _replica(clock, "enforce")
    assert replica.shadow is None
    assert replica.metrics.registry.get_sample_value("leadtime_shadow_savings_usd_total") is None


def test_a_replica_that_becomes_the_leader_continues_the_saved_account(clock: SimulatedClock, tmp_path: Path) -> None:
    settings = helios_settings(kube_url=None, mode_tick=STEP)
    store = FileShadowStore(tmp_path / "ledger.sqlite.shadow.json")
    assembled, _ = _replica(clock, store=store)
    shadow = assembled.shadow
    assert shadow is not None
    # what the previous leader saved after this replica started: two intervals charged up to now
    kept = ShadowAccount(settings.pool_specs(), shadow.account.classes, shadow.account.max_interval)
    demand = dict.fromkeys(shadow.account.classes, 8.0)
    running = [PoolState(POOL, clock.now(), RUNNING, RUNNING)]
    for i in range(3):
        kept.record(clock.now() + (i - 2) * STEP, demand, running, {POOL: RUNNING})
    store.save(json.dumps(kept.to_dict()), clock.now())

    assembled.daemon.elect()  # this replica leads from now on
    clock.advance(STEP)
    assembled.daemon.tick()
    assert shadow.account.total.intervals == 3  # the two saved intervals and the one since
    assert shadow.account.total.runs["actual"].cost_usd == pytest.approx(3 * RUNNING * 29.36 / 12)

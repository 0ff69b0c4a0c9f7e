"""The first tick's fit reads the history within the tick's read deadline.

While no model has been fitted, a tick refits within itself, and that refit read each class's history with no
deadline at all. Against a Prometheus that answers the tick's short reads but hangs on the history's range queries,
each class took its client's timeout times its tries: ``(retries + 1) x (timeout + READ_TIMEOUT_MARGIN_S)``, 91.5 s
a class with the defaults (30 s, 2 retries), so 274.5 s for three classes, seven classes past liveness's default
bound of 10 minutes, and the kubelet restarted the replica into the same first tick. Here, with a 1-second timeout and
2 retries, the three classes' first tick took 3 x 3 x 1.5 = 13.5 s (13.8 s measured), no pool read, no budget
enforced, no alert, while /healthz failed from its 6-second bound on. The history read now ends within the tick's
read deadline (``loop.read_deadline``, half of the 4-second tick here): the classes read are fitted and forecast, each
class not read is held with the reason and alerted as missing data, and the next tick reads it again.

A small local HTTP server stands in for Prometheus; the real prometheus-api-client and requests session talk to it.
It answers an instant query (``/api/v1/query``) with a vector and a range query (``/api/v1/query_range``) with a
matrix on the requested step grid, as the Prometheus HTTP API reference documents them ("Instant queries", "Range
queries": ``{"status": "success", "data": {"resultType": "vector"|"matrix", "result": [...]}}``, each sample value a
string). A range query over 12 hours or more (the history's: ``forecast.history`` is a day, a tick reads far less)
of the classes the test names hangs, accepted and never answered, until the test lets it go; one of the classes
named slow answers after ``SLOW_S``, and one of the classes named failing is answered at once with a 503 and an error
body (``{"status": "error", "errorType": ..., "error": ...}``, the reference's format of an error).

Until a model is fitted, the history read by a tick is kept and the next tick reads only the classes not read yet, so
a history too slow to read whole within one deadline is read over a few ticks; a class whose read fails before the
deadline has passed is not held: the fit goes on without it and is marked done, as before the deadline.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from itertools import pairwise
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from actuators import SimulatedCluster
from agent.daemon.wiring import DaemonParts, assemble
from agent.ledger import InMemoryLedger
from agent.loop import Agent, AgentParts, TickReport
from agent.notify import RecordingNotifier
from agent.sources.prometheus import PrometheusSource
from agent.sources.prometheus_client import READ_TIMEOUT_MARGIN_S
from agent.sources.prometheus_queries import demand_queries
from config import settings_from_mapping
from config.schema import Settings
from forecasting import PersistenceForecaster
from forecasting.calibrated import last_value_forecaster
from models import AlertKind
from models.clock import SimulatedClock, SystemClock
from tests.fakes.http_server import reply_json, serving

# One worker runs the module: the ticks over a slow history (6 s, ``slow_history_ticks``) go on while the other tests
# run.
pytestmark = pytest.mark.xdist_group("first-tick-history-read-deadline")
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
CLASSES = [f"team-{i}" for i in range(3)]
LONG_RANGE_S = 12 * 3600
HELD_AT_MOST_S = 60.0  # a hanging query answers after this at the latest, so a failing test ends
TICK_S, TIMEOUT_S, RETRIES = 4.0, 1.0, 2
READ_DEADLINE_S = TICK_S / 2  # loop.read_deadline unset: half a tick
LIVE_BOUND_S = 6.0  # daemon.endpoints.live_max_tick_duration
TRY_S = TIMEOUT_S + READ_TIMEOUT_MARGIN_S  # one request's wait for an answer
# The first tick before: every class's history read through all its tries, one class after the other.
BEFORE_S = len(CLASSES) * (RETRIES + 1) * TRY_S
# The history read ends at its deadline, or once the request under way when it passed has run out its wait (the
# source cuts a request's timeout to the time left when it sends it, not a retry's), and the tick's own reads,
# planning and acting on a busy machine take the rest.
SLACK_S = 1.5
BOUND_S = READ_DEADLINE_S + TRY_S + SLACK_S  # 5 s: under BEFORE_S (13.5 s) and LIVE_BOUND_S (6 s)
HELD = f"history not read within {READ_DEADLINE_S:g}s (loop.read_deadline): "
# A slow history answers after this: one class's read fits in the read deadline, two do not.
SLOW_S = 1.2


@dataclass
class Hanging:
    """The classes whose history range queries hang until ``release`` is set."""

    classes: set[str] = field(default_factory=set)
    release: threading.Event = field(default_factory=threading.Event)
    slow: set[str] = field(default_factory=set)  # their history answers, after SLOW_S
    failing: set[str] = field(default_factory=set)  # their history is answered with a 503 at once
    asked: list[str] = field(default_factory=list)  # the class of each history query, in order


class _Handler(BaseHTTPRequestHandler):
    state: Hanging
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        url = urlparse(self.path)
        args = {k: v[-1] for k, v in parse_qs(url.query).items()}
        if url.path == "/api/v1/query":
            sample = {"metric": {}, "value": [float(args.get("time", time.time())), "4"]}
            reply_json(self, 200, {"status": "success", "data": {"resultType": "vector", "result": [sample]}})
            return
        start, end, step = (int(float(args[k])) for k in ("start", "end", "step"))
        named = [name for name in CLASSES if f'namespace="{name}"' in args["query"]]
        if end - start >= LONG_RANGE_S:
            self.state.asked.extend(named)
            if self.state.failing.intersection(named):
                reply_json(self, 503, {"status": "error", "errorType": "timeout", "error": "query timed out"})
                return
            if self.state.slow.intersection(named):
                time.sleep(SLOW_S)
        hangs = self.state.classes.intersection(named)
        if end - start >= LONG_RANGE_S and hangs and not self.state.release.is_set():
            self.state.release.wait(HELD_AT_MOST_S)
            return  # never answered
        values = [[t, "4"] for t in range(start, end + 1, step)]
        reply_json(
            self,
            200,
            {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": values}]}},
        )

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def prometheus() -> Iterator[tuple[str, Hanging]]:
    state = Hanging()
    try:
        with serving(type("Handler", (_Handler,), {"state": state})) as url:
            yield url, state
            state.release.set()  # the queries still hanging end before the server stops
    finally:
        state.release.set()


def _settings(url: str) -> Settings:
    pool = {"id": "shared", "kind": "gpu-node-pool", "tier": "on-demand", "chips_per_unit": 8, "min_units": 0,
            "max_units": 20, "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": CLASSES}  # fmt: skip
    config: dict[str, Any] = {
        "demand_classes": [{"name": name} for name in CLASSES],
        "pools": [pool],
        "forecast": {"model": "persistence", "history": "1d", "step": "5m", "refit_interval": "1h"},
        "loop": {"tick_interval": f"{TICK_S:g}s"},
        "ledger": {"backend": "memory"},
        "daemon": {
            "leader_election": {"enabled": False},
            "endpoints": {"bind_address": "127.0.0.1", "port": 0, "live_max_tick_duration": f"{LIVE_BOUND_S:g}s"},
        },
        "prometheus": {"url": url, "timeout": f"{TIMEOUT_S:g}s", "retries": RETRIES, "retry_backoff_s": 0},
    }
    return settings_from_mapping(config, source="test config")


def _source(settings: Settings) -> PrometheusSource:
    assert settings.prometheus is not None
    return PrometheusSource.from_settings(
        settings.prometheus, demand_queries(settings.demand_class_models(), settings.prometheus)
    )


def _timed(run: Any) -> tuple[Any, float]:
    started = time.monotonic()
    result = run()
    return result, time.monotonic() - started


def test_a_first_tick_against_a_hanging_history_ends_within_the_read_deadline_alive_and_alerting(
    prometheus: tuple[str, Hanging],
) -> None:
    url, hanging = prometheus
    hanging.classes.update(CLASSES)
    settings = _settings(url)
    clock = SystemClock()  # liveness measures the running tick on the monotonic clock
    notifier = RecordingNotifier()
    parts = DaemonParts(
        source=_source(settings),
        actuator=SimulatedCluster(settings.pool_specs(), clock),
        ledger=InMemoryLedger(),
        notifier=notifier,
        clock=clock,
        forecaster=PersistenceForecaster(),
        stand_in=last_value_forecaster(),
    )
    assembled = assemble(settings, "enforce", parts, {"POD_NAME": "replica-a", "POD_NAMESPACE": "leadtime"})
    assembled.endpoints.stop()  # the jobs are driven directly; no socket needed
    daemon, agent, health, metrics = assembled.daemon, assembled.loop.agent, assembled.health, assembled.metrics
    daemon.elect()

    started = time.monotonic()
    tick = threading.Thread(target=daemon.tick, daemon=True)
    tick.start()
    dead: list[str] = []
    while tick.is_alive() and time.monotonic() - started < BEFORE_S + 5:
        if not (live := health.liveness(clock.now())).ready:
            dead.append(live.detail)
        tick.join(0.1)
    took = time.monotonic() - started

    assert took < BOUND_S, f"the first tick took {took:.1f} s (without the deadline: {BEFORE_S} s)"
    assert dead == []
    assert metrics.last_success._value.get() > 0  # it read the pools and planned: observed demand, pools held
    assert agent.last_refit is None  # no model fitted for any class: the next tick refits
    missing = {e.subject: e.details for e in notifier.events if e.kind is AlertKind.MISSING_DATA}
    assert set(missing) == {f"demand class {name}" for name in CLASSES}
    for name in CLASSES:
        why = str(missing[f"demand class {name}"][name])
        assert why.startswith(HELD) and "answers too slowly" in why, why

    hanging.release.set()  # Prometheus answers the history now
    daemon.tick()
    assert agent.last_refit is not None


def _agent(settings: Settings) -> Agent:
    parts = AgentParts(
        _source(settings),
        last_value_forecaster(),  # the daemon's stand-in: a class never fitted is forecast without spread
        SimulatedCluster(settings.pool_specs(), SimulatedClock(NOW)),
        InMemoryLedger(),
        RecordingNotifier(),
    )
    return Agent(settings, parts)


def test_the_classes_read_are_fitted_and_forecast_the_one_not_read_held_and_fitted_at_the_next_tick(
    prometheus: tuple[str, Hanging],
) -> None:
    url, hanging = prometheus
    hanging.classes.add("team-2")  # read last: the classes before it are read in time
    agent = _agent(_settings(url))

    report, took = _timed(lambda: agent.run_once(NOW))
    assert isinstance(report, TickReport)
    assert took < BOUND_S, f"the first tick took {took:.1f} s"
    assert set(report.observed) == set(CLASSES)
    assert set(report.problems) == {"team-2"}
    assert report.problems["team-2"].startswith(HELD), report.problems
    assert "answers too slowly" in report.problems["team-2"]
    # the classes read, fitted: calibrated, no fallback note; neither team-2 nor the three classes' group total
    assert set(report.forecasts) == {"team-0", "team-1"}, sorted(report.forecasts)
    assert [report.forecasts[n].note for n in ("team-0", "team-1")] == ["", ""]
    assert [e.subject for e in report.alerts if e.kind is AlertKind.MISSING_DATA] == ["demand class team-2"]
    assert agent.last_refit is None

    hanging.release.set()
    later = NOW + timedelta(seconds=TICK_S)
    report = agent.run_once(later)
    assert report.problems == {}
    assert set(CLASSES) <= set(report.forecasts)
    assert report.forecasts["team-2"].note == ""  # fitted now, no longer the bare last value
    assert agent.last_refit == later


def test_a_refit_in_a_tick_cut_by_the_deadline_keeps_the_models_fitted_before(
    prometheus: tuple[str, Hanging], caplog: pytest.LogCaptureFixture
) -> None:
    url, hanging = prometheus
    agent = _agent(_settings(url))  # refits in its ticks once the refit interval has passed, as outside the daemon
    agent.run_once(NOW)
    assert agent.last_refit == NOW

    hanging.classes.update(CLASSES)
    with caplog.at_level(logging.WARNING, logger="agent.loop"):
        report, took = _timed(lambda: agent.run_once(NOW + timedelta(hours=1)))

    assert took < BOUND_S, f"the tick took {took:.1f} s"
    assert report.problems == {}
    assert set(CLASSES) <= set(report.forecasts)  # the models fitted before forecast on
    assert all(report.forecasts[n].note == "" for n in CLASSES)
    assert agent.last_refit == NOW  # not marked done: the next tick refits
    # this tick's records: the ticks of ``slow_history_ticks`` log from their own thread meanwhile
    mine = [r.getMessage() for r in caplog.records if r.thread == threading.get_ident()]
    cut = [message for message in mine if "did not finish within" in message]
    assert len(cut) == 1 and "3 of 3 classes not read" in cut[0], cut


def test_a_history_read_that_fails_before_the_deadline_leaves_the_class_out_of_a_fit_marked_done(
    prometheus: tuple[str, Hanging], caplog: pytest.LogCaptureFixture
) -> None:
    """team-1's history is answered with a 503 at once, well before the read deadline. The first version held it,
    blaming the deadline, and did not mark the fit done; as before the deadline (and as a refit beside the ticks),
    the fit goes on without it and is marked done, and the class is forecast by the model it has."""
    url, hanging = prometheus
    hanging.failing.add("team-1")
    agent = _agent(_settings(url))

    with caplog.at_level(logging.WARNING, logger="agent.loop"):
        report, took = _timed(lambda: agent.run_once(NOW))

    assert isinstance(report, TickReport)
    assert took < READ_DEADLINE_S, f"the first tick took {took:.1f} s"
    assert report.problems == {}, report.problems
    assert set(CLASSES) <= set(report.forecasts)
    assert [e.subject for e in report.alerts if e.kind is AlertKind.MISSING_DATA] == []
    assert agent.last_refit == NOW
    # this tick's records: the ticks of ``slow_history_ticks`` log from their own thread meanwhile
    mine = [r.getMessage() for r in caplog.records if r.thread == threading.get_ident()]
    kept = [message for message in mine if "history of class team-1 was not read" in message]
    assert len(kept) == 1 and "kept from the last fit" in kept[0], kept
    assert not any("not read within" in message for message in mine)


@dataclass
class SlowTicks:
    """The ticks of an agent whose classes' history each answers after SLOW_S: per tick, the classes forecast and held,
    those whose history it asked for (a retry within a read asks again), the seconds it took and its report."""

    agent: Agent
    now: datetime
    forecast: list[set[str]] = field(default_factory=list)
    held: list[set[str]] = field(default_factory=list)
    asked: list[list[str]] = field(default_factory=list)
    took: list[float] = field(default_factory=list)
    reports: list[object] = field(default_factory=list)


def _tick_over_a_slow_history(url: str, hanging: Hanging) -> SlowTicks:
    agent = _agent(_settings(url))
    ticks = SlowTicks(agent, NOW)
    for n in range(2 * len(CLASSES)):  # one class a tick; a read the machine slowed past its deadline gets a spare
        ticks.now = NOW + n * timedelta(seconds=TICK_S)
        first = len(hanging.asked)
        report, took = _timed(lambda now=ticks.now: agent.run_once(now))
        ticks.asked.append(hanging.asked[first:])
        ticks.reports.append(report)
        ticks.took.append(took)
        ticks.forecast.append(set(report.forecasts) & set(CLASSES))
        ticks.held.append(set(report.problems))
        if agent.last_refit is not None:
            break
    return ticks


@pytest.fixture(scope="module", autouse=True)
def slow_history_ticks() -> Iterator[Future[SlowTicks]]:
    """The ticks of ``test_a_history_too_slow_for_one_deadline_is_read_over_ticks_each_class_once``, in a thread of
    their own (agent, Prometheus stand-in and clock their own) from the module's first test on, while the other
    tests run; they have ended before their server stops."""
    hanging = Hanging()
    hanging.slow.update(CLASSES)
    with (
        serving(type("Handler", (_Handler,), {"state": hanging})) as url,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="slow-history-ticks") as pool,
    ):
        yield pool.submit(_tick_over_a_slow_history, url, hanging)


# Last in the module: its ticks go on meanwhile (``slow_history_ticks``).
def test_a_history_too_slow_for_one_deadline_is_read_over_ticks_each_class_once(
    slow_history_ticks: Future[SlowTicks],
) -> None:
    """Each class's history answers after 1.2 s, so a 2-second deadline reads one class a tick. The first version
    read every class again from the first in each tick and kept nothing: team-0 was read and forecast in every tick,
    the others held in every tick, and no fit was ever marked done. The classes read are kept until the fit is done:
    each tick reads only the classes not read yet, fits on all read so far, and the third tick completes the fit."""
    ticks = slow_history_ticks.result()
    agent, forecast, held, asked = ticks.agent, ticks.forecast, ticks.held, ticks.asked
    for n, (report, took) in enumerate(zip(ticks.reports, ticks.took, strict=True)):
        assert isinstance(report, TickReport)
        assert took < BOUND_S, f"tick {n + 1} took {took:.1f} s"
        assert held[n].isdisjoint(forecast[n])
    report = ticks.reports[-1]
    assert isinstance(report, TickReport)

    assert agent.last_refit == ticks.now, (forecast, held, asked)
    assert held[-1] == set() and forecast[-1] == set(CLASSES)
    assert all(report.forecasts[name].note == "" for name in CLASSES)
    # a class whose history was read is neither read again nor held again, and forecast in every tick after
    for name in CLASSES:  # the machine may slow a read past its tries: then the class is read at a later tick
        read_at = next(n for n, names in enumerate(forecast) if name in names)
        assert all(name not in names for names in asked[read_at + 1 :]), (name, asked)
    for before, after in pairwise(forecast):
        assert before <= after, forecast
    assert len(forecast) <= len(CLASSES) + 1, (forecast, held)
    assert agent._first_history is None  # the history kept until the fit was done is dropped

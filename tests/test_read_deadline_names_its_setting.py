"""A read its deadline ended names the setting that deadline comes from. Not every read is bounded by
loop.read_deadline: a tick reads the on-prem capacity within its share of the tick (``ONPREM_READ_SHARE``, unless
loop.read_deadline is shorter), and the burst profile reads its demand and on-prem capacity histories within their
shares of the tick. Each said "raise loop.read_deadline (...), not prometheus.timeout": with a 2-second tick and a
capacity query hanging, the on-prem capacity alert said so for its 0.2 s deadline, and said it again with
loop.read_deadline set to 1900ms, the deadline still 0.2 s. They now name loop.tick_interval, and how much of a tick
the read has. The query hangs, sending no byte of an answer: the setting is named for a server that is only slow,
after the reason says Prometheus may be hung or overloaded.

A local server on 127.0.0.1 stands in for Prometheus (``tests.test_onprem_read_deadline``'s: demand answers at once,
capacity after ``capacity_delay_s``, or demand after ``demand_delay_s``); the real prometheus-api-client and requests
session talk to it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from agent.burst_history import HourlyBurstProfile
from agent.demand_reads import fetch_demand
from agent.onprem_capacity import onprem_capacity_events
from agent.planning.groups import demand_groups
from agent.sources.onprem_capacity import PrometheusOnPremCapacity
from agent.sources.prometheus import PrometheusSource
from config import settings_from_mapping
from config.schema import Settings
from models import AlertKind, DemandClass
from tests.fakes.http_server import serving
from tests.test_onprem_read_deadline import CAPACITY, DEMAND, NOW, Stub, _agent, _Handler, _settings

TICK_READ = "raise loop.read_deadline (the time a tick reads in, half of loop.tick_interval unless set)"
ONPREM_SHARE = "raise loop.tick_interval (on-prem capacity is read within 10% of a tick)"
SLOW = (
    "Prometheus sent no byte of an answer: it may be hung or overloaded (check its /-/ready and its query log); if it "
    "is only slow, "
)


@pytest.fixture
def stub() -> Iterator[tuple[str, Stub]]:
    state = Stub()
    with serving(type("Handler", (_Handler,), {"stub": state})) as url:
        yield url, state


def _with_loop(settings: Settings, **loop: str) -> Settings:
    """``settings`` (a 2-second tick, loop.read_deadline unset: half a tick) with ``loop`` set."""
    document: dict[str, Any] = settings.model_dump(mode="json", exclude_none=True)
    document["loop"].update(loop)
    return settings_from_mapping(document, source="read deadline setting test")


def _onprem_alert_error(url: str, **loop: str) -> str:
    """The error of the alert that onprem-a's capacity was not read, the capacity query hanging 3 s."""
    settings = _with_loop(_settings(url), **loop)
    outlook = _agent(settings).observe(NOW)
    alerts = [a for a in onprem_capacity_events(outlook.onprem, settings.pool_specs(), NOW) if a.subject == "onprem-a"]
    assert len(alerts) == 1 and alerts[0].kind is AlertKind.ONPREM_CAPACITY, alerts
    return str(alerts[0].details["error"])


@pytest.mark.parametrize("read_deadline", [None, "1900ms"], ids=["read_deadline unset", "read_deadline 1900ms"])
def test_an_on_prem_capacity_read_its_share_of_the_tick_ended_names_loop_tick_interval(
    stub: tuple[str, Stub], read_deadline: str | None
) -> None:
    url, state = stub
    state.capacity_delay_s = 3.0

    error = _onprem_alert_error(url, **({} if read_deadline is None else {"read_deadline": read_deadline}))

    assert "the read deadline (0.2 s) ended the read: Prometheus did not answer within 0." in error, error
    assert error.endswith(f"; {SLOW}{ONPREM_SHARE})"), error
    assert "loop.read_deadline" not in error


def test_an_on_prem_capacity_read_a_shorter_loop_read_deadline_ended_names_it(stub: tuple[str, Stub]) -> None:
    """loop.read_deadline 1s, shorter than 10% of a 20-second tick: it is the deadline of the capacity read."""
    url, state = stub
    state.capacity_delay_s = 3.0

    error = _onprem_alert_error(url, tick_interval="20s", read_deadline="1s")

    assert "the read deadline (1 s) ended the read" in error, error
    assert error.endswith(f"; {SLOW}{TICK_READ})"), error
    assert "loop.tick_interval (on-prem" not in error


def _profile(settings: Settings) -> HourlyBurstProfile:
    """The burst profile of ``settings``' pools over 6 hours, read within the shares of a 1-second tick (0.5 s)."""
    pools = settings.pool_specs()
    groups = demand_groups(["train"], pools)
    return HourlyBurstProfile(groups, pools, timedelta(hours=6), timedelta(minutes=5), timedelta(seconds=1))


def test_the_burst_profiles_demand_history_read_its_share_ended_names_loop_tick_interval(
    stub: tuple[str, Stub], caplog: pytest.LogCaptureFixture
) -> None:
    url, state = stub
    state.demand_delay_s = 3.0
    settings = _settings(url)
    assert settings.prometheus is not None
    source = PrometheusSource.from_settings(settings.prometheus, {"train": DEMAND})
    classes = [DemandClass("train")]

    with caplog.at_level(logging.WARNING, logger="agent.burst_history"):
        _profile(settings).at(NOW, lambda a, b: fetch_demand(source, classes, a, b, timedelta(minutes=5)), None)

    [logged] = [r.getMessage() for r in caplog.records if "demand history of class train not read" in r.getMessage()]
    assert "the read deadline (0.5 s) ended the read" in logged, logged
    assert (
        f"{SLOW}raise loop.tick_interval (the burst profile's demand history is read within 50% of a tick))" in logged
    ), logged
    assert "loop.read_deadline" not in logged


def test_the_burst_profiles_capacity_history_read_its_share_ended_names_loop_tick_interval(
    stub: tuple[str, Stub], caplog: pytest.LogCaptureFixture
) -> None:
    url, state = stub
    state.capacity_delay_s = 3.0
    settings = _settings(url)
    assert settings.prometheus is not None
    source = PrometheusSource.from_settings(settings.prometheus, {"train": DEMAND})
    capacity = PrometheusOnPremCapacity.from_settings(settings.prometheus, settings.pool_specs())
    classes = [DemandClass("train")]

    with caplog.at_level(logging.WARNING, logger="agent.burst_history"):
        _profile(settings).at(NOW, lambda a, b: fetch_demand(source, classes, a, b, timedelta(minutes=5)), capacity)

    logged = [r.getMessage() for r in caplog.records if "on-prem capacity of onprem-a not read" in r.getMessage()]
    assert len(logged) == 1, [r.getMessage() for r in caplog.records]
    assert "the read deadline (0.5 s) ended the read" in logged[0], logged[0]
    assert (
        f"{SLOW}raise loop.tick_interval (the burst profile's on-prem capacity history is read within 50% of a "
        "tick))" in logged[0]
    ), logged[0]
    assert "loop.read_deadline" not in logged[0]
    assert state.asked(CAPACITY["onprem-b"]) == 0  # the deadline passed: not queried

"""Failed units whose provider says why each failed: a stockout or an exhausted quota, as the adapter reads its
provider's words, backs their pool off as before; units failed for anything else (a slice in error after a host
failure, once its job was stopped) are removed with no back-off and no stockout alert."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from actuators.unit_groups import Unit, UnitPhase, group_state
from agent.executor import clear_failed_units
from agent.planning import PlannerMemory
from agent.planning.memory import BackoffReason
from models import ActionStatus, AlertKind
from tests.unit.test_failed_units import POOLS, T0, stuck_cluster

# A queued resource out of capacity, as the Cloud TPU adapter words it; a failure that names neither capacity nor
# quota (an example: the agent reads no more of it than that)
CAPACITY = "insufficient capacity: expired waiting for resources (no more capacity in the zone)"
HOST_FAILURE = "Instance 'gke-ml-v5e-1-host-0' was terminated: host error"


def test_units_failed_for_no_want_of_capacity_are_removed_without_a_back_off(caplog: pytest.LogCaptureFixture) -> None:
    cluster = stuck_cluster(ready=1, asked=2)
    (state,) = cluster.list_pools()
    state = replace(state, failed_messages=(HOST_FAILURE, ""))

    with caplog.at_level(logging.INFO, logger="agent.executor"):
        done = clear_failed_units({"spot": state}, cluster, POOLS, PlannerMemory(), T0)

    (after,) = cluster.list_pools()
    assert (after.target_units, after.failed_units) == (1, 0)
    assert [r.status for r in done.results] == [ActionStatus.DONE]
    assert (done.alerts, done.memory.backoff_until) == ((), {})
    (line,) = [r for r in caplog.records if r.name == "agent.executor"]
    assert line.levelno == logging.INFO
    assert line.getMessage() == (
        f"pool spot: deleting 2 failed units, none failed for want of capacity or quota ({HOST_FAILURE}; no message); "
        "no back-off"
    )


def test_one_unit_failed_for_capacity_backs_the_pool_off() -> None:
    """The adapter reads its provider's words for a stockout: a unit group with one failed for capacity says so, and
    the pool backs off."""
    cluster = stuck_cluster(ready=1, asked=2)
    (state,) = cluster.list_pools()
    failed = [Unit(0, "v5e-0", UnitPhase.FAILED, HOST_FAILURE), Unit(1, "v5e-1", UnitPhase.FAILED, CAPACITY)]
    read = group_state("spot", T0, failed)
    assert (read.failed_messages, read.failed_for_capacity) == ((HOST_FAILURE, CAPACITY), True)
    assert not group_state("spot", T0, failed[:1]).failed_for_capacity
    said = replace(state, failed_messages=read.failed_messages, failed_for_capacity=read.failed_for_capacity)

    done = clear_failed_units({"spot": said}, cluster, POOLS, PlannerMemory(), T0)

    assert cluster.list_pools()[0].failed_units == 0
    assert done.memory.backoff_reason == {"spot": BackoffReason.STOCKOUT}
    (alert,) = done.alerts
    assert (alert.kind, alert.details["failed_units"]) == (AlertKind.STOCKOUT, "2")


def test_the_executor_reads_no_provider_words_of_its_own() -> None:
    """Messages an actuator gives for every failed unit, none of them read as a stockout by that actuator, are not
    read again by the executor with one provider's words (an AWS group's messages with Google's), whatever they say."""
    cluster = stuck_cluster(ready=1, asked=2)
    (state,) = cluster.list_pools()

    done = clear_failed_units(
        {"spot": replace(state, failed_messages=(HOST_FAILURE, CAPACITY))}, cluster, POOLS, PlannerMemory(), T0
    )

    assert cluster.list_pools()[0].failed_units == 0
    assert (done.alerts, done.memory.backoff_until) == ((), {})


def test_units_the_actuator_says_nothing_of_are_a_stockout_as_before() -> None:
    cluster = stuck_cluster(ready=1, asked=2)
    (state,) = cluster.list_pools()

    done = clear_failed_units(
        {"spot": replace(state, failed_messages=(HOST_FAILURE,))}, cluster, POOLS, PlannerMemory(), T0
    )  # a message for one of the two only

    assert done.memory.in_backoff("spot", T0)
    assert [a.kind for a in done.alerts] == [AlertKind.STOCKOUT]

"""The count of a pool's units failing for a reason other than capacity outlives what ends the count of failing
changes, and lasts as the agent runs: an accepted change (the request asking for the units again) leaves it, the
stored planner memory and the keeper's merge keep it (a document from a release without it reads as no count), and
the ``actuator-failure`` condition its alert raised holds while it lasts. The memory is the one the executor's
removal of failed units (``clear_failed_units``) leaves on the unit tests' stuck cluster, whose units fail with a
message naming no capacity at two removals a lead time apart."""

from __future__ import annotations

import json
from dataclasses import replace

from agent.conditions import still_holding
from agent.executor import clear_failed_units
from agent.planning import PlannerMemory
from agent.state.codec import decode, encode
from agent.state.keeper import merge
from models import AlertKind, PoolState
from tests.unit.test_failed_units import LEAD, POOLS, T0, stuck_cluster

HOST_FAILURE = "Instance 'gke-ml-a100-host-0' was terminated: host error"  # names no capacity


def _failed_twice() -> tuple[PlannerMemory, PoolState]:
    """Units of the pool failed and were removed at T0, and again a lead time later: the second removal alerts."""
    memory = PlannerMemory()
    for at in (T0, T0 + LEAD):
        cluster = stuck_cluster(ready=1, asked=1)
        (state,) = cluster.list_pools()
        state = replace(state, observed_at=at, failed_messages=(HOST_FAILURE,))
        done = clear_failed_units({"spot": state}, cluster, POOLS, memory, at)
        memory = done.memory
    assert [a.kind for a in done.alerts] == [AlertKind.ACTUATOR_FAILURE]
    (after,) = cluster.list_pools()
    return memory, after


def test_an_accepted_change_leaves_the_count_of_failing_units() -> None:
    memory, _ = _failed_twice()

    accepted = memory.not_failing("spot")  # what an accepted resize does

    assert (accepted.units_failing_since, accepted.units_failed_last) == ({"spot": T0}, {"spot": T0 + LEAD})


def test_the_count_is_stored_and_merged_and_an_older_document_reads_as_none() -> None:
    memory, _ = _failed_twice()

    text = encode(memory, T0 + LEAD, "leadtime-0")
    assert decode(text) == memory
    older = {k: v for k, v in json.loads(text).items() if not k.startswith("units_")}
    assert decode(json.dumps(older)) == replace(memory, units_failing_since={}, units_failed_last={})
    assert merge(PlannerMemory(), memory, PlannerMemory()) == memory  # this replica counted, the store did not
    assert merge(PlannerMemory(), PlannerMemory(), memory) == memory  # another replica's count, read back
    assert memory.only(["spot"]) == memory and memory.only([]) == PlannerMemory()


def test_the_actuator_failure_holds_while_the_units_keep_failing() -> None:
    memory, state = _failed_twice()

    assert (AlertKind.ACTUATOR_FAILURE, "spot") in still_holding(memory, {"spot": state}, T0 + LEAD)
    ended = clear_failed_units({"spot": state}, stuck_cluster(1, 0), POOLS, memory, T0 + 3 * LEAD)
    assert ended.memory.units_failing_since == {}  # none failed, none in flight, a lead time after the back-off
    assert (AlertKind.ACTUATOR_FAILURE, "spot") not in still_holding(ended.memory, {"spot": state}, T0 + 3 * LEAD)

"""A step whose demand is unknown (a trace gap) pauses the simulated cluster's idle clocks; it used to clear them.
Unknown demand is still never read as idle (the gap's time is not counted), but a unit idle before a gap keeps the
idle time it had: cleared at every gap, a class reported every other step left no unit idle for the 10 minutes a
release waits, and units were almost never released (on the Helios day with one tenant at 10-minute spacing,
reactive cost 8.3% more than the oracle instead of about the same). A gap longer than ``forecast.max_staleness``
(a collector outage) still clears them. The simulator and the rehearsal (``run --replay``) serve the same cluster
the same way."""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import pandas as pd

from actuators import SimulatedCluster
from actuators.simulated import gap_lengths
from agent.daemon.replay import RehearsalCluster, ReplayedDemand
from agent.simulation import run_policy, select_window
from agent.sources.trace import read_trace
from config import settings_from_mapping
from models.clock import SimulatedClock
from tests.conftest import TraceWriter
from tests.scenario.test_simulate import two_class_config
from tests.unit.test_simulated_cluster import POOL, STEP, T0


def test_a_gap_pauses_a_units_idle_clock_and_does_not_start_it_again() -> None:
    clock = SimulatedClock(T0)
    cluster = SimulatedCluster([POOL], clock, {"gpu": 2})
    cluster.serve(T0, {"a": 3.0})  # one of the two 8-GPU units idle from T0
    clock.set(T0 + STEP)
    cluster.pause_idle(STEP, STEP)  # demand unknown for this step, a gap of one step
    clock.set(T0 + 2 * STEP)
    cluster.serve(clock.now(), {"a": 3.0})

    (state,) = cluster.list_pools()

    assert state.idle_units == 1
    assert state.idle_since == (T0 + STEP,)  # idle 5 minutes as observed: the gap's 5 not counted, T0's kept
    assert cluster.idle_nodes("gpu", STEP) and not cluster.idle_nodes("gpu", 2 * STEP)


def test_a_gap_longer_than_the_limit_clears_the_idle_clocks_from_its_first_step() -> None:
    """A collector outage: idleness seen before it says nothing of the units through it or after it. A gap longer
    than ``idle_pause_limit`` (the agent's ``forecast.max_staleness``, past which the agent too reads the demand as
    unknown) clears the clocks at once; they start again with the first step of known demand."""
    clock = SimulatedClock(T0)
    cluster = SimulatedCluster([POOL], clock, {"gpu": 2}, idle_pause_limit=timedelta(minutes=15))
    cluster.serve(T0, {"a": 3.0})
    cluster.pause_idle(STEP, 3 * STEP)  # a gap of 15 minutes: paused
    assert cluster.list_pools()[0].idle_since == (T0 + STEP,)
    cluster.pause_idle(STEP, 4 * STEP)  # a gap of 20 minutes: cleared
    assert cluster.list_pools()[0].idle_units == 0
    cluster.serve(T0 + 5 * STEP, {"a": 3.0})
    assert cluster.list_pools()[0].idle_since == (T0 + 5 * STEP,)


def test_gap_lengths_count_each_run_of_unknown_steps() -> None:
    known = [True, False, True, False, False, False, True, False]
    assert gap_lengths(known).tolist() == [0, 1, 0, 3, 3, 3, 0, 1]


def test_reactive_releases_units_when_a_class_is_reported_every_other_step(write_trace: TraceWriter) -> None:
    a = [40.0] * 320 + [4.0] * 80  # 10 units of 4 GPUs, then 1
    b = [0.0 if i < 288 or i % 2 == 0 else math.nan for i in range(400)]  # in the window, a value every 10 minutes
    trace = read_trace(write_trace({"a": a, "b": b}))
    settings = settings_from_mapping(two_class_config())
    window = select_window(trace, settings.demand_class_models(), trace.index[288].to_pydatetime(), None)

    run = run_policy(settings, trace, window, "reactive")

    paid = run.paid_units["gpu"]
    assert paid[31] == 10  # before the drop (step 320 of the trace, 32 of the window)
    # Released once idle for the 10 minutes reactive waits, counted on observed steps only: idle from step 32, the
    # gap at 33 not counted, 10 minutes at 35 (at 34 were b reported every step). Clearing the clocks at each gap
    # kept all 10 units to the end.
    assert paid[-1] == 1
    assert int(np.argmax(paid <= 1)) == 35


def test_after_an_outage_longer_than_max_staleness_units_wait_their_idle_time_again(write_trace: TraceWriter) -> None:
    a = [40.0] * 320 + [4.0] * 80
    a[321:333] = [math.nan] * 12  # an hour without any value, from the step after the drop
    b = [math.nan if math.isnan(v) else 0.0 for v in a]
    trace = read_trace(write_trace({"a": a, "b": b}))
    settings = settings_from_mapping(two_class_config())
    window = select_window(trace, settings.demand_class_models(), trace.index[288].to_pydatetime(), None)

    paid = run_policy(settings, trace, window, "reactive").paid_units["gpu"]

    # idle from step 32; the outage, longer than forecast.max_staleness (15 minutes), clears its clock; idle again
    # from 45, the outage's end: released at 47, not at 46 as the 5 minutes before the outage would have made it
    assert paid[44] == 10 and paid[46] == 10
    assert int(np.argmax(paid <= 1)) == 47


def test_a_rehearsal_pauses_the_idle_clocks_on_unknown_steps_as_the_simulator_does() -> None:
    clock = SimulatedClock(T0)
    cluster = SimulatedCluster([POOL], clock, {"gpu": 2})
    steps = pd.date_range(T0, periods=5, freq=STEP)
    values = np.array([[3.0], [math.nan], [3.0], [math.nan], [3.0]])
    demand = ReplayedDemand(steps, ("a",), values, STEP, timedelta(0))
    rehearsal = RehearsalCluster(cluster, clock, demand)

    clock.set(T0 + 4 * STEP)
    (state,) = rehearsal.list_pools()

    assert state.idle_units == 1
    assert state.idle_since == (T0 + 2 * STEP,)  # idle from T0, the two unknown steps not counted


def test_units_the_known_classes_take_through_a_gap_are_busy_not_idle() -> None:
    """At a step where one class has no value the others' demand is known: the units it takes are busy. Paused
    alike, a unit busy through the gap kept the idle time it had before it and was released early."""
    clock = SimulatedClock(T0)
    cluster = SimulatedCluster([POOL], clock, {"gpu": 2})
    cluster.serve(T0, {"a": 3.0, "b": 0.0})  # one of the two 8-GPU units idle from T0
    clock.set(T0 + STEP)
    cluster.pause_idle(STEP, STEP, {"a": 12.0})  # b unknown; a takes both units
    clock.set(T0 + 2 * STEP)
    cluster.serve(clock.now(), {"a": 3.0, "b": 0.0})

    (state,) = cluster.list_pools()

    assert state.idle_units == 1
    assert state.idle_since == (T0 + 2 * STEP,)  # busy at the gap's step: idle again only from the known step after


def test_reactive_keeps_units_busy_on_known_demand_through_a_partial_gap(write_trace: TraceWriter) -> None:
    a = [40.0] * 320 + [4.0] + [40.0] + [4.0] * 78  # idle a step at 320, all 10 units busy again at 321
    settings = settings_from_mapping(two_class_config())

    def paid(b: list[float]) -> np.ndarray:
        trace = read_trace(write_trace({"a": a, "b": b}))
        window = select_window(trace, settings.demand_class_models(), trace.index[288].to_pydatetime(), None)
        return np.asarray(run_policy(settings, trace, window, "reactive").paid_units["gpu"])

    reported = paid([0.0] * 400)
    b = [0.0] * 400
    b[321] = math.nan  # b unknown at the step a's demand takes every unit again
    gap = paid(b)

    # Released when idle for the 10 minutes reactive waits from step 34 (the window's), as when b is reported: the
    # step a takes every unit is busy whether b is known there or not (released at 35, a step early, before).
    assert int(np.argmax(reported <= 1)) == 36
    assert int(np.argmax(gap <= 1)) == int(np.argmax(reported <= 1))


def test_a_rehearsal_keeps_units_busy_on_known_demand_at_an_unknown_step() -> None:
    clock = SimulatedClock(T0)
    cluster = SimulatedCluster([POOL], clock, {"gpu": 2})
    steps = pd.date_range(T0, periods=3, freq=STEP)
    values = np.array([[3.0, 0.0], [12.0, math.nan], [3.0, 0.0]])
    demand = ReplayedDemand(steps, ("a", "b"), values, STEP, timedelta(0))
    rehearsal = RehearsalCluster(cluster, clock, demand)

    clock.set(T0 + 2 * STEP)
    (state,) = rehearsal.list_pools()

    assert state.idle_units == 1
    assert state.idle_since == (T0 + 2 * STEP,)  # both units busy at the step b has no value

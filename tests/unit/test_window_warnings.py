"""A simulated window says what it leaves out: a window running past the trace is cut to the trace with a warning
naming the window used, and a window mostly of gaps (steps some class has no value at, which count neither cost
nor service) gets a sentence naming the classes that make them."""

from __future__ import annotations

import logging
import math

import pytest

from agent.simulation import select_window
from agent.simulation.window import gap_warning, outage_note
from agent.sources.trace import read_trace
from models import DemandClass, TraceError
from tests.conftest import TraceWriter

CLASSES = [DemandClass("a"), DemandClass("b")]


def test_a_class_that_stops_early_is_named_with_its_gap_steps(write_trace: TraceWriter) -> None:
    trace = read_trace(write_trace({"a": [1.0] * 100, "b": [2.0] * 40 + [math.nan] * 60}))
    window = select_window(trace, CLASSES, trace.index[20].to_pydatetime(), None)

    message = gap_warning(window)

    assert window.missing_by_class() == {"b": 60}
    assert message is not None
    assert message.startswith("60 of the window's 80 steps (75%) are gaps")
    assert f"'b' has no value at 60 step(s) (its values end at {trace.index[40].isoformat()})" in message
    assert "'a'" not in message


def test_a_series_at_twice_the_step_of_the_others_is_named(write_trace: TraceWriter) -> None:
    five = write_trace({"a": [1.0] * 96}, step="5min", name="a.csv")
    ten = write_trace({"b": [2.0] * 48}, step="10min", name="b.csv")
    mixed = five.with_name("mixed.csv")  # a at 5 minutes, b at 10, over the same 8 hours
    mixed.write_text("\n".join(five.read_text().splitlines() + ten.read_text().splitlines()[1:]) + "\n")
    trace = read_trace(mixed)
    window = select_window(trace, CLASSES, trace.index[0].to_pydatetime(), None)

    message = gap_warning(window)

    assert message is not None and "'b' has no value at 48 step(s)" in message
    assert "it has a value every 10 min, the trace's step is 5 min" in message


def test_a_few_gaps_stay_quiet(write_trace: TraceWriter) -> None:
    values = [1.0] * 100
    values[50] = math.nan  # 1 step in 100: below the 5% share
    trace = read_trace(write_trace({"a": values, "b": [2.0] * 100}))
    window = select_window(trace, CLASSES, trace.index[0].to_pydatetime(), None)
    assert int((~window.observed).sum()) == 1
    assert gap_warning(window) is None


def test_a_window_past_the_end_of_the_trace_is_cut_with_a_warning(
    write_trace: TraceWriter, caplog: pytest.LogCaptureFixture
) -> None:
    trace = read_trace(write_trace({"a": [1.0] * 100, "b": [2.0] * 100}))
    start, last = trace.index[20], trace.index[-1] + trace.step
    with caplog.at_level(logging.WARNING, logger="agent.simulation.window"):
        window = select_window(trace, CLASSES, start.to_pydatetime(), (last + trace.step * 50).to_pydatetime())

    assert len(window.index) == 80
    assert f"runs outside the trace ({trace.index[0].isoformat()} .. {last.isoformat()})" in caplog.text
    assert f"simulating {start.isoformat()} .. {last.isoformat()} only" in caplog.text


def test_a_window_starting_before_the_trace_is_cut_with_a_warning(
    write_trace: TraceWriter, caplog: pytest.LogCaptureFixture
) -> None:
    trace = read_trace(write_trace({"a": [1.0] * 100, "b": [2.0] * 100}))
    first, end = trace.index[0], trace.index[50]
    with caplog.at_level(logging.WARNING, logger="agent.simulation.window"):
        window = select_window(trace, CLASSES, (first - trace.step * 10).to_pydatetime(), end.to_pydatetime())

    assert len(window.index) == 50
    assert f"simulating {first.isoformat()} .. {end.isoformat()} only" in caplog.text


def test_a_window_inside_the_trace_is_not_warned_about(
    write_trace: TraceWriter, caplog: pytest.LogCaptureFixture
) -> None:
    trace = read_trace(write_trace({"a": [1.0] * 100, "b": [2.0] * 100}))
    with caplog.at_level(logging.WARNING, logger="agent.simulation.window"):
        select_window(trace, CLASSES, trace.index[20].to_pydatetime(), None)
    assert caplog.records == []


def test_a_window_wholly_outside_the_trace_is_still_refused(write_trace: TraceWriter) -> None:
    trace = read_trace(write_trace({"a": [1.0] * 100, "b": [2.0] * 100}))
    after = trace.index[-1] + trace.step
    with pytest.raises(TraceError, match="is outside the trace"):
        select_window(trace, CLASSES, after.to_pydatetime(), (after + trace.step * 10).to_pydatetime())


def test_a_collector_outage_is_warned_about_with_the_share_counted(write_trace: TraceWriter) -> None:
    """Steps where no class has a value are the trace's own (the bundled Helios trace loses a day): no choice of
    classes or window avoids them, so the warning does not tell the user to choose another window; but every figure
    covers only the rest of the window, and above 5% of it that is said as for any gap."""
    a, b = [1.0] * 100, [2.0] * 100
    a[40:64] = b[40:64] = [math.nan] * 24  # two hours without any value
    trace = read_trace(write_trace({"a": a, "b": b}))
    window = select_window(trace, CLASSES, trace.index[0].to_pydatetime(), None)
    assert gap_warning(window) == (
        "24 of the window's 100 steps (24%) are gaps, which count neither cost nor service (a step is a gap when "
        "any class has no value): every cost and service figure covers the other 76 steps, 76% of the window; no "
        "class has a value at 24 steps (2 h from 2024-01-01T03:20:00+00:00; the trace's collector was down)"
    )
    assert outage_note(window) == (
        "24 of the window's 100 steps (2 h from 2024-01-01T03:20:00+00:00) have no value for any class (the "
        "trace's collector was down): they count neither cost nor service"
    )
    b[80:100] = [math.nan] * 20  # and one class stops early: named with its own gaps, and advised on
    trace = read_trace(write_trace({"a": a, "b": b}, name="late.csv"))
    window = select_window(trace, CLASSES, trace.index[0].to_pydatetime(), None)
    message = gap_warning(window)
    assert message is not None and message.startswith("44 of the window's 100 steps (44%) are gaps")
    assert "some classes alone leave 20 of them empty: 'b' has no value at 20 step(s)" in message
    assert "no class has a value at 24 steps (2 h from" in message and message.endswith("out of the configuration")


def test_each_outage_is_listed_with_its_start_and_length(write_trace: TraceWriter) -> None:
    """Two outages are two: a day's and a 2-hour one were said as one total ('no class has a value at 312 (26 h')
    with no date. Each is listed with its first step and length, the first three, then how many more."""
    a, b = [1.0] * 600, [2.0] * 600
    for begin, length in ((20, 288), (340, 24), (400, 1), (450, 2), (500, 3)):
        a[begin : begin + length] = b[begin : begin + length] = [math.nan] * length
    trace = read_trace(write_trace({"a": a, "b": b}))
    window = select_window(trace, CLASSES, trace.index[0].to_pydatetime(), None)

    message = gap_warning(window)

    assert message is not None and message.endswith(
        "no class has a value at 318 steps (24 h from 2024-01-01T01:40:00+00:00, 2 h from 2024-01-02T04:20:00+00:00, "
        "5 min from 2024-01-02T09:20:00+00:00 and 2 more; the trace's collector was down)"
    )
    two = select_window(trace, CLASSES, trace.index[0].to_pydatetime(), trace.index[380].to_pydatetime())
    assert outage_note(two) == (
        "312 of the window's 380 steps (24 h from 2024-01-01T01:40:00+00:00, 2 h from 2024-01-02T04:20:00+00:00) "
        "have no value for any class (the trace's collector was down): they count neither cost nor service"
    )

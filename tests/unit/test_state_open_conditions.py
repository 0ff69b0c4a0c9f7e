"""The open alert conditions in the planner memory's document: they survive it exactly, a document of the previous
release (without them) is read as before with none open, an entry this release cannot read is left out without
losing the rest of the memory, a newer release's document is still refused, and the keeper's merge keeps the
leader's view of a condition both sides changed."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from agent.planning import PlannerMemory
from agent.planning.memory import OpenCondition
from agent.state.codec import decode, encode
from agent.state.keeper import merge
from models import AlertKind, Severity, StateDocumentTooNew

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
STOCKOUT = (AlertKind.STOCKOUT, "a100")
MISSING = (AlertKind.MISSING_DATA, "demand class gpu-a100")
OPEN = {
    STOCKOUT: OpenCondition(
        T0, T0 + timedelta(minutes=4), Severity.WARNING, "out of capacity", {Severity.WARNING: T0}, held=True
    ),
    MISSING: OpenCondition(
        T0 - timedelta(minutes=30),
        T0,
        Severity.CRITICAL,
        "no sample for 20m",
        {Severity.WARNING: T0 - timedelta(minutes=30), Severity.CRITICAL: T0 - timedelta(minutes=10)},
        gone=T0 + timedelta(minutes=1),
        held_by=T0 - timedelta(minutes=40),
    ),
}
MEMORY = PlannerMemory(
    blocked={"tpu-vm": "403 Forbidden"},
    open_conditions=OPEN,
    conditions_ended={(AlertKind.POOL_UNREADABLE, "v5e"): T0 - timedelta(minutes=20)},
)


def test_open_conditions_survive_the_document_exactly() -> None:
    assert decode(encode(MEMORY, T0, "leadtime-0")) == MEMORY


def test_a_document_of_the_previous_release_is_read_with_no_condition_open() -> None:
    document = json.loads(encode(MEMORY, T0, "leadtime-0"))
    del document["open_conditions"], document["conditions_ended"]
    restored = decode(json.dumps(document))
    assert restored == PlannerMemory(blocked={"tpu-vm": "403 Forbidden"})


@pytest.mark.parametrize(
    "spoil",
    [
        lambda e: e.update(kind="a-kind-of-a-later-release"),
        lambda e: e.update(severity="catastrophic"),
        lambda e: e.update(since="yesterday"),
        lambda e: e.pop("seen"),
    ],
    ids=["unknown-kind", "unknown-severity", "bad-time", "no-seen"],
)
def test_an_entry_this_release_cannot_read_is_left_out_and_the_rest_kept(
    spoil: Callable[[dict[str, object]], object],
) -> None:
    document = json.loads(encode(MEMORY, T0, "leadtime-0"))
    (stockout,) = [e for e in document["open_conditions"] if e["kind"] == "stockout"]
    spoil(stockout)
    restored = decode(json.dumps(document))
    assert restored.open_conditions == {MISSING: OPEN[MISSING]}
    assert restored.blocked == MEMORY.blocked
    assert restored.conditions_ended == MEMORY.conditions_ended


def test_a_document_of_a_newer_release_is_still_refused() -> None:
    document = json.loads(encode(MEMORY, T0, "leadtime-0"))
    document["version"] = 2
    with pytest.raises(StateDocumentTooNew):
        decode(json.dumps(document))


def test_the_merge_takes_each_side_change_and_the_leaders_view_where_both_changed() -> None:
    base = PlannerMemory(open_conditions={STOCKOUT: OPEN[STOCKOUT], MISSING: OPEN[MISSING]})
    later = OpenCondition(T0, T0 + timedelta(minutes=9), Severity.WARNING, "out of capacity", {Severity.WARNING: T0})
    ours = PlannerMemory(open_conditions={STOCKOUT: later, MISSING: OPEN[MISSING]})
    # the store: an operator removed the missing-data condition and someone else changed the stockout
    theirs = PlannerMemory(open_conditions={STOCKOUT: OPEN[STOCKOUT]})
    assert merge(base, ours, theirs).open_conditions == {STOCKOUT: later}


def test_a_condition_this_release_raised_is_saved_without_a_told_record() -> None:
    raised = OpenCondition(T0, T0 + timedelta(minutes=4), Severity.WARNING, "no sample")
    memory = PlannerMemory(open_conditions={MISSING: raised})
    (entry,) = json.loads(encode(memory, T0, "leadtime-a"))["open_conditions"]
    assert "told" not in entry
    assert decode(encode(memory, T0, "leadtime-a")).open_conditions == {MISSING: raised}

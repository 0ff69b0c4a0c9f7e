"""The scale-ups the leader waits for, kept in the planner memory's document: written and read back exactly; absent
from a document of the release before (None: not kept, the new leader falls back to the units in flight), which an
older release of the same version reads by ignoring the key; an entry that cannot be read is left out, never the
document; and the keeper hands a new leader exactly the stored ones at its first load."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from agent.alerts import PendingScaleUp
from agent.planning import PlannerMemory
from agent.state import InMemoryStateStore, MemoryKeeper
from agent.state.codec import decode, encode

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
ASKED = PendingScaleUp("a100-spot", T0, 0, 3, judged_at=T0 + timedelta(minutes=5))
FOUND = PendingScaleUp("v5e", T0 + timedelta(minutes=2), 1, 2, inherited=True, judged_at=T0 + timedelta(minutes=2))
MEMORY = PlannerMemory(scale_ups_waited=(ASKED, FOUND)).changed("a100-spot", T0, +1)


def test_the_scale_ups_waited_for_survive_the_document_exactly() -> None:
    assert decode(encode(MEMORY, T0, "leadtime-0")) == MEMORY
    none_waited = PlannerMemory(scale_ups_waited=())
    assert decode(encode(none_waited, T0, "leadtime-0")) == none_waited
    document = json.loads(encode(MEMORY, T0, "leadtime-0"))
    assert document["version"] == 1  # a key an older release of version 1 ignores: no new version
    assert document["scale_ups_waited"] == [
        {
            "pool": "a100-spot",
            "asked_at": "2026-03-02T09:00:00+00:00",
            "from_units": 0,
            "to_units": 3,
            "judged_at": "2026-03-02T09:05:00+00:00",
        },
        {
            "pool": "v5e",
            "asked_at": "2026-03-02T09:02:00+00:00",
            "from_units": 1,
            "to_units": 2,
            "found_in_flight": True,
            "judged_at": "2026-03-02T09:02:00+00:00",
        },
    ]


def test_a_document_of_the_release_before_keeps_no_scale_ups() -> None:
    document = json.loads(encode(MEMORY, T0, "leadtime-0"))
    del document["scale_ups_waited"]  # what the release before writes: every other key
    memory = decode(json.dumps(document))
    assert memory.scale_ups_waited is None and memory.last_change == MEMORY.last_change
    assert "scale_ups_waited" not in json.loads(encode(memory, T0, "leadtime-0"))  # and it stays unknown


@pytest.mark.parametrize(
    "entry",
    [
        {"pool": "a100-spot", "asked_at": "2026-03-02T09:00:00", "from_units": 0, "to_units": 3},  # no time zone
        {"pool": "a100-spot", "asked_at": "2026-03-02T09:00:00+00:00", "from_units": 3, "to_units": 3},
        {"pool": "a100-spot", "asked_at": "2026-03-02T09:00:00+00:00", "from_units": -1, "to_units": 3},
        {"pool": "a100-spot", "asked_at": "2026-03-02T09:00:00+00:00", "from_units": 0, "to_units": 2.5},
        {"pool": "a100-spot", "asked_at": "2026-03-02T09:00:00+00:00", "from_units": False, "to_units": 3},
        {"pool": "a100-spot", "from_units": 0, "to_units": 3},
        "a100-spot",
    ],
)
def test_an_entry_that_cannot_be_read_is_left_out_not_the_document(entry: object) -> None:
    document = json.loads(encode(MEMORY, T0, "leadtime-0"))
    document["scale_ups_waited"].insert(0, entry)
    assert decode(json.dumps(document)).scale_ups_waited == (ASKED, FOUND)


def test_a_new_leader_takes_exactly_the_stored_scale_ups_at_its_first_load() -> None:
    store = InMemoryStateStore("leadtime-1")
    store.save(MEMORY, T0)
    keeper = MemoryKeeper(store)
    earlier_term = PlannerMemory(scale_ups_waited=(replace(ASKED, requested_at=T0 - timedelta(hours=1)),))
    merged, error = keeper.before_tick(earlier_term)  # what this replica held before it led is not its to wait for
    assert error is None and merged.scale_ups_waited == (ASKED, FOUND)
    later = replace(merged, scale_ups_waited=(ASKED,))  # FOUND's units came; the store still holds both
    assert keeper.before_tick(later)[0].scale_ups_waited == (ASKED,)  # from then on the leader's own


def test_a_new_leader_with_nothing_stored_keeps_no_scale_ups() -> None:
    keeper = MemoryKeeper(InMemoryStateStore("leadtime-1"))
    merged, _ = keeper.before_tick(PlannerMemory(scale_ups_waited=(ASKED,)))
    assert merged.scale_ups_waited is None  # it falls back to the units in flight


def test_a_pool_no_longer_configured_loses_its_saved_scale_ups() -> None:
    assert MEMORY.only(["v5e", "a100-spot"]) is MEMORY
    assert MEMORY.only(["v5e"]).scale_ups_waited == (FOUND,)

"""The planner memory's document (versioned JSON) and the keeper's rules: load when leadership starts, save only
what changed, never save before a load succeeded, retry a failed save on the next tick."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from agent.planning import PlannerMemory
from agent.state import InMemoryStateStore, MemoryKeeper, StateUnavailable
from agent.state.codec import decode, encode
from models import StateDocumentTooNew, StateDocumentUnreadable

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
MEMORY = (
    PlannerMemory()
    .changed("a100", T0, +1)
    .changed("v5e", T0 - timedelta(minutes=3), -1)
    .back_off("v5e", T0 + timedelta(minutes=10))
    .block("tpu-vm", "403 Forbidden: the service account lacks tpu.queuedResources.create")
)


def test_a_memory_survives_its_document_exactly() -> None:
    assert decode(encode(MEMORY, T0, "leadtime-0")) == MEMORY
    assert decode(encode(PlannerMemory(), T0, "leadtime-0")) == PlannerMemory()


def test_the_document_is_versioned_and_says_who_saved_it_when() -> None:
    document = json.loads(encode(MEMORY, T0, "leadtime-0"))
    assert (document["version"], document["saved_by"], document["saved_at"]) == (1, "leadtime-0", T0.isoformat())
    assert document["backoff_until"] == {"v5e": "2026-03-02T09:10:00+00:00"}


def test_times_are_stored_in_utc_and_read_back_as_the_same_instant() -> None:
    local = datetime(2026, 3, 2, 10, 0, tzinfo=timezone(timedelta(hours=1)))
    memory = PlannerMemory().back_off("a100", local)
    restored = decode(encode(memory, T0, "x"))
    assert restored.backoff_until["a100"] == local
    assert restored.backoff_until["a100"].tzinfo == UTC


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("not json", "not JSON"),
        ("[1]", "not a JSON object"),
        ('{"version": 0}', "version 0"),
        ('{"last_change": {}}', "version None"),
        ('{"version": 1, "last_change": {"a": {"at": "2026-03-02T09:00:00+00:00", "direction": 0}}}', "direction"),
        ('{"version": 1, "backoff_until": {"a": "2026-03-02T09:00:00"}}', "no time zone"),
        ('{"version": 1, "backoff_until": {"a": 5}}', "not a string"),
        ('{"version": 1, "last_change": {"a": {"direction": 1}}}', "KeyError"),
    ],
)
def test_an_unreadable_document_says_why(text: str, why: str) -> None:
    with pytest.raises(StateDocumentUnreadable, match=why):
        decode(text)


class FlakyStore(InMemoryStateStore):
    """The in-memory store, with the next loads or saves failing like an unreachable API."""

    def __init__(self) -> None:
        super().__init__("leadtime-0")
        self.failing_loads = 0
        self.failing_saves = 0

    def load(self) -> PlannerMemory | None:
        if self.failing_loads:
            self.failing_loads -= 1
            raise StateUnavailable("Kubernetes API unreachable")
        return super().load()

    def save(self, memory: PlannerMemory, now: datetime) -> None:
        if self.failing_saves:
            self.failing_saves -= 1
            raise StateUnavailable("Kubernetes API answered 500")
        super().save(memory, now)


def test_a_new_leader_plans_with_what_was_saved_and_saves_only_changes() -> None:
    store = FlakyStore()
    store.save(MEMORY, T0)
    keeper = MemoryKeeper(store)
    memory, error = keeper.before_tick(PlannerMemory())
    assert (memory, error) == (MEMORY, None)
    assert keeper.after_tick(memory, T0) is None
    assert store.saves == 1  # unchanged: not written again
    changed = memory.changed("a100", T0 + timedelta(minutes=1), -1)
    assert keeper.after_tick(changed, T0 + timedelta(minutes=1)) is None
    assert (store.saves, store.load()) == (2, changed)


def test_nothing_is_saved_before_a_load_succeeded_and_the_load_is_retried() -> None:
    store = FlakyStore()
    store.save(MEMORY, T0)
    store.failing_loads = 1
    keeper = MemoryKeeper(store)
    own = PlannerMemory().changed("a100", T0, +1)
    memory, error = keeper.before_tick(own)
    assert memory == own
    assert isinstance(error, StateUnavailable)
    assert keeper.after_tick(own, T0) is None
    assert store.load() == MEMORY  # the predecessor's back-offs and blocks were not overwritten
    memory, error = keeper.before_tick(own)
    assert (memory, error) == (MEMORY, None)


def test_a_failed_save_is_retried_on_the_next_tick_even_without_a_change() -> None:
    store = FlakyStore()
    keeper = MemoryKeeper(store)
    keeper.before_tick(PlannerMemory())
    store.failing_saves = 1
    error = keeper.after_tick(MEMORY, T0)
    assert isinstance(error, StateUnavailable)
    assert store.load() is None
    assert keeper.after_tick(MEMORY, T0 + timedelta(minutes=1)) is None
    assert store.load() == MEMORY
    assert keeper.failures == 1


def test_the_store_is_read_every_tick_and_again_on_resuming() -> None:
    store = FlakyStore()
    keeper = MemoryKeeper(store)
    keeper.before_tick(PlannerMemory())
    store.save(MEMORY, T0)  # written elsewhere (an operator) while this replica leads
    memory = keeper.before_tick(PlannerMemory())[0]
    assert memory == MEMORY
    keeper.resume()
    store.save(PlannerMemory(), T0)  # another leader's, saved while this replica did not lead
    assert keeper.before_tick(memory)[0] == PlannerMemory()


def test_an_unreadable_saved_document_counts_as_nothing_saved() -> None:
    store = InMemoryStateStore()
    store.document = '{"version": 1, "backoff_until": {"a": 5}}'
    assert store.load() is None


def test_a_document_of_a_newer_release_is_neither_read_nor_written_over() -> None:
    store = InMemoryStateStore()
    newer = '{"version": 2, "blocked": {"tpu-vm": "403 Forbidden"}, "shards": []}'
    store.document = newer
    with pytest.raises(StateDocumentTooNew, match="version 2, written by a newer release"):
        store.load()
    keeper = MemoryKeeper(store)
    memory, error = keeper.before_tick(PlannerMemory())
    assert isinstance(error, StateUnavailable)
    assert keeper.after_tick(memory.changed("a100", T0, +1), T0) is None
    assert store.document == newer

"""Resizing a group of whole units one call per unit, when the provider refuses one call for a while."""

from __future__ import annotations

import pytest

from actuators.unit_groups import GroupChange, Unit, UnitPhase, resize_group
from models import TransientActuatorError

BUSY = "HTTP 429: Too many operations"


class Provider:
    """Records the calls; refuses creates (transiently) once ``room`` of them have gone through."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.created: list[str] = []
        self.deleted: list[str] = []

    def create(self, name: str) -> None:
        if len(self.created) >= self.room:
            raise TransientActuatorError("p", BUSY)
        self.created.append(name)

    def delete(self, name: str) -> None:
        self.deleted.append(name)


def _resize(units: list[Unit], to_units: int, provider: Provider) -> tuple[int, GroupChange]:
    return resize_group("p", "g", units, to_units, provider.create, provider.delete, "a unit of group")


def test_units_asked_for_before_a_refusal_are_reported_with_the_rest_left_for_later() -> None:
    provider = Provider(room=2)
    target, change = _resize([Unit(0, "g-0", UnitPhase.READY)], 5, provider)
    assert target == 1
    assert provider.created == ["g-1", "g-2"]
    assert change.create == ("g-1", "g-2") and not change.is_empty
    assert BUSY in change.deferred
    assert change.describe() == f"create g-1, g-2; the rest on a later resize ({change.deferred})"


def test_a_refusal_before_anything_changed_is_raised() -> None:
    with pytest.raises(TransientActuatorError, match="Too many operations"):
        _resize([], 2, Provider(room=0))


def test_a_failed_unit_deleted_before_a_refused_create_is_a_change_carried_out() -> None:
    provider = Provider(room=0)
    _, change = _resize([Unit(0, "g-0", UnitPhase.FAILED, "preempted")], 1, provider)
    assert provider.deleted == ["g-0"]
    assert change == GroupChange((), ("g-0",), deferred=change.deferred)
    assert BUSY in change.deferred
    assert change.describe().startswith("delete g-0; the rest on a later resize")


def test_a_change_that_went_through_whole_leaves_nothing_for_later() -> None:
    provider = Provider(room=5)
    _, change = _resize([], 2, provider)
    assert change == GroupChange(("g-0", "g-1"), ())
    assert change.describe() == "create g-0, g-1"

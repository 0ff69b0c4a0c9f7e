"""Which scale-up reservations a deployment's commit takes over (``StandingHolder.holds`` with ``covered``): those of
its own pools to no more units than the commit reserves for them, never another install's of the same Lease name,
and never one its commit does not cover (the units may still be coming)."""

from __future__ import annotations

import pytest

from agent.ledger.reservations import StandingHolder

WEST = StandingHolder("leadtime", ("west", "west-spot"), covered=(("west", 12), ("west-spot", 0)))


@pytest.mark.parametrize(
    ("holder", "taken_over"),
    [
        ("leadtime (scale-up of west to 12)", True),  # its pool, reserved at 12 by the commit
        ("leadtime (scale-up of west to 9)", True),
        ("leadtime (scale-up of west to 13)", False),  # units the commit does not reserve: may still be coming
        ("leadtime (scale-up of west-spot to 2)", False),
        ("leadtime (scale-up of east to 4)", False),  # another install named leadtime: its pools are not ours
        ("other (scale-up of west to 4)", False),
        ("leadtime", False),  # an earlier release's scale-up: whose, nobody can tell
        ("leadtime (scale-up of west to twelve)", False),
        ("leadtime (units held of west)", True),  # its standing reservations, as before
    ],
)
def test_a_commit_takes_over_the_scale_ups_it_covers(holder: str, taken_over: bool) -> None:
    assert WEST.holds(holder) is taken_over


def test_without_covered_units_no_scale_up_is_held() -> None:
    plain = StandingHolder("leadtime", ("west",))
    assert not plain.holds(plain.scale_up_label("west", 1))
    assert plain.scale_up_label("west", 12) == "leadtime (scale-up of west to 12)"

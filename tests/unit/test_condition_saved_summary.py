"""What of a held condition's summary is saved in the planner memory: its figures move at every tick and are not
saved (a stalled scale-up's wait, a projection's USD), but a summary that says something else is, since a new leader
tells the saved summary again (a stockout found to be a quota used up must be retold as a quota)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.conditions import ConditionTracker
from agent.planning import PlannerMemory
from agent.tick_alerts import conclude
from models import AlertEvent, AlertKind, Severity

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
KEY = (AlertKind.STOCKOUT, "gpu")
STOCKOUT = "No capacity for gpu; backing off 10m and using the next pool"
QUOTA = "Quota used up for gpu; backing off 10m and using the next pool. A quota is used up: request a quota increase"


def _held(tracker: ConditionTracker, memory: PlannerMemory, at: datetime, summary: str) -> PlannerMemory:
    event = AlertEvent(AlertKind.STOCKOUT, Severity.WARNING, at, "gpu", summary)
    return conclude(tracker, memory, at, [event], holding={KEY}).memory


def test_a_stockout_found_to_be_a_quota_is_saved_and_retold_as_a_quota() -> None:
    first = ConditionTracker(timedelta(minutes=5), timedelta(hours=1))
    memory = _held(first, PlannerMemory(), T0, STOCKOUT)
    later = T0 + timedelta(minutes=10)
    memory = _held(first, memory, later, QUOTA)
    assert memory.open_conditions[KEY].summary == QUOTA
    second = ConditionTracker(timedelta(minutes=5), timedelta(hours=1))
    second.adopt(memory.open_conditions, memory.conditions_ended, later + timedelta(minutes=3))
    told = second.update(later + timedelta(minutes=4), [], {KEY})
    assert [e.summary.startswith("Quota used up for gpu") for e in told] == [True]


def test_only_the_figures_of_a_summary_moving_are_not_saved() -> None:
    tracker = ConditionTracker(timedelta(minutes=5), timedelta(hours=1))
    memory = _held(tracker, PlannerMemory(), T0, "Scale-up of gpu still not ready after 20m")
    saved = memory
    memory = _held(tracker, memory, T0 + timedelta(minutes=5), "Scale-up of gpu still not ready after 1h25m")
    assert memory is saved

"""A budget's clock hour holds ``now`` and lasts an hour across every time zone's offset changes.

Australia/Lord_Howe moves its clocks by half an hour: on its fall-back night (2026-04-05 02:00 local, UTC+11, back
to 01:30, UTC+10:30) the local clock hour was taken by setting the minutes of the local time to zero, which at
15:00 UTC (01:30 +10:30) gave 01:00 +11, the hour [14:00, 15:00) UTC: ``now`` outside its own hour, with nothing
of it remaining, for the half hour until 15:30. Every zone's offset changes in a year are found with zoneinfo (a
daily scan, then a bisection to the second) and each is checked every 5 minutes from two hours before to two hours
after.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, available_timezones

from agent.ledger.accrual import GRID
from agent.planning.budget import Budget, Period

HOUR = timedelta(hours=1)
YEAR = 2026
LORD_HOWE = ZoneInfo("Australia/Lord_Howe")


def _offset(tz: ZoneInfo, at: datetime) -> timedelta:
    return at.astimezone(tz).utcoffset() or timedelta(0)


def transitions(tz: ZoneInfo) -> Iterator[datetime]:
    """The instants in ``YEAR`` at which ``tz``'s UTC offset changes (the first second of the new offset)."""
    day = datetime(YEAR, 1, 1, tzinfo=UTC)
    before = _offset(tz, day)
    while day.year == YEAR:
        after = day + timedelta(days=1)
        if _offset(tz, after) != before:
            lo, hi = day, after  # the offset of lo is the old one, of hi the new one
            while hi - lo > timedelta(seconds=1):
                mid = lo + (hi - lo) / 2
                lo, hi = (mid, hi) if _offset(tz, mid) == before else (lo, mid)
            yield hi
            before = _offset(tz, after)
        day = after


def test_lord_howe_fall_back_gives_the_hour_holding_now() -> None:
    budget = Budget("b", frozenset({"p"}), hourly_cap_usd=100.0, tz=LORD_HOWE)
    now = datetime(YEAR, 4, 4, 15, 0, tzinfo=UTC)  # 01:30 +10:30, the half hour repeated
    assert now.astimezone(LORD_HOWE).utcoffset() == timedelta(hours=10, minutes=30)
    hour = budget.hour(now)
    assert hour == Period(datetime(YEAR, 4, 4, 14, 30, tzinfo=UTC), datetime(YEAR, 4, 4, 15, 30, tzinfo=UTC))
    assert hour.remaining(now) == timedelta(minutes=30)
    # just before the shift, 01:55 +11: the hour 01:00 +11
    before = budget.hour(now - timedelta(minutes=5))
    assert before == Period(datetime(YEAR, 4, 4, 14, tzinfo=UTC), datetime(YEAR, 4, 4, 15, tzinfo=UTC))


def test_every_zone_s_hour_holds_now_and_lasts_an_hour_across_its_offset_changes() -> None:
    checked: dict[str, int] = {}
    for name in sorted(available_timezones()):
        tz = ZoneInfo(name)
        budget = Budget("b", frozenset({"p"}), hourly_cap_usd=1.0, tz=tz)
        for shift in transitions(tz):
            # every 5 minutes around the shift, and the seconds on either side of it
            moments = [shift - 2 * HOUR + i * timedelta(minutes=5) for i in range(49)]
            moments += [shift - timedelta(seconds=1), shift, shift + timedelta(seconds=1)]
            for now in moments:
                hour = budget.hour(now)
                where = f"{name} at {now.isoformat()} ({now.astimezone(tz).isoformat()}): {hour}"
                assert hour.start <= now < hour.end, where
                assert hour.end - hour.start == HOUR, where
                # the hour starts on a full hour of the local clock at now's offset
                assert (hour.start + _offset(tz, now)).replace(tzinfo=None).minute == 0, where
                # on the grid the ledger splits entries on (every offset in use is a multiple of 15 minutes), so
                # that an hour's spend is a sum of whole entries
                assert (hour.start - datetime(1970, 1, 1, tzinfo=UTC)) % GRID == timedelta(0), where
            checked[name] = checked.get(name, 0) + 1
    # the scan found the shifts: Lord Howe's two half-hour ones, and those of the zones that keep summer time
    assert checked["Australia/Lord_Howe"] == 2
    assert checked["Europe/London"] == 2 and checked["America/Los_Angeles"] == 2
    assert len(checked) > 100

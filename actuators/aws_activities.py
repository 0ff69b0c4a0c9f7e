"""What an Auto Scaling group's scaling activities say: whether its latest launch failed and why, recently enough to
be current, in all its zones or only some (``CAPACITY_MEMORY``, ``read_launches``), and which of its instances still
terminating were terminated with the desired capacity lowered, so get no replacement. ``actuators.aws_groups`` says
how the adapters use it, with the sources.

The activities are read page by page (``read_activities``). DescribeScalingActivities lists those still in progress
first, then the others by start time, latest first, at most 100 a page (``MaxRecords``: its default and its maximum),
and a ``NextToken`` while more remain (Auto Scaling API Reference). Each termination a lifecycle hook holds is an
activity in progress, so after the release of many nodes the failed launch that followed, and some of the agent's own
terminations (which only their activity tells an agent started afresh), are past the first page. Pages are read until
every activity in progress and every one that started within ``CAPACITY_MEMORY`` is read (older ones can no longer
be current), but no more than one page for each 100 of the group's instances and desired capacity, plus one: each
instance launching or terminating has one activity in progress, so that many pages hold them all and a page of the
latest finished ones; a tick reads no more of a group whose activities keep coming faster than that.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from actuators.aws_errors import capacity_failure, zone_of

PAGE = 100  # DescribeScalingActivities' MaxRecords: its default and its maximum
# How long a failed launch is current; one that failed for capacity this recently refuses the next scale-up without
# asking AWS again.
CAPACITY_MEMORY = timedelta(minutes=10)
FAILED = ("Failed", "Cancelled")  # Activity.StatusCode values of a launch that did not happen
FINISHED = ("Successful", *FAILED)  # Activity.StatusCode values of an activity no longer in progress
# A termination activity ("Terminating EC2 instance: i-...") whose Cause says the group was shrunk with it ("... was
# taken out of service in response to a user request, shrinking the capacity from 10 to 9."): no replacement follows.
_TERMINATING = "Terminating EC2 instance: "
_SHRINKING = "shrinking the capacity"


@dataclass(frozen=True)
class LaunchRecord:
    """What a group's scaling activities say (``read_launches``)."""

    failure: str
    failure_at: datetime | None
    latest: str
    changed_at: datetime | None
    for_capacity: bool = True
    zone_failure: str = ""
    shrinking: frozenset[str] = frozenset()  # instances terminated with the desired capacity lowered: no replacement
    # (instance terminated for a health check, its replacement or ""): ``actuators.aws_replacements``
    replacements: tuple[tuple[str, str], ...] = ()


def read_activities(page: Callable[..., Any], group: dict[str, Any], now: datetime) -> list[dict[str, Any]]:
    """The group's scaling activities ``read_launches`` needs, through ``page`` (DescribeScalingActivities, its
    errors translated): every one in progress and every one that started within ``CAPACITY_MEMORY`` before ``now``,
    within the bound of pages the module's notes give."""
    name = str(group["AutoScalingGroupName"])
    bound = -(-(len(group.get("Instances", [])) + int(group.get("DesiredCapacity", 0))) // PAGE) + 1
    activities: list[dict[str, Any]] = []
    token = ""
    for _ in range(bound):
        asked = {"AutoScalingGroupName": name, "MaxRecords": PAGE} | ({"NextToken": token} if token else {})
        answer = page(**asked)
        listed = list(answer.get("Activities", []))
        activities.extend(listed)
        token = str(answer.get("NextToken") or "")
        last = listed[-1] if listed else None
        if (
            not token
            or last is None
            or (last.get("StatusCode") in FINISHED and now - last["StartTime"] >= CAPACITY_MEMORY)
        ):
            break
    return activities


def read_launches(group: dict[str, Any], activities: Sequence[dict[str, Any]], now: datetime) -> LaunchRecord:
    """Why the group's latest launch activity failed (AWS's message), if it ended less than ``CAPACITY_MEMORY``
    before ``now`` and is the pool's (not some zones': see ``actuators.aws_groups``), and when it ended; that
    activity's status; when the newest activity other than a failed launch started; and the instances terminated with
    the desired capacity lowered."""
    launches = [a for a in activities if str(a.get("Description", "")).startswith("Launching")]
    changes = [a["StartTime"] for a in activities if a not in launches or a.get("StatusCode") not in FAILED]
    changed_at = max(changes, default=None)
    shrinking = frozenset(
        str(a["Description"]).removeprefix(_TERMINATING)
        for a in activities
        if str(a.get("Description", "")).startswith(_TERMINATING) and _SHRINKING in str(a.get("Cause", ""))
    )
    if not launches:
        return LaunchRecord("", None, "", changed_at, shrinking=shrinking)
    latest = max(launches, key=lambda a: a["StartTime"])
    status = str(latest.get("StatusCode", ""))
    why = _reason(latest) if status in FAILED else ""
    ended = latest.get("EndTime") or latest["StartTime"]
    if not why or now - ended >= CAPACITY_MEMORY:
        return LaunchRecord("", None, status, changed_at, shrinking=shrinking)
    if spared := _spared_zones(group, launches, now):
        zone_failure = f"{why} (zones {', '.join(spared)} launch)"
        return LaunchRecord("", None, status, changed_at, zone_failure=zone_failure, shrinking=shrinking)
    return LaunchRecord(why, ended, status, changed_at, bool(capacity_failure(why)), shrinking=shrinking)


def _reason(launch: dict[str, Any]) -> str:
    """AWS's reason a launch activity failed, or that it gave none."""
    return str(launch.get("StatusMessage") or "") or f"{launch.get('Description', 'a launch')} failed, no reason given"


def _spared_zones(group: dict[str, Any], launches: Sequence[dict[str, Any]], now: datetime) -> list[str]:
    """The group's Availability Zones where no launch failed in the last ``CAPACITY_MEMORY``, when
    the group spans several and launches elsewhere when one fails (its capacity distribution strategy
    ``balanced-best-effort``, the default); [] otherwise, or when a failure does not say where it was attempted."""
    zones = [str(z) for z in group.get("AvailabilityZones", [])]
    strategy = group.get("AvailabilityZoneDistribution", {}).get("CapacityDistributionStrategy", "balanced-best-effort")
    if len(zones) < 2 or strategy == "balanced-only":
        return []
    failed: set[str | None] = set()
    for launch in launches:
        ended = launch.get("EndTime") or launch["StartTime"]
        if launch.get("StatusCode") in FAILED and now - ended < CAPACITY_MEMORY:
            failed.add(_attempted_in(launch))
    return [] if None in failed else [z for z in zones if z not in failed]


def _attempted_in(launch: dict[str, Any]) -> str | None:
    """The Availability Zone a launch activity was attempted in: its ``Details`` ({"Subnet ID": ...,
    "Availability Zone": ...}), else the zone its message names."""
    try:
        details = json.loads(str(launch.get("Details") or "{}"))
    except ValueError:
        details = {}
    zone = details.get("Availability Zone") if isinstance(details, dict) else None
    return str(zone) if zone else zone_of(str(launch.get("StatusMessage", "")))

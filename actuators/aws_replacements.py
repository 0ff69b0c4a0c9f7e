"""Instances an Auto Scaling group is replacing after a health check, not launching for a scale-up: the units in flight
it reports being recreated (``PoolState.recreating_units``).

Auto Scaling replaces an instance it finds unhealthy (an EC2 status check, a Spot interruption or a stopped instance,
an ELB or custom health check) with its desired capacity unchanged: by default it "creates a new scaling activity for
terminating the unhealthy instance and then terminates it. While the instance is terminating, another scaling activity
launches a new instance" (Auto Scaling User Guide, "View the reason for health check failures"). The two activities
tell it apart from a scale-up (DescribeScalingActivities, ``Activity.Description`` and ``Cause``):

- the termination: "Terminating EC2 instance: i-old", its ``Cause`` "At ... an instance was taken out of service in
  response to an EC2 health check indicating it has been terminated or stopped." (or "... in response to an ELB system
  health check failure.", "... in response to a user health-check.");
- the replacement's launch: "Launching a new EC2 instance: i-new", its ``Cause`` "At ... an instance was started in
  response to a difference between desired and actual capacity, increasing the capacity from 2 to 3.", where a
  scale-up's launch also says what changed the desired capacity ("At ... a user request update of AutoScalingGroup
  constraints to min: 0, max: 16, desired: 16 changing the desired capacity from 0 to 16.  At ... an instance was
  started ...", AWS CLI reference, ``describe-scaling-activities``).

Each health-check termination is paired, oldest first, with the next launch that names an instance and changed no
desired capacity (``health_replacements``). A unit is being recreated while the instance replaced is still being
terminated (``Terminating``, ``Terminating:Wait``/``:Proceed``) and no replacement is launched yet, or while its
replacement is listed ``Pending*`` (``recreating``). One listed ``Terminated`` is not: its replacement was launched or
tried as its termination ended, so a unit it leaves with none listed is one whose launch failed. An instance retained
instead (``Terminating:Retained``: its termination lifecycle action abandoned, see ``actuators.aws_group_view``) is not
being terminated: it stays, and the unit it leaves is one the group lacks, a failed unit while its launches fail. What
this does not count, and is waited for as any unit in flight: a replacement whose launch failed (a failed launch
activity names no instance; the group retries it as it retries any launch), the moment between the termination's end and
the launch's start, and a termination older than the activities read (``aws_activities``: every one in progress and
those of the last ten minutes, at least a page of 100). A launch that is a retry of a scale-up's failed launch also
changes no desired capacity: taken for the replacement of an older health-check termination whose own launch is not
listed, it would count a unit of the scale-up as recreated; a replacement is launched while its instance terminates, so
that needs a termination whose replacement the group never launched.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from actuators.aws_activities import FAILED
from actuators.aws_group_view import is_terminating

# the Cause of a termination for a failed health check: EC2's ("an EC2 health check"), ELB's ("an ELB system health
# check failure"), a custom one's ("a user health-check")
_HEALTH = re.compile(r"taken out of service in response to an? [^.]*health[ -]check", re.IGNORECASE)
_TERMINATING = "Terminating EC2 instance: "
_LAUNCHING = "Launching a new EC2 instance: "
_DESIRED_CHANGED = "changing the desired capacity"
_LAUNCHING_STATES = ("Pending", "Pending:Wait", "Pending:Proceed")


def health_replacements(activities: Sequence[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    """(instance terminated for a health check, the instance launched to replace it, "" while none is) for each
    health-check termination among ``activities`` (the module's notes)."""
    pairs: list[list[str]] = []
    for activity in sorted(activities, key=lambda a: a["StartTime"]):
        description, cause = str(activity.get("Description", "")), str(activity.get("Cause", ""))
        if description.startswith(_TERMINATING) and _HEALTH.search(cause):
            pairs.append([description.removeprefix(_TERMINATING).strip(), ""])
        elif (
            description.startswith(_LAUNCHING)
            and _DESIRED_CHANGED not in cause
            and activity.get("StatusCode") not in FAILED
            and (waiting := next((p for p in pairs if not p[1]), None)) is not None
        ):
            waiting[1] = description.removeprefix(_LAUNCHING).strip()
    return tuple((old, new) for old, new in pairs)


def recreating(group: dict[str, Any], replacements: Sequence[tuple[str, str]]) -> int:
    """How many of the group's units in flight are health-check replacements: per replacement, its new instance listed
    ``Pending*``, or, none launched yet, its old one still being terminated (``is_terminating``: not one retained,
    ``Terminating:Retained``, which stays and whose place the group fills as any unit it lacks, nor one listed
    ``Terminated``, whose replacement was launched or tried already)."""
    states = {str(i["InstanceId"]): str(i.get("LifecycleState", "")) for i in group.get("Instances", [])}
    leaving = {str(i["InstanceId"]) for i in group.get("Instances", []) if is_terminating(i)}
    count = 0
    for old, new in replacements:
        if new:
            count += states.get(new, "") in _LAUNCHING_STATES
        else:
            count += old in leaving
    return count

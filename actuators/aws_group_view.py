"""One EC2 Auto Scaling group as the AWS adapters read it (``GroupView``): its size and bounds, its instances that
count (``group_members``: launching, ready, or running in the group otherwise) and those leaving (``is_leaving``), and
what its scaling activities say of its launches, from which it derives its failed units and its target; and why
drained nodes whose instances are out of service in it (retained ones too), or run outside it, are not terminated.
``actuators.aws_groups`` reads and changes groups, and its notes say what the Auto Scaling API says, with the sources.

Each instance's ``LifecycleState`` (Auto Scaling API Reference, ``Instance``; botocore's ``autoscaling`` model lists
every value, shape ``LifecycleState``) is read as one of:

- counted: ``Pending*`` (launching), ``InService`` (ready), and ``ReplacingRootVolume``,
  ``ReplacingRootVolume:Wait``/``:Proceed`` and ``RootVolumeReplaced`` (an instance refresh with the
  ``ReplaceRootVolume`` strategy replaces the root volume of an instance that keeps running in the group, and
  launches none in its place: running and in the group, not ready). So is any value this list does not know (the
  API has gained values over the years, the retained and root-volume ones among them): an instance the group lists
  is never taken for a launch that failed, so a desired capacity is never lowered below the instances listed;
- leaving: ``Terminating``, ``Terminating:Wait``/``:Proceed``, ``Terminated``. Only the first three are being
  terminated (``is_terminating``), a replacement, when one follows, still to come; a ``Terminated`` one's is already
  launched or tried (Auto Scaling launches it as the termination ends), so it is no replacement on its way;
- out of service, still there: ``EnteringStandby``, ``Standby``, ``Detaching``, ``Detached``, a warm pool's
  ``Warmed:*``, and the retained ones (``RETAINED``): an instance whose termination lifecycle action was abandoned
  under an instance lifecycle policy that retains it (``RetentionTriggers.TerminateHookAbandon`` ``retain``) is
  ``Terminating:Retained`` (``Warmed:Terminating:Retained``, ``Warmed:Pending:Retained`` from a warm pool): it keeps
  running, billed, is not counted (the group launches another in its place), and stays until someone calls
  ``TerminateInstanceInAutoScalingGroup`` (API Reference, ``RetentionTriggers``; User Guide, "Manage retained
  instances"). Neither leaving nor a replacement on its way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from actuators.aws_activities import FAILED
from actuators.aws_errors import quota_failure

_LAUNCHING = ("Pending", "Pending:Wait", "Pending:Proceed")
_READY = "InService"
# an instance refresh replacing the root volume of an instance that keeps running in the group: not launching
_ROOT_VOLUME = ("ReplacingRootVolume", "ReplacingRootVolume:Wait", "ReplacingRootVolume:Proceed", "RootVolumeReplaced")
_TERMINATING = ("Terminating", "Terminating:Wait", "Terminating:Proceed")  # its replacement, if any, still to come
_LEAVING = (*_TERMINATING, "Terminated")
RETAINED = ("Terminating:Retained", "Warmed:Terminating:Retained", "Warmed:Pending:Retained")
_NOT_COUNTED = ("EnteringStandby", "Standby", "Detaching", "Detached", *RETAINED)
_WARM_POOL = "Warmed:"  # Warmed:Pending, Warmed:Running, Warmed:Stopped, ...: a warm pool's, not counted


@dataclass(frozen=True)
class GroupInstance:
    """An instance the group counts: ``ready`` (``InService``), ``launching`` (``Pending*``), or neither (running in
    the group while it is not ready: its root volume replaced, ``refreshing``, or a state not known here)."""

    instance_id: str
    zone: str
    ready: bool
    launching: bool = False
    refreshing: bool = False


@dataclass(frozen=True)
class GroupView:
    """One Auto Scaling group (a pool has exactly one: a self-managed group, or its managed node group's)."""

    name: str
    desired: int
    min_size: int
    max_size: int
    instances: tuple[GroupInstance, ...]
    failure: str  # why the latest launch failed, when it failed within CAPACITY_MEMORY; "" otherwise
    failure_at: datetime | None = None
    latest_launch: str = ""  # StatusCode of the newest launch activity, "" when none is listed
    owner: str = ""  # what sets the bounds when it is not the group itself (an EKS node group)
    # instances still being terminated (``is_terminating``) that the group replaces: not those shrinking it
    replacing: int = 0
    recreating: int = 0  # units in flight that replace an instance failed by a health check (aws_replacements)
    changed_at: datetime | None = None  # when the newest activity other than a failed launch started
    for_capacity: bool = True  # the failure names a capacity shortage or a quota: a stockout, not failed units
    zone_failure: str = ""  # a recent launch failure of some zones only, others launching: not the pool's
    # (instance id, LifecycleState) of the instances listed that neither count nor leave: an operator's ``Standby``
    # (``EnteringStandby``), ``Detaching`` (leaving the group but not EC2: it keeps running on its own), a retained
    # one (``RETAINED``: running and billed until someone terminates it), a warm pool's
    out_of_service: tuple[tuple[str, str], ...] = ()
    leaving: tuple[str, ...] = ()  # the instances listed leaving (``is_leaving``, ``Terminated`` too): already leaving

    @property
    def stockout(self) -> bool:
        """A capacity failure refuses scale-ups for CAPACITY_MEMORY after it ended."""
        return bool(self.failure) and self.for_capacity

    @property
    def for_quota(self) -> bool:
        """The failure names an instance, vCPU or Spot request quota reached: a stockout that does not clear by
        itself."""
        return self.stockout and quota_failure(self.failure)

    @property
    def failed_messages(self) -> tuple[str, ...]:
        """AWS's reason for each failed unit, for a stockout as for any other failure (a subnet out of addresses, a
        launch template gone): ``stockout`` says which, and the agent quotes it to the operator either way."""
        return (self.failure,) * self.failed

    @property
    def failing(self) -> bool:
        """The failure is current: nothing changed in the group since (see the module's notes)."""
        return bool(self.failure) and (
            self.changed_at is None or self.failure_at is None or self.changed_at <= self.failure_at
        )

    @property
    def launched_since(self) -> bool:
        """The newest launch activity listed did not fail: the group launches, whatever an older report says."""
        return self.latest_launch not in ("", *FAILED)

    @property
    def bounded_by(self) -> str:
        return self.owner or f"Auto Scaling group {self.name!r}"

    def held_at_min(self, count: int) -> str:
        """Why ``count`` units asked to go stay: the minimum size."""
        return (
            f"{count} not removed: {self.bounded_by} has minimum size {self.min_size} (lower it, or set the pool's "
            f"min_units to at least {self.min_size} so the plan never asks for fewer)"
        )

    def held_at_max(self, count: int) -> str:
        """Why ``count`` units asked for are not: the maximum size."""
        return (
            f"{count} not added: {self.bounded_by} has maximum size {self.max_size} (raise it, or set the pool's "
            f"max_units to {self.max_size} so the plan never asks for more)"
        )

    def failing_at_min(self, to_units: int, desired: int, failed: int, failure: str) -> str:
        """Why a scale-up to ``to_units`` adds nothing: the desired capacity ``desired``, which the minimum size keeps,
        already asks for them, and ``failed`` of those cannot be launched, for AWS's reason ``failure``."""
        return (
            f"target {to_units} nodes: {self.bounded_by} already asks for {desired}, its minimum size "
            f"{self.min_size} keeping {failed} that cannot be launched ({failure}); the group keeps retrying their "
            "launch: fix what AWS's message names, or lower the minimum size"
        )

    @property
    def room_above_min(self) -> int:
        """How many instances the group may lose without going below its minimum size: counted from the instances
        that exist (``group_members``), never from a desired capacity that holds launches that failed."""
        return max(0, min(self.desired, len(self.instances)) - self.min_size)

    @property
    def ready(self) -> int:
        return sum(1 for i in self.instances if i.ready)

    @property
    def refreshing(self) -> int:
        """Instances whose root volume an instance refresh replaces: running, counted, not ready, and never a launch
        (a scale-up's or a replacement's). One in a state not known here is not among them: it may be a launch's."""
        return sum(1 for i in self.instances if i.refreshing)

    @property
    def unlaunched(self) -> int:
        return max(0, self.desired - len(self.instances))

    @property
    def failed(self) -> int:
        """Units asked for that cannot be launched (0 while launches are merely under way, or replacements)."""
        return max(0, self.unlaunched - self.replacing) if self.failing else 0

    @property
    def target(self) -> int:
        return self.desired - self.failed


def group_members(group: dict[str, Any]) -> tuple[GroupInstance, ...]:
    """The group's instances that count: launching (``Pending*``), ready (``InService``), and any other the group
    lists that is neither leaving nor out of service (its root volume being replaced, or a state not known here:
    see the module's notes)."""
    instances = []
    for inst in group.get("Instances", []):
        state = str(inst.get("LifecycleState", ""))
        if _counted(state):
            zone = str(inst.get("AvailabilityZone", ""))
            instances.append(
                GroupInstance(inst["InstanceId"], zone, state == _READY, state in _LAUNCHING, state in _ROOT_VOLUME)
            )
    return tuple(instances)


def _counted(state: str) -> bool:
    """Whether an instance in ``state`` counts toward the group's desired capacity (the module's notes)."""
    return state not in _LEAVING and state not in _NOT_COUNTED and not state.startswith(_WARM_POOL)


def counted_in_units(group: dict[str, Any]) -> str:
    """Why the group's sizes are not instance counts, "" when they are. A group with instance weights (a
    ``MixedInstancesPolicy`` override, or an instance, with ``WeightedCapacity`` other than 1) counts its
    ``DesiredCapacity``, ``MinSize`` and ``MaxSize`` in the weights' units, and one with ``DesiredCapacityType``
    ``vcpu`` or ``memory-mib`` in vCPUs or MiB (``units``, the default, is instances): the adapters read and set them
    as nodes, so such a group is refused, never read as a count of nodes (see ``tests/fakes/REFERENCE.md``)."""
    why = []
    capacity_type = str(group.get("DesiredCapacityType") or "units")
    if capacity_type != "units":
        why.append(f"DesiredCapacityType {capacity_type!r}")
    template = group.get("MixedInstancesPolicy", {}).get("LaunchTemplate", {})
    weights = {
        f"{o.get('InstanceType') or 'an override'} WeightedCapacity {o['WeightedCapacity']}"
        for o in template.get("Overrides", [])
        if str(o.get("WeightedCapacity") or "1") != "1"
    }
    weights |= {
        f"instance {i.get('InstanceId')} WeightedCapacity {i['WeightedCapacity']}"
        for i in group.get("Instances", [])
        if str(i.get("WeightedCapacity") or "1") != "1"
    }
    why.extend(sorted(weights)[:3])
    return ", ".join(why)


def out_of_service(group: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """(instance id, ``LifecycleState``) of the group's instances that neither count (``group_members``) nor are
    being terminated (``is_leaving``): still running, though the group does not count them."""
    counted = {i.instance_id for i in group_members(group)}
    return tuple(
        (str(i["InstanceId"]), str(i.get("LifecycleState", "")))
        for i in group.get("Instances", [])
        if str(i["InstanceId"]) not in counted and not is_leaving(i)
    )


def is_leaving(instance: dict[str, Any]) -> bool:
    """Whether the instance is being terminated (``Terminating``, ``Terminating:Wait``/``:Proceed``, ``Terminated``);
    not a retained one (``Terminating:Retained``), which stays."""
    return str(instance.get("LifecycleState", "")) in _LEAVING


def is_terminating(instance: dict[str, Any]) -> bool:
    """Whether the instance is still being terminated (``Terminating``, ``Terminating:Wait``/``:Proceed``): a
    replacement, when one follows, is still to come. Not a ``Terminated`` one, still listed a while: its replacement
    was launched or tried as its termination ended, so it counts (listed) or is a failed unit (its launch failed)."""
    return str(instance.get("LifecycleState", "")) in _TERMINATING


def out_of_service_refusal(seen: GroupView, nodes: Sequence[str], ids: dict[str, str]) -> str:
    """Why nodes of ``nodes`` whose instances the group lists out of service (``Standby``, ``Detaching``, retained:
    ``retained_refusal``) are not terminated: not gone, and still running; "" when there are none."""
    states = dict(seen.out_of_service)
    listed = [n for n in nodes if ids[n] in states]
    retained = [n for n in listed if states[ids[n]] in RETAINED]
    parked = [f"{n} ({ids[n]}, {states[ids[n]]})" for n in listed if n not in retained]
    told = []
    if parked:
        told.append(
            f"nodes {', '.join(parked)} are in {seen.bounded_by} but out of service: still running, not leaving, and "
            "not counted in its desired capacity, so the agent leaves them be. An instance in Standby is an "
            "operator's: return it to service (aws autoscaling exit-standby --auto-scaling-group-name "
            f"{seen.name} --instance-ids ...) so the drain removes it, or terminate it yourself; one Detaching keeps "
            "running outside the group: terminate it once detached"
        )
    if retained:
        named = [f"nodes {', '.join(f'{n} ({ids[n]}, {states[ids[n]]})' for n in retained)}"]
        told.append(retained_refusal(seen, named, [ids[n] for n in retained]))
    return "; ".join(told)


def retained_refusal(seen: GroupView, named: Sequence[str], instance_ids: Sequence[str]) -> str:
    """What ``named`` (the retained instances ``instance_ids``, or their nodes) are, why the agent leaves them be, and
    the command that terminates each."""
    commands = "; ".join(
        f"aws autoscaling terminate-instance-in-auto-scaling-group --instance-id {i} "
        "--no-should-decrement-desired-capacity"
        for i in instance_ids
    )
    return (
        f"{', '.join(named)} retained by {seen.bounded_by}: a termination lifecycle action was abandoned and the "
        "group's instance lifecycle policy keeps the instance instead of terminating it. It runs and is billed, is "
        "not counted in the group's desired capacity (the group launches another in its place), and stays until "
        "someone terminates it; the agent neither counts it as leaving nor terminates it. Once done with it, "
        f"terminate it: {commands}"
    )


def detached_refusal(seen: GroupView, outside: dict[str, tuple[str, str]]) -> str:
    """Why nodes whose instances run outside the group (``outside``: node -> instance id and EC2 state, read by
    ``AutoScalingGroups._outside``) are not terminated; "" when there are none."""
    if not outside:
        return ""
    named = ", ".join(f"{n} ({i}, EC2 state {state})" for n, (i, state) in outside.items())
    ids = " ".join(i for i, _ in outside.values())
    return (
        f"nodes {named} run on instances that {seen.bounded_by} no longer lists (detached from it) and EC2 has not "
        "terminated: they are billed but not counted in the pool, and the agent terminates no instance outside its "
        f"group. Terminate them (aws ec2 terminate-instances --instance-ids {ids}), or attach them back (aws "
        f"autoscaling attach-instances --auto-scaling-group-name {seen.name} --instance-ids {ids}) so the drain "
        "removes them"
    )

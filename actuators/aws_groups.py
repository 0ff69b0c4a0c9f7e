"""EC2 Auto Scaling groups as the AWS adapters see them: what was asked, which instances exist, which launches failed.

Both AWS adapters stand on this: a self-managed GPU node group *is* an Auto Scaling group, and an EKS managed
node group runs its nodes in one (``nodegroup.resources.autoScalingGroups``). This module reads and changes groups
(``AutoScalingGroups``); a group as read is a ``actuators.aws_group_view.GroupView``, and its scaling activities are
read by ``actuators.aws_activities``. What the Auto Scaling API says:

- ``DesiredCapacity`` is what was asked for; ``Instances`` with ``LifecycleState`` ``Pending*`` are launching,
  ``InService`` ones are ready, and those whose root volume an instance refresh replaces (``ReplacingRootVolume*``,
  ``RootVolumeReplaced``) run in the group and count, not ready; ``Terminating``, ``Terminating:Wait``/``:Proceed`` ones
  are leaving, and so are ``Terminated`` ones while still listed; ``Detaching``/``Standby``/``Warmed*`` and retained
  (``Terminating:Retained``) ones are not counted. A state not known here counts: an instance listed is never taken for
  a launch that failed (``actuators.aws_group_view``).
- ``DesiredCapacity``, ``MinSize`` and ``MaxSize`` count instances only in a group without instance weights: with a
  ``MixedInstancesPolicy`` whose overrides set ``WeightedCapacity``, or a ``DesiredCapacityType`` of ``vcpu`` or
  ``memory-mib``, they count the weights' units (16 at a weight of 8 is 2 instances). The adapters size pools in
  nodes, so such a group is refused (``PermanentActuatorError`` naming the setting to change) and its pool unread.
- A launch that fails does not fail the call that asked for it: the group records a scaling activity ("Launching a new
  EC2 instance...") with ``StatusCode`` ``Failed`` and the reason in ``StatusMessage``
  (``InsufficientInstanceCapacity``, an unfulfillable Spot request), and keeps retrying, each retry a new activity (for
  up to a day before it may suspend its launches). Activities stay listed for six weeks, so a failure is current only
  while recent: the latest launch failed, ended less than ``CAPACITY_MEMORY`` ago, and no other activity (a termination,
  whose instance the group replaces) started since. While one is current, the instances asked for and not there are
  failed units, except those an instance still terminating (``Terminating``, ``Terminating:Wait``/``:Proceed``: not one
  retained, nor one listed ``Terminated``, whose replacement was launched or tried as its termination ended) leaves
  missing: Auto Scaling replaces an interrupted or unhealthy instance by terminating it first and launching after, so
  that gap is a replacement on its way, not a failure. Not so an instance terminated with the desired capacity lowered
  (the adapter's own terminations, remembered, or any whose termination activity's ``Cause`` says "shrinking the
  capacity from N to N-1"), which a termination lifecycle hook may keep ``Terminating:Wait`` (EKS managed node groups
  always have one): no replacement follows it. A failure for capacity (a stockout, a quota, a capacity reservation used
  up: ``actuators.aws_errors``) that ended less than ``CAPACITY_MEMORY`` ago refuses a scale-up without asking AWS
  again, whatever came since. Any other failure (a subnet out of free addresses, a launch template gone) is no stockout:
  its units are failed units carrying AWS's message (``failed_messages``), removed and, once they keep failing for the
  pool's lead time, told of and backed off as such by the executor.
- A group may span several Availability Zones. When a launch fails in one, the group launches in another (its
  ``AvailabilityZoneDistribution.CapacityDistributionStrategy`` ``balanced-best-effort``, the default; with
  ``balanced-only`` it keeps trying the zone that failed). So while some zone of such a group has no recent
  launch failure (the activity's ``Details`` name the zone it was attempted in, ``{"Subnet ID": ...,
  "Availability Zone": ...}``), a failure is that zone's, not the pool's: no failed units, no refused scale-up, no
  back-off; the group places the units in the zones that launch.
- ``TerminateInstanceInAutoScalingGroup`` with ``ShouldDecrementDesiredCapacity`` removes exactly that instance and
  lowers the desired capacity with it, so the group's termination policy picks no victim. But a group over several
  Availability Zones may then be unbalanced, and Auto Scaling "tries to rebalance the group, and rebalancing might
  terminate instances in other zones" (API Reference, ``TerminateInstanceInAutoScalingGroup``): it launches in the
  short zone and terminates an instance of its own choosing, a busy node included. Only the ``AZRebalance`` process
  suspended stops that; ``rebalance_warning`` says when a group spans zones without it (a check run at start).
- An instance the group lists ``Standby`` (an operator took it out of service), ``Detaching`` or retained
  (``Terminating:Retained``: its termination lifecycle action abandoned, kept by the group's instance lifecycle policy
  until someone terminates it) is not gone: it runs (and is billed) though the group does not count it. A drained node
  whose instance is so is not terminated (the drain is not started, or its removal is refused as transient, naming the
  state and what to do: for a retained one, the command that terminates it), never taken for one already leaving the
  group; a retained instance is also logged once as a warning when first read. Nor is one the group no longer lists
  (``DetachInstances``, or a detach raced a termination) while EC2 runs it (a state other than
  ``shutting-down``/``terminated``): it is billed and no longer counted, so its drain is refused the same way, naming
  the instance and what to do (terminate it, or attach it back). "Already leaving" is only an instance the group lists
  ``Terminating``, ``Terminating:Wait``/``:Proceed`` or ``Terminated``, or EC2 is terminating or terminated.
- An instance can leave the group between a read and a termination: EC2 takes a Spot instance back, Auto Scaling
  replaces an unhealthy one. AWS then refuses to terminate it (``ValidationError`` "Instance Id not found - No
  managed instance found for instance ID ..."); the group is read again, and an instance no longer in it is gone
  already, not a reason to block the pool (one still in it is tried again on a later tick).
- ``MinSize`` <= desired capacity <= ``MaxSize`` always (the instances may be fewer: launches that failed):
  ``SetDesiredCapacity`` outside the bounds fails with ``ValidationError`` ("New SetDesiredCapacity value N is below
  min value M for the AutoScalingGroup."), and so does a termination with the decrement while the desired capacity
  equals ``MinSize`` ("Currently, desiredSize equals minSize (N). Terminating instance without replacement will
  violate group's min size constraint..."). The adapters never ask for that: a shrink stops at the minimum size, a
  scale-up at the maximum, and the result says which bound held how many units (an EKS node group's
  ``scalingConfig`` bounds count the same way).

A drained node the group cannot lose (its instances, launching or ready, are at its minimum size: a desired capacity
above them that holds launches that failed gives no room) is not terminated: terminating it without the decrement
would only launch a replacement (a new GPU instance to boot, which a stockout may refuse, for no capacity change),
and the minimum size asks for that many instances anyway. Its drain is not started (``kept_at_min``, asked by the
drainer before it cordons anything: ``actuators.kubernetes_drain.KeepsUnits``), so the node is neither cordoned nor
emptied for nothing; the rejection names the bound. The nodes of the pool already draining (a release's earlier
drains, drains started before or taken over) are asked about with it and take the room above the minimum first: a
group of 3 at minimum size 2 released by 2 drains one node and rejects the other at once. A drain already under way
when the group reaches its minimum (its minimum raised since) has its removal refused with a transient error naming
the bound, so it is retried each tick and the node goes as soon as the group may shrink (its minimum lowered, or a
scale-up's instances launched); past the drain's timeout the drainer gives up and uncordons the node (back in
service, since the group keeps it anyway). The lasting fix is configuration: a pool's ``min_units`` at least the
group's minimum size, so the plan never releases a unit the group must keep.

A pool whose nodes a drainer removes (``drained``: every pool of the daemon) never shrinks by a resize: ``shrink``
terminates launching and then the newest ready instances, busy or not, with no cordon and no eviction. A resize below
the pool's target as read now, once the launches failed in that read are removed, means the pool changed since the
plan (the group grew after the tick read it, or a failed launch came up), and is rejected with nothing else removed
(``actuators.plan_changes``); the next tick plans again, and its releases go through drains.

Kubernetes node names are the instances' private DNS names (``ip-10-0-1-23.ec2.internal``) or, with resource-name
hostnames, start with the instance id; ``instance_ids`` maps them through ``DescribeInstances``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from actuators.aws_activities import LaunchRecord, read_activities, read_launches
from actuators.aws_errors import AWS_ERRORS, from_aws, not_in_service
from actuators.aws_group_view import (
    RETAINED,
    GroupInstance,
    GroupView,
    counted_in_units,
    detached_refusal,
    group_members,
    is_leaving,
    is_terminating,
    out_of_service,
    out_of_service_refusal,
    retained_refusal,
)
from actuators.aws_replacements import health_replacements, recreating
from actuators.write_window import write_raised, write_returned, write_timeout
from models import PermanentActuatorError, TransientActuatorError

log = logging.getLogger(__name__)
# EC2 instance states (``InstanceState.Name``) of an instance terminated or being terminated.
_GONE = ("shutting-down", "terminated")


@dataclass(frozen=True)
class Change:
    """What a shrink did; ``acted`` is False when the group's bounds let nothing change."""

    detail: str
    acted: bool = True


class AutoScalingGroups:
    """``autoscaling`` and ``ec2`` are boto3 clients; every call's errors are translated for ``pool_id``. Writes go
    through ``writes``: given a write's time limit in seconds, an Auto Scaling client whose one attempt ends within
    it (``actuators.aws_wiring.bounded_clients``); without it, through ``autoscaling``."""

    def __init__(self, autoscaling: Any, ec2: Any, writes: Callable[[float], Any] | None = None) -> None:
        self._autoscaling = autoscaling
        self._ec2 = ec2
        self._autoscaling_writes = writes or (lambda _timeout: autoscaling)
        self._decremented: dict[str, set[str]] = {}  # group -> instances this agent terminated, still listed
        self._retained: dict[str, set[str]] = {}  # group -> retained instances listed, each warned of once

    def observe(self, pool_id: str, name: str, now: datetime) -> GroupView:
        group = self._group(pool_id, name)
        if units := counted_in_units(group):
            raise PermanentActuatorError(
                pool_id,
                f"Auto Scaling group {name!r} counts its capacity in units other than instances ({units}), and the "
                "agent reads and sets a pool's size in nodes: it would take its desired capacity for a number of "
                "nodes. Remove the WeightedCapacity of its MixedInstancesPolicy overrides (or set each to 1) and set "
                "its DesiredCapacityType to 'units', or map the pool to a group sized in instances",
            )
        launches = self._launch_failure(pool_id, group, now)
        going = [str(i["InstanceId"]) for i in group.get("Instances", []) if is_leaving(i)]
        terminating = [str(i["InstanceId"]) for i in group.get("Instances", []) if is_terminating(i)]
        ours = self._decremented.get(name, set()) & set(going)
        self._decremented[name] = ours  # forget the instances gone from the listing
        parked = out_of_service(group)
        seen = GroupView(
            name,
            int(group["DesiredCapacity"]),
            int(group["MinSize"]),
            int(group["MaxSize"]),
            group_members(group),
            launches.failure,
            launches.failure_at,
            launches.latest,
            replacing=len([i for i in terminating if i not in ours and i not in launches.shrinking]),
            recreating=recreating(group, launches.replacements),
            changed_at=launches.changed_at,
            for_capacity=launches.for_capacity,
            zone_failure=launches.zone_failure,
            out_of_service=parked,
            leaving=tuple(going),
        )
        self._warn_retained(pool_id, seen)
        return seen

    def _warn_retained(self, pool_id: str, seen: GroupView) -> None:
        """Log, once per instance, the retained instances the group lists: billed, not counted, there until someone
        terminates them (``actuators.aws_group_view.retained_refusal``)."""
        retained = {(i, state) for i, state in seen.out_of_service if state in RETAINED}
        new = sorted((i, state) for i, state in retained if i not in self._retained.get(seen.name, set()))
        self._retained[seen.name] = {i for i, _ in retained}  # forget the instances gone from the listing
        if new:
            named = [f"instance {i} ({state})" for i, state in new]
            log.warning("pool %s: %s", pool_id, retained_refusal(seen, named, [i for i, _ in new]))

    def rebalance_warning(self, pool_id: str, name: str, owner: str = "") -> str:
        """Why the group ``name`` may terminate instances of its own choosing after the agent terminates one: it
        spans several Availability Zones and its ``AZRebalance`` process is not suspended; "" when it cannot.
        ``owner`` names what runs the group (an EKS node group), which has no setting for it."""
        group = self._group(pool_id, name)
        zones = [str(z) for z in group.get("AvailabilityZones", [])]
        suspended = {str(p.get("ProcessName")) for p in group.get("SuspendedProcesses", [])}
        if len(zones) < 2 or "AZRebalance" in suspended:
            return ""
        command = f"aws autoscaling suspend-processes --auto-scaling-group-name {name} --scaling-processes AZRebalance"
        where = f"{owner} runs in Auto Scaling group {name!r}, which" if owner else f"Auto Scaling group {name!r}"
        fix = (
            f"EKS has no setting for it: suspend it on that group yourself ({command}), or give each node group "
            "subnets in one zone"
            if owner
            else f"suspend it: {command}"
        )
        return (
            f"pool {pool_id}: {where} spans {len(zones)} Availability Zones ({', '.join(zones)}) with AZRebalance "
            "not suspended: after the agent terminates a drained node, Auto Scaling may rebalance the zones, "
            f"launching a node in the short zone and terminating another of its own choosing, busy or not; {fix}"
        )

    def _group(self, pool_id: str, name: str) -> dict[str, Any]:
        found = call(pool_id, self._autoscaling.describe_auto_scaling_groups, AutoScalingGroupNames=[name])
        groups = [g for g in found.get("AutoScalingGroups", []) if g["AutoScalingGroupName"] == name]
        if not groups:
            raise PermanentActuatorError(pool_id, f"Auto Scaling group {name!r} does not exist")
        return dict(groups[0])

    def set_desired(self, pool_id: str, group: str, capacity: int) -> None:
        call(  # sent only if the leadership left covers its time limit: the reads took their time
            pool_id,
            self._autoscaling_writes(write_timeout(pool_id)).set_desired_capacity,
            AutoScalingGroupName=group,
            DesiredCapacity=capacity,
            HonorCooldown=False,
        )

    def terminate(self, pool_id: str, group: str, instance_ids: Sequence[str]) -> list[str]:
        """Terminate exactly these instances of ``group``, lowering its desired capacity by as many; the ones that
        had already left it (EC2 took a Spot instance back, or Auto Scaling replaced an unhealthy one, since the group
        was read), which AWS refuses to terminate, are returned. One still in the group that AWS refused to
        terminate (not in service now) is a TransientActuatorError: tried again on a later tick."""
        left: list[str] = []
        for instance_id in instance_ids:
            # The write limit is checked before each: the earlier ones took their time too.
            try:
                self._autoscaling_writes(write_timeout(pool_id)).terminate_instance_in_auto_scaling_group(
                    InstanceId=instance_id, ShouldDecrementDesiredCapacity=True
                )
                write_returned()
                self._decremented.setdefault(group, set()).add(instance_id)
            except AWS_ERRORS as exc:
                write_raised()
                if not not_in_service(exc):
                    raise from_aws(pool_id, exc) from exc
                if instance_id in {i.instance_id for i in group_members(self._group(pool_id, group))}:
                    raise from_aws(pool_id, exc) from exc
                left.append(instance_id)
        return left

    def shrink(self, pool_id: str, seen: GroupView, to_units: int) -> Change:
        """Bring the pool down to ``to_units``, never below the minimum size: launches not yet started are cancelled
        first (desired capacity lowered), then launching instances and then the newest others (ready, or running in
        the group while not ready) are terminated by id. What the minimum size keeps is said in the detail; ``acted``
        is False when it kept everything."""
        wanted = seen.target - to_units
        excess = min(wanted, max(0, seen.desired - seen.min_size))
        held = f"; {seen.held_at_min(wanted - excess)}" if wanted > excess else ""
        if excess <= 0:
            return Change(f"target {to_units} nodes: nothing removed{held}", acted=False)
        cancel = min(excess, seen.unlaunched - seen.failed)
        if cancel > 0:
            self.set_desired(pool_id, seen.name, seen.desired - cancel)
        launching = [i for i in seen.instances if i.launching]
        running = self.newest_first(pool_id, [i for i in seen.instances if not i.launching])
        victims = (launching + running)[: excess - cancel]
        left = self.terminate(pool_id, seen.name, [i.instance_id for i in victims])
        listed = ", ".join(i.instance_id for i in victims if i.instance_id not in left)
        gone = f"; {', '.join(left)} had already left the group" if left else ""
        return Change(
            f"target {seen.target - excess} nodes: cancelled {max(cancel, 0)} launches, terminating [{listed}]"
            f"{gone}{held}"
        )

    def remove_nodes(self, pool_id: str, seen: GroupView, nodes: Sequence[str]) -> str:
        """Terminate exactly the instances of these Kubernetes nodes; ones already gone from the group (a drain
        repeated after a restart, an instance EC2 or Auto Scaling took out meanwhile) are not asked for again, nor
        waited for. Nodes the group cannot lose without going below its minimum size are kept, and a node whose
        instance is not found (gone, its Node object not deleted yet) is looked for again on a later tick:
        TransientActuatorError (see the module's notes)."""
        found = self.instance_ids(pool_id, nodes, _listed(seen))
        ids = {n: i for n, (i, _) in found.items()}
        unknown = [n for n in nodes if n not in ids]
        if unknown:
            raise TransientActuatorError(
                pool_id,
                f"no EC2 instance has the private DNS name of nodes {unknown} (their instances are gone and the "
                "Node objects not deleted yet, or they are not EC2 instances); will look again",
            )
        going, kept = _within_min(seen, nodes, ids)
        left = set(self.terminate(pool_id, seen.name, [ids[n] for n in going]))
        outside = self._outside(pool_id, seen, found, left)
        terminated = ", ".join(f"{n} ({ids[n]})" for n in going if ids[n] not in left)
        gone = ", ".join(f"{n} ({ids[n]})" for n in going if ids[n] in left and n not in outside)
        done = "; ".join(
            ([f"terminating {terminated}"] if terminated else [])
            + ([f"{gone} had already left the group"] if gone else [])
        )
        # raised after terminating some: those are carried out (``maybe_applied``)
        if kept:
            why = _at_min(seen, kept, "drained nodes") + (f" ({done})" if done else "")
            raise TransientActuatorError(pool_id, why, maybe_applied=bool(terminated))
        if refused := "; ".join(
            filter(None, [out_of_service_refusal(seen, nodes, ids), detached_refusal(seen, outside)])
        ):
            raise TransientActuatorError(
                pool_id, refused + (f" ({done})" if done else ""), maybe_applied=bool(terminated)
            )
        return done or f"nodes {', '.join(nodes)} are already leaving the group"

    def kept_at_min(self, pool_id: str, seen: GroupView, nodes: Sequence[str], draining: Sequence[str] = ()) -> str:
        """Why some of these Kubernetes nodes could not be removed now, as ``remove_nodes`` would keep them once the
        nodes ``draining`` (drains under way in the pool, removed first) are gone: the group would be at its minimum
        size, their instances are out of service in it (``Standby``), or run outside it (detached); "" when all of
        them could go (a node whose instance is not found, or terminated, needs no termination)."""
        ahead = [n for n in draining if n not in nodes]
        found = self.instance_ids(pool_id, [*ahead, *nodes], _listed(seen))
        ids = {n: i for n, (i, _) in found.items()}
        going, kept = _within_min(seen, [n for n in [*ahead, *nodes] if n in ids], ids)
        ours = [n for n in kept if n in nodes]
        if ours:
            return _at_min(seen, ours, "nodes", [n for n in [*going, *kept] if n in ahead])
        outside = self._outside(pool_id, seen, {n: found[n] for n in nodes if n in found})
        return "; ".join(
            filter(
                None,
                [out_of_service_refusal(seen, [n for n in nodes if n in ids], ids), detached_refusal(seen, outside)],
            )
        )

    def _outside(
        self, pool_id: str, seen: GroupView, found: dict[str, tuple[str, str]], left: Collection[str] = ()
    ) -> dict[str, tuple[str, str]]:
        """Of ``found`` (node -> instance id and EC2 state, "" when not read), the nodes whose instances the group
        no longer lists (nor those of ``left``, gone from it since it was read) and EC2 has not terminated: detached
        from the group, still running. EC2 is asked for the states not read; an instance it does not list is gone."""
        listed = (_listed(seen) | set(seen.leaving)) - set(left)
        # A state read before ``left`` left the group is read again: EC2 may have taken the instance back since.
        unlisted = {n: (i, "" if i in left else state) for n, (i, state) in found.items() if i not in listed}
        unread = sorted({i for i, state in unlisted.values() if not state})
        states: dict[str, str] = {}
        if unread:
            filters = [{"Name": "instance-id", "Values": unread}]
            for reservation in call(pool_id, self._ec2.describe_instances, Filters=filters).get("Reservations", []):
                for inst in reservation.get("Instances", []):
                    states[str(inst["InstanceId"])] = str(inst.get("State", {}).get("Name", ""))
        read = {n: (i, state or states.get(i, "")) for n, (i, state) in unlisted.items()}
        return {n: (i, state) for n, (i, state) in read.items() if state and state not in _GONE}

    def newest_first(self, pool_id: str, instances: Sequence[GroupInstance]) -> list[GroupInstance]:
        """``instances`` ordered newest launch first (ties by id, for a stable order)."""
        if not instances:
            return []
        ids = [i.instance_id for i in instances]
        launched: dict[str, str] = {}
        for reservation in call(pool_id, self._ec2.describe_instances, InstanceIds=ids).get("Reservations", []):
            for inst in reservation.get("Instances", []):
                launched[inst["InstanceId"]] = str(inst.get("LaunchTime", ""))
        return sorted(instances, key=lambda i: (launched.get(i.instance_id, ""), i.instance_id), reverse=True)

    def instance_ids(
        self, pool_id: str, nodes: Sequence[str], members: Collection[str] = ()
    ) -> dict[str, tuple[str, str]]:
        """Kubernetes node name -> its EC2 instance's id and state (``State.Name``; "" for a node named by its
        instance id, whose state is not read here), for the nodes that are EC2 instances. A private DNS name is its
        private IP's, which EC2 gives again once an instance is terminated, while the terminated instance stays listed
        for about an hour: of several instances with the name, one of ``members`` (the group's instances) is taken,
        else one not terminated (nor shutting down); a terminated one only when no other has the name (the node's own
        instance, gone)."""
        by_node = {n: (n.split(".", 1)[0], "") for n in nodes if n.startswith("i-")}
        named = [n for n in nodes if n not in by_node]
        if named:
            filters = [{"Name": "private-dns-name", "Values": named}]
            found: dict[str, list[tuple[bool, bool, str, str]]] = {}
            for reservation in call(pool_id, self._ec2.describe_instances, Filters=filters).get("Reservations", []):
                for inst in reservation.get("Instances", []):
                    instance_id = str(inst["InstanceId"])
                    state = str(inst.get("State", {}).get("Name", ""))
                    found.setdefault(str(inst.get("PrivateDnsName", "")), []).append(
                        (instance_id in members, state not in _GONE, instance_id, state)
                    )
            by_node.update({name: max(candidates)[2:] for name, candidates in found.items()})
        return {n: by_node[n] for n in nodes if n in by_node}

    def _launch_failure(self, pool_id: str, group: dict[str, Any], now: datetime) -> LaunchRecord:
        """What the group's scaling activities say of its launches (``actuators.aws_activities``)."""
        page = functools.partial(call, pool_id, self._autoscaling.describe_scaling_activities)
        activities = read_activities(page, group, now)
        return replace(read_launches(group, activities, now), replacements=health_replacements(activities))


def _within_min(seen: GroupView, nodes: Sequence[str], ids: dict[str, str]) -> tuple[list[str], list[str]]:
    """Of ``nodes`` (each with its instance id in ``ids``), those still in the group that it may lose without going
    below its minimum size, and those it must keep."""
    members = {i.instance_id for i in seen.instances}
    leaving = [n for n in nodes if ids[n] in members]
    room = seen.room_above_min
    return leaving[:room], leaving[room:]


def _listed(seen: GroupView) -> set[str]:
    """The instances the group lists that count or are out of service (not those being terminated)."""
    return {i.instance_id for i in seen.instances} | {instance_id for instance_id, _ in seen.out_of_service}


def _at_min(seen: GroupView, kept: Sequence[str], what: str, ahead: Sequence[str] = ()) -> str:
    """Why ``kept`` stay; ``ahead``: nodes of the group whose drains under way take the room above the minimum."""
    room = seen.room_above_min
    count = len(seen.instances)
    counted = f"{count} instances; desired capacity {seen.desired}" + (
        f", {seen.desired - count} of them not launched" if seen.desired > count else ""
    )
    where = (
        f"{seen.bounded_by} has minimum size {seen.min_size} and {counted}, so it can lose "
        f"{room} {'node' if room == 1 else 'nodes'}, which the {'drain' if len(ahead) == 1 else 'drains'} under way "
        f"of {', '.join(ahead)} {'takes' if len(ahead) == 1 else 'take'}"
        if ahead and room > 0
        else f"{seen.bounded_by} is at its minimum size {seen.min_size} ({counted})"
    )
    return (
        f"{where}: {what} {', '.join(kept)} stay until it may shrink, as terminating them would go below the minimum "
        "and terminating without lowering the desired capacity would only launch replacements; lower the minimum "
        f"size, or set the pool's min_units to at least {seen.min_size}"
    )


def call(pool_id: str, method: Any, **kwargs: Any) -> Any:
    """Call an AWS client method; what it raises comes back as this pool's ``ActuatorError``. A write's call (its
    client bounded by ``actuators.write_window.write_timeout``) that returns is counted accepted, one that raises is
    not: its error says for its own request."""
    try:
        answer = method(**kwargs)
    except AWS_ERRORS as exc:
        write_raised()
        raise from_aws(pool_id, exc) from exc
    except BaseException:
        write_raised()
        raise
    write_returned()
    return answer

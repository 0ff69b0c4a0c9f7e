"""The EC2 and Auto Scaling behaviours the proxy adds to moto: lead time, launches failing for capacity (at once or
after the desired capacity was accepted), scaling activities and their pages, a group's bounds, Spot interruptions
and reclaims (a reclaimed instance still listed ``Terminated``), a termination lifecycle hook holding terminated
instances, instances retained after it was abandoned, and instances listed in states the group still counts (a root
volume replaced). Each fact's source is in ``tests/fakes/REFERENCE.md``."""

from __future__ import annotations

import base64
import json
import uuid
import xml.etree.ElementTree as ET

from tests.fakes.aws_api.state import (
    _ASG_NS,
    _FINISHED,
    _FOR_GROUP,
    _N,
    ICE_MESSAGE,
    ZONE,
    ProxyBase,
    _error,
    _esc,
    _Fault,
    _xml,
)


class AutoScalingBehaviours(ProxyBase):
    """What tests make EC2 and Auto Scaling do, and how the proxy rewrites and answers their calls."""

    def stockout(self, group: str, message: str = ICE_MESSAGE, zone: str = ZONE) -> None:
        """Record a launch in ``group`` that just failed with ``message`` (for capacity unless the message says
        otherwise), attempted in ``zone`` (``Details``)."""
        stamp = self.now.strftime("%Y-%m-%dT%H:%M:%S.000Z")
        activity = {
            "ActivityId": str(uuid.uuid4()),
            "AutoScalingGroupName": group,
            "Description": "Launching a new EC2 instance.  Status Reason: " + message,
            "Cause": f"At {stamp} an instance was started in response to a difference between desired and actual "
            "capacity, increasing the capacity from 0 to 1.",
            "StartTime": stamp,
            "EndTime": stamp,
            "StatusCode": "Failed",
            "StatusMessage": message,
            "Progress": "100",
            "Details": json.dumps({"Subnet ID": "subnet-1", "Availability Zone": zone}),
        }
        with self._lock:
            self._state.activities.setdefault(group, []).insert(0, activity)

    def set_bounds(self, group: str, min_size: int, max_size: int) -> None:
        """An operator changes the group's bounds (and its node group's, if it has one), the desired capacity kept."""
        with self._lock:
            moto_desired = self.group(group)["DesiredCapacity"]
            self.direct.autoscaling.update_auto_scaling_group(
                AutoScalingGroupName=group, MinSize=min_size, MaxSize=max_size, DesiredCapacity=moto_desired
            )
            for (cluster, nodegroup), name in self._state.nodegroup_groups.items():
                if name == group:
                    scaling = {"minSize": min_size, "maxSize": max_size}
                    self.direct.eks.update_nodegroup_config(
                        clusterName=cluster, nodegroupName=nodegroup, scalingConfig=scaling
                    )

    def launch_activity(self, group: str, status: str = "Successful") -> None:
        """Record a launch in ``group`` that did not fail (``Successful``, or ``InProgress``), stamped ``now``."""
        stamp = self.now.strftime("%Y-%m-%dT%H:%M:%S.000Z")
        activity = {
            "ActivityId": str(uuid.uuid4()),
            "AutoScalingGroupName": group,
            "Description": "Launching a new EC2 instance: i-0123456789abcdef0",
            "Cause": f"At {stamp} an instance was started in response to a difference between desired and actual "
            "capacity, increasing the capacity from 0 to 1.",
            "StartTime": stamp,
            "StatusCode": status,
            "Progress": "100" if status == "Successful" else "30",
        }
        if status == "Successful":
            activity["EndTime"] = stamp
        with self._lock:
            self._state.activities.setdefault(group, []).insert(0, activity)

    def reclaim(self, instance_id: str, listed_terminated: bool = False) -> None:
        """EC2 takes the instance back (a Spot interruption): it is terminated and leaves its group, which was not
        asked to shrink and launches a replacement (moto does both at once; the replacement is ``Pending`` until
        ``settle``; under ``arm_late_stockout`` it cannot be launched, and its launch fails at ``settle``). With
        ``listed_terminated`` the group still lists the instance ``Terminated`` (the fake never drops it) while its
        replacement is launched or fails. After an ``interrupt`` of it, its termination activity ends (``Successful``)
        and the group records the replacement's launch, ``InProgress`` until ``settle``: "Launching a new EC2
        instance: i-new", its ``Cause`` naming no change of the desired capacity ("... an instance was started in
        response to a difference between desired and actual capacity, increasing the capacity from 2 to 3.": Auto
        Scaling User Guide, "View the reason for health check failures": "While the instance is terminating, another
        scaling activity launches a new instance"; the activities as ``describe-scaling-activities`` lists a
        replacement, in the gist watchamcb/fc686c70e8c2660ee7ef, "Auto Scaling replacement of instances terminated in
        EC2 console")."""
        with self._lock:
            self._state.terminating.discard(instance_id)
            found = self.direct.autoscaling.describe_auto_scaling_instances(InstanceIds=[instance_id])
            group = (
                str(found["AutoScalingInstances"][0]["AutoScalingGroupName"]) if found["AutoScalingInstances"] else ""
            )
            before = {i["InstanceId"] for i in self.group(group)["Instances"]} if group else set()
            desired = int(self.group(group)["DesiredCapacity"]) + self._state.shortfall[group] if group else 0
            self.direct.ec2.terminate_instances(InstanceIds=[instance_id])
            if group and listed_terminated:
                gone = {
                    "InstanceId": instance_id,
                    "AvailabilityZone": str(found["AutoScalingInstances"][0]["AvailabilityZone"]),
                }
                self._state.terminated.setdefault(group, []).append(gone)
            if group and self._state.late_stockout:  # the replacement moto launched cannot be launched after all
                unlaunched = sorted({i["InstanceId"] for i in self.group(group)["Instances"]} - before)
                if unlaunched:
                    self.direct.autoscaling.detach_instances(
                        AutoScalingGroupName=group, InstanceIds=unlaunched, ShouldDecrementDesiredCapacity=True
                    )
                    self.direct.ec2.terminate_instances(InstanceIds=unlaunched)
                    self._set_desired(group, desired)
            ended = [
                a
                for a in self._state.activities.get(group, [])
                if a["Description"] == f"Terminating EC2 instance: {instance_id}" and a["StatusCode"] == "InProgress"
            ]
            if not ended:
                return
            stamp = self.now.strftime("%Y-%m-%dT%H:%M:%S.000Z")
            ended[0].update(StatusCode="Successful", Progress="100", EndTime=stamp)
            live = len(self.group(group)["Instances"])
            for new in sorted({i["InstanceId"] for i in self.group(group)["Instances"]} - before):
                cause = (
                    f"At {stamp} an instance was started in response to a difference between desired and actual "
                    f"capacity, increasing the capacity from {live - 1} to {live}."
                )
                launch = {
                    "ActivityId": str(uuid.uuid4()),
                    "AutoScalingGroupName": group,
                    "Description": f"Launching a new EC2 instance: {new}",
                    "Cause": cause,
                    "StartTime": stamp,
                    "StatusCode": "InProgress",
                    "Progress": "30",
                }
                self._state.activities[group].insert(0, launch)

    def interrupt(self, group: str, instance_id: str) -> None:
        """A Spot interruption of ``instance_id`` under way, stamped ``now``: the instance is ``Terminating:Wait``
        (its group's termination lifecycle hook runs) and the group records the termination as ``InProgress``; it
        launches the replacement once the termination ends (``reclaim``)."""
        stamp = self.now.strftime("%Y-%m-%dT%H:%M:%S.000Z")
        activity = {
            "ActivityId": str(uuid.uuid4()),
            "AutoScalingGroupName": group,
            "Description": f"Terminating EC2 instance: {instance_id}",
            "Cause": f"At {stamp} an instance was taken out of service in response to an EC2 health check indicating "
            "it has been terminated or stopped.",
            "StartTime": stamp,
            "StatusCode": "InProgress",
            "Progress": "50",
        }
        with self._lock:
            self._state.terminating.add(instance_id)
            self._state.activities.setdefault(group, []).insert(0, activity)

    def hold_terminations(self) -> None:
        """From now on a termination lifecycle hook holds each instance terminated with the desired capacity
        lowered (``TerminateInstanceInAutoScalingGroup``): the group's desired capacity is lowered at once, and the
        instance stays listed ``Terminating:Wait`` with an ``InProgress`` "Terminating EC2 instance" activity whose
        ``Cause`` says the capacity shrank (as EKS managed node groups always have such a hook)."""
        self._state.hooked = True

    def _hold(self, form: dict[str, str]) -> None:
        """Remember an instance the hook holds, as the group listed it, and record its termination activity."""
        instance_id = form["InstanceId"]
        (listed,) = self.direct.autoscaling.describe_auto_scaling_instances(InstanceIds=[instance_id])[
            "AutoScalingInstances"
        ]
        group = str(listed["AutoScalingGroupName"])
        desired = int(self.group(group)["DesiredCapacity"]) + self._state.shortfall[group]
        stamp = self.now.strftime("%Y-%m-%dT%H:%M:%S.000Z")
        activity = {
            "ActivityId": str(uuid.uuid4()),
            "AutoScalingGroupName": group,
            "Description": f"Terminating EC2 instance: {instance_id}",
            "Cause": f"At {stamp} instance {instance_id} was taken out of service in response to a user request, "
            f"shrinking the capacity from {desired} to {desired - 1}.",
            "StartTime": stamp,
            "StatusCode": "InProgress",
            "Progress": "0",
        }
        held = {"InstanceId": instance_id, "AvailabilityZone": str(listed["AvailabilityZone"])}
        self._state.held.setdefault(group, []).append(held)
        self._state.activities.setdefault(group, []).insert(0, activity)

    def retain(self, instance_id: str, shrunk: bool = False) -> None:
        """The termination lifecycle action of ``instance_id`` was abandoned, and the group's instance lifecycle policy
        retains it (``RetentionTriggers.TerminateHookAbandon`` ``retain``): the group lists it ``Terminating:Retained``,
        EC2 keeps it running, and the group no longer counts it. A group whose desired capacity was not lowered with
        the termination (a Spot interruption, a health check) launches an instance in its place, ``Pending`` until
        ``settle`` (none under ``arm_late_stockout``: that launch fails at ``settle``); one ``shrunk`` (a scale-in, a
        termination with the decrement) launches none. The hook's run is not modelled (the instance goes straight to
        the retained state), nor are the group's activities changed. ``TerminateInstanceInAutoScalingGroup`` of it
        without the decrement terminates it; with the decrement it is refused (not modelled)."""
        with self._lock:
            self._state.terminating.discard(instance_id)
            (listed,) = self.direct.autoscaling.describe_auto_scaling_instances(InstanceIds=[instance_id])[
                "AutoScalingInstances"
            ]
            group = str(listed["AutoScalingGroupName"])
            desired = int(self.group(group)["DesiredCapacity"]) + self._state.shortfall[group]
            # moto detaches the instance from its group and keeps it running; the proxy lists it retained
            self.direct.autoscaling.detach_instances(
                AutoScalingGroupName=group, InstanceIds=[instance_id], ShouldDecrementDesiredCapacity=True
            )
            self._set_desired(group, desired - 1 if shrunk else desired)
            retained = {"InstanceId": instance_id, "AvailabilityZone": str(listed["AvailabilityZone"])}
            self._state.retained.setdefault(group, []).append(retained)

    def replace_root_volume(self, instance_id: str, state: str = "ReplacingRootVolume") -> None:
        """An instance refresh with the ``ReplaceRootVolume`` strategy replaces the root volume of ``instance_id``:
        the group lists it in ``state`` (``ReplacingRootVolume``, ``ReplacingRootVolume:Wait``/``:Proceed``,
        ``RootVolumeReplaced``; ``InService`` once done), and it keeps running in the group, counted in its desired
        capacity: no instance is launched in its place."""
        stages = (
            "ReplacingRootVolume",
            "ReplacingRootVolume:Wait",
            "ReplacingRootVolume:Proceed",
            "RootVolumeReplaced",
        )
        assert state in (*stages, "InService"), f"not a root volume replacement's state: {state}"
        self.list_as(instance_id, state)

    def list_as(self, instance_id: str, state: str) -> None:
        """The group lists ``instance_id``, which it still counts (moto's ``InService``), in ``LifecycleState``
        ``state``: a root volume replacement's (``replace_root_volume``), or a value the API may add (it has gained
        some over the years, the retained and root volume ones among them); ``InService`` ends it."""
        with self._lock:
            if state == "InService":
                self._state.listed_as.pop(instance_id, None)
            else:
                self._state.listed_as[instance_id] = state

    def _retained_group(self, instance_id: str) -> str:
        """The group that lists ``instance_id`` retained, or ""."""
        return next(
            (g for g, listed in self._state.retained.items() if instance_id in {i["InstanceId"] for i in listed}), ""
        )

    def _terminate_retained(self, form: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """``TerminateInstanceInAutoScalingGroup`` of a retained instance: without the decrement EC2 terminates it and
        the group no longer lists it (it was not counted; a termination lifecycle hook's new run is not modelled); with
        the decrement, not modelled."""
        instance_id = form["InstanceId"]
        if form.get("ShouldDecrementDesiredCapacity", "").lower() == "true":
            fault = _Fault("InternalFailure", "the fake does not model the decrement for a retained instance", 500, 1)
            return _error(fault, form.get("Version", ""))
        with self._lock:
            group = self._retained_group(instance_id)
            self._state.retained[group] = [i for i in self._state.retained[group] if i["InstanceId"] != instance_id]
            self.direct.ec2.terminate_instances(InstanceIds=[instance_id])
        stamp = self.now.strftime("%Y-%m-%dT%H:%M:%S.000Z")
        return _xml(
            f'<TerminateInstanceInAutoScalingGroupResponse xmlns="{_ASG_NS}">'
            f"<TerminateInstanceInAutoScalingGroupResult><Activity><ActivityId>{uuid.uuid4()}</ActivityId>"
            f"<AutoScalingGroupName>{group}</AutoScalingGroupName>"
            f"<Description>Terminating EC2 instance: {instance_id}</Description><Cause>At {stamp} instance "
            f"{instance_id} was taken out of service in response to a user request.</Cause><StartTime>{stamp}"
            "</StartTime><StatusCode>InProgress</StatusCode><Progress>0</Progress></Activity>"
            "</TerminateInstanceInAutoScalingGroupResult><ResponseMetadata><RequestId>"
            f"{uuid.uuid4()}</RequestId></ResponseMetadata></TerminateInstanceInAutoScalingGroupResponse>"
        )

    def arm_late_stockout(self, message: str = ICE_MESSAGE) -> None:
        """From now on, instances asked for beyond those already there cannot be launched; the failed launches'
        StatusMessage is ``message``."""
        self._state.late_stockout = True
        self._state.late_message = message

    def restock(self) -> None:
        self._state.late_stockout = False

    def _managed(self, instance_id: str) -> bool:
        """Whether an Auto Scaling group holds the instance."""
        found = self.direct.autoscaling.describe_auto_scaling_instances(InstanceIds=[instance_id])
        return bool(found["AutoScalingInstances"])

    def _out_of_bounds(self, operation: str, form: dict[str, str]) -> str:
        """AWS's refusal of a change that would leave the group's bounds, or ""."""
        if operation == "SetDesiredCapacity":
            group = self.group(form["AutoScalingGroupName"])
            asked = int(form["DesiredCapacity"])
            if asked < group["MinSize"]:
                return f"New SetDesiredCapacity value {asked} is below min value {group['MinSize']} {_FOR_GROUP}"
            if asked > group["MaxSize"]:
                return f"New SetDesiredCapacity value {asked} is above max value {group['MaxSize']} {_FOR_GROUP}"
            return ""
        if form.get("ShouldDecrementDesiredCapacity", "").lower() != "true":
            return ""
        found = self.direct.autoscaling.describe_auto_scaling_instances(InstanceIds=[form["InstanceId"]])
        if not found["AutoScalingInstances"]:
            return ""
        name = found["AutoScalingInstances"][0]["AutoScalingGroupName"]
        group = self.group(name)
        desired = group["DesiredCapacity"] + self._state.shortfall[name]
        if desired <= group["MinSize"]:
            return (
                f"Currently, desiredSize equals minSize ({group['MinSize']}). Terminating instance without replacement "
                "will violate group's min size constraint. Either set shouldDecrementDesiredCapacity flag to false or "
                "lower group's min size."
            )
        return ""

    def _set_desired(self, group: str, desired: int) -> None:
        with self._lock:
            live = len(self.group(group)["Instances"])
            short = desired - live if self._state.late_stockout and desired > live else 0
            self._state.shortfall[group] = short
            self.direct.autoscaling.set_desired_capacity(AutoScalingGroupName=group, DesiredCapacity=desired - short)

    def _rewrite_groups(self, raw: bytes) -> bytes:
        root = ET.fromstring(raw)
        for group in root.iterfind(".//a:AutoScalingGroups/a:member", _N):
            name = group.findtext("a:AutoScalingGroupName", "", _N)
            desired = group.find("a:DesiredCapacity", _N)
            if desired is not None and desired.text is not None:
                desired.text = str(int(desired.text) + self._state.shortfall[name])
            instances = group.find("a:Instances", _N)
            kept = [(i, "Terminating:Wait") for i in self._state.held.get(name, [])]
            kept += [(i, "Terminating:Retained") for i in self._state.retained.get(name, [])]
            kept += [(i, "Terminated") for i in self._state.terminated.get(name, [])]
            for listed, lifecycle in kept:
                if instances is None:
                    instances = ET.SubElement(group, f"{{{_ASG_NS}}}Instances")
                member = ET.SubElement(instances, f"{{{_ASG_NS}}}member")
                fields = {**listed, "LifecycleState": lifecycle, "HealthStatus": "Healthy"}
                for key, value in {**fields, "ProtectedFromScaleIn": "false"}.items():
                    ET.SubElement(member, f"{{{_ASG_NS}}}{key}").text = value
            for inst in group.iterfind("a:Instances/a:member", _N):
                state = inst.find("a:LifecycleState", _N)
                instance_id = inst.findtext("a:InstanceId", "", _N)
                if state is not None and instance_id in self._state.terminating:
                    state.text = "Terminating:Wait"
                elif state is not None and instance_id in self._state.listed_as:
                    state.text = self._state.listed_as[instance_id]
                elif state is not None and instance_id not in self._state.ready:
                    state.text = "Pending"
        return bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True))

    def _activities(self, form: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """One page of the group's activities: those in progress first, then by start time, latest first;
        ``MaxRecords`` of them (1..100, default 100) from ``NextToken`` on, and a ``NextToken`` while more remain."""
        with self._lock:
            listed = list(self._state.activities.get(form.get("AutoScalingGroupName", ""), []))
        listed.sort(key=lambda a: a["StartTime"], reverse=True)
        listed.sort(key=lambda a: a.get("StatusCode") in _FINISHED)
        try:
            size = int(form.get("MaxRecords", "100"))
            start = int(base64.urlsafe_b64decode(form["NextToken"]).decode()) if "NextToken" in form else 0
        except ValueError:
            return _error(_Fault("InvalidNextToken", "The token is not valid.", 400, 1), form.get("Version", ""))
        if not 1 <= size <= 100:
            message = f"Value '{size}' at 'maxRecords' failed to satisfy constraint: Member must be from 1 to 100"
            return _error(_Fault("ValidationError", message, 400, 1), form.get("Version", ""))
        members = "".join(
            "<member>" + "".join(f"<{k}>{_esc(v)}</{k}>" for k, v in a.items()) + "</member>"
            for a in listed[start : start + size]
        )
        more = start + size < len(listed)
        token = (
            f"<NextToken>{base64.urlsafe_b64encode(str(start + size).encode()).decode()}</NextToken>" if more else ""
        )
        return _xml(
            f'<DescribeScalingActivitiesResponse xmlns="{_ASG_NS}"><DescribeScalingActivitiesResult><Activities>'
            f"{members}</Activities>{token}</DescribeScalingActivitiesResult><ResponseMetadata><RequestId>"
            f"{uuid.uuid4()}</RequestId></ResponseMetadata></DescribeScalingActivitiesResponse>"
        )

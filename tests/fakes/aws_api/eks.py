"""The EKS behaviours the proxy adds to moto: node group updates in progress (and the refusal of another one
meanwhile), updates someone else started, ``ListUpdates``/``DescribeUpdate`` and their pages, idempotent
``clientRequestToken``, a scaling config outside the node group's bounds, and node group health issues. Each fact's
source is in ``tests/fakes/REFERENCE.md``."""

from __future__ import annotations

import base64
import json
import re
import uuid
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.aws_api.auto_scaling import AutoScalingBehaviours
from tests.fakes.aws_api.state import NOT_ACTIVE_MESSAGE, _json, _Update

_EKS_ROUTES = [
    ("POST", re.compile(r"^/clusters/([^/]+)/node-groups/([^/]+)/update-config$"), "UpdateNodegroupConfig"),
    ("GET", re.compile(r"^/clusters/([^/]+)/node-groups/([^/]+)$"), "DescribeNodegroup"),
    ("GET", re.compile(r"^/clusters/([^/]+)/updates/([^/]+)$"), "DescribeUpdate"),
    ("GET", re.compile(r"^/clusters/([^/]+)/updates$"), "ListUpdates"),
]


class EksBehaviours(AutoScalingBehaviours):
    """What tests make EKS do, and how the proxy answers its node group calls (a node group runs in an Auto
    Scaling group)."""

    def finish_operations(self) -> None:
        with self._lock:
            for update in self._state.updates:
                update.status = "Successful"

    def health_issue(self, nodegroup: str, code: str, message: str) -> None:
        """EKS reports a health issue on the node group (``Nodegroup.health.issues``)."""
        group = next(g for (_, ng), g in self._state.nodegroup_groups.items() if ng == nodegroup)
        issue = {"code": code, "message": message, "resourceIds": [group]}
        self._state.health.setdefault(nodegroup, []).append(issue)

    def clear_health_issues(self, nodegroup: str) -> None:
        """EKS no longer reports any health issue on the node group."""
        self._state.health.pop(nodegroup, None)

    def add_settled_updates(self, cluster: str, nodegroup: str, count: int) -> None:
        """``count`` earlier updates of the node group, all ``Successful`` (a long-lived node group's history)."""
        with self._lock:
            for _ in range(count):
                update = _Update(str(uuid.uuid4()), cluster, nodegroup, [], self.now, status="Successful")
                self._state.updates.append(update)

    def start_update(self, cluster: str, nodegroup: str) -> str:
        """An update of the node group started by someone else (an operator's version or label change), stamped
        ``now``: ``InProgress`` (the node group ``UPDATING``) until ``finish_operations`` or ``settle``."""
        with self._lock:
            update = _Update(str(uuid.uuid4()), cluster, nodegroup, [], self.now)
            self._state.updates.append(update)
            return update.id

    def answer_busy_with(self, code: str, status: int) -> None:
        """The error code and HTTP status an ``UpdateNodegroupConfig`` meets while another update of the node group
        is in progress (``ResourceInUseException``, 409, by default), its message EKS's ``NOT_ACTIVE_MESSAGE``."""
        self._state.busy = (code, status)

    def _eks(
        self, operation: str, where: tuple[str, ...], target: str, method: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        cluster = where[0]
        query = {k: v[0] for k, v in parse_qs(urlsplit(target).query).items()}
        if operation == "ListUpdates":
            ids = [u.id for u in self._state.updates if (u.cluster, u.nodegroup) == (cluster, query["nodegroupName"])]
            return _page(ids, query)
        if operation == "DescribeUpdate":
            found = next((u for u in self._state.updates if u.id == where[1]), None)
            if found is None:
                return _json({"message": f"No update found for ID: {where[1]}"}, 404, "ResourceNotFoundException")
            return _json({"update": found.body()})
        nodegroup = where[1]
        if operation == "UpdateNodegroupConfig":
            return self._update_config(cluster, nodegroup, json.loads(body or b"{}"), method, target, headers, body)
        status, out_headers, out = self._forward(method, target, headers, body)
        if status == 200:  # DescribeNodegroup: the status and size EKS shows
            found = json.loads(out)
            ng = found["nodegroup"]
            group = self.group(self._state.nodegroup_groups[(cluster, nodegroup)])
            running = any(u.status == "InProgress" and u.nodegroup == nodegroup for u in self._state.updates)
            ng["status"] = "UPDATING" if running else ng["status"]
            ng.setdefault("health", {})["issues"] = self._state.health.get(nodegroup, [])
            ng["scalingConfig"]["desiredSize"] = (
                group["DesiredCapacity"] + self._state.shortfall[group["AutoScalingGroupName"]]
            )
            out = json.dumps(found).encode()
        return status, out_headers, out

    def _update_config(
        self,
        cluster: str,
        nodegroup: str,
        asked: dict[str, Any],
        method: str,
        target: str,
        headers: dict[str, str],
        body: bytes,
    ) -> tuple[int, dict[str, str], bytes]:
        with self._lock:
            token = asked.get("clientRequestToken")
            if token and token in self._state.tokens:
                return _json({"update": self._state.tokens[token].body()})
            if any(u.status == "InProgress" and u.nodegroup == nodegroup for u in self._state.updates):
                code, status = self._state.busy
                return _json({"message": NOT_ACTIVE_MESSAGE}, status, code)
            refused = self._outside_scaling(cluster, nodegroup, asked.get("scalingConfig", {}))
            if refused:
                return _json({"message": refused}, 400, "InvalidParameterException")
            status, out_headers, out = self._forward(method, target, headers, body)
            if status != 200:
                return status, out_headers, out
            scaling = asked.get("scalingConfig", {})
            group = self._state.nodegroup_groups[(cluster, nodegroup)]
            if "minSize" in scaling or "maxSize" in scaling:
                bounds = {k[0].upper() + k[1:]: v for k, v in scaling.items() if k in ("minSize", "maxSize")}
                self.direct.autoscaling.update_auto_scaling_group(AutoScalingGroupName=group, **bounds)
            if "desiredSize" in scaling:
                self._set_desired(group, int(scaling["desiredSize"]))
            update = _Update(str(uuid.uuid4()), cluster, nodegroup, json.loads(out)["update"]["params"], self.now)
            self._state.updates.append(update)
            if token:
                self._state.tokens[token] = update
            return _json({"update": update.body()})

    def _outside_scaling(self, cluster: str, nodegroup: str, asked: dict[str, int]) -> str:
        """EKS's refusal of a scaling config whose desired size is outside its bounds, or ""."""
        now = self.direct.eks.describe_nodegroup(clusterName=cluster, nodegroupName=nodegroup)["nodegroup"]
        group = self.group(self._state.nodegroup_groups[(cluster, nodegroup)])
        current = dict(now["scalingConfig"])
        current["desiredSize"] = group["DesiredCapacity"] + self._state.shortfall[group["AutoScalingGroupName"]]
        scaling = current | asked
        if scaling["minSize"] > scaling["desiredSize"]:
            return f"Minimum capacity {scaling['minSize']} can't be greater than desired size {scaling['desiredSize']}"
        if scaling["desiredSize"] > scaling["maxSize"]:
            return "desiredSize can't be greater than maxSize"
        return ""


def _page(ids: list[str], query: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """One page of ``ListUpdates``: ``maxResults`` ids (1..100, default 100) from ``nextToken`` on."""
    try:
        size = int(query.get("maxResults", "100"))
        start = int(base64.urlsafe_b64decode(query["nextToken"]).decode()) if "nextToken" in query else 0
    except ValueError:
        return _json({"message": "The nextToken or maxResults is not valid"}, 400, "InvalidParameterException")
    if not 1 <= size <= 100 or not 0 <= start <= len(ids):
        return _json({"message": "maxResults must be between 1 and 100"}, 400, "InvalidParameterException")
    body: dict[str, Any] = {"updateIds": ids[start : start + size]}
    if start + size < len(ids):
        body["nextToken"] = base64.urlsafe_b64encode(str(start + size).encode()).decode()
    return _json(body)

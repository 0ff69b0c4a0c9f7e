"""How pods leave in the fake Kubernetes API server: the kubelets that finish terminating pods (or, stopped, never
do, and the node lifecycle controller marks their nodes Unknown, until they start again and post Ready), and the
Eviction subresource: graceful deletion and the PodDisruptionBudgets that refuse it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

from tests.fakes.kube_api.selectors import selector_object_matches
from tests.fakes.kube_api.store import ApiError, Obj, ObjectStore, _stamp_time, _time

DEFAULT_TERMINATION_GRACE_SECONDS = 30  # the API server's default for spec.terminationGracePeriodSeconds
# kube-controller-manager's --node-monitor-grace-period (default 50 s since Kubernetes 1.32, 40 s before): how long
# the node lifecycle controller waits for a kubelet's status before it marks the node's conditions Unknown.
NODE_MONITOR_GRACE_PERIOD = timedelta(seconds=50)
NODE_STATUS_UNKNOWN = ("NodeStatusUnknown", "Kubelet stopped posting node status.")  # the controller's reason, message
# What a kubelet posts for each condition of a healthy node: status, reason, message (kubelet pkg/kubelet/nodestatus
# setters.go: ReadyCondition, MemoryPressureCondition, DiskPressureCondition, PIDPressureCondition).
KUBELET_CONDITIONS = {
    "Ready": ("True", "KubeletReady", "kubelet is posting ready status"),
    "MemoryPressure": ("False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    "DiskPressure": ("False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    "PIDPressure": ("False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
}
MULTIPLE_PDBS = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
# API priority and fairness' answer to a request it rejects (apiserver pkg/server/filters/priority-and-fairness.go,
# tooManyRequests; responsewriters.TooManyRequests): 429, reason TooManyRequests, no cause, a Retry-After.
THROTTLED_MESSAGE = "Too many requests, please try again later."


class Evictions(ObjectStore):
    """The kubelets and the Eviction subresource."""

    _kubelets_down: dict[str, datetime]  # node -> the last time its kubelet posted the node's status
    _pods_hung: set[str]  # nodes whose kubelet, alive, cannot finish its terminating pods

    # -- the kubelets: how terminating pods end ---------------------------------------------------------------
    def finish_terminating(self, namespace: str | None = None, name: str | None = None) -> list[str]:
        """The kubelets finish terminating pods now (those matching ``namespace``/``name``; all when None), even
        on a node whose kubelet is stopped; answers the names of the pods removed."""
        with self._lock:
            done = [
                key
                for key, pod in self._objects.items()
                if key[:2] == ("", "pods")
                and pod["metadata"].get("deletionTimestamp")
                and namespace in (None, key[2])
                and name in (None, key[3])
            ]
            for key in done:
                del self._objects[key]
            return [key[3] for key in done]

    def stop_kubelet(self, node: str, since: datetime | None = None) -> None:
        """The node's kubelet is gone (since ``since``, else now, by ``clock``): its terminating pods are never
        finished (until ``finish_terminating``), and once ``NODE_MONITOR_GRACE_PERIOD`` has passed without its status
        the node lifecycle controller marks every condition of the node Unknown, ``Ready`` among them."""
        with self._lock:
            self._kubelets_down[node] = self.clock() if since is None else since

    def hang_pods(self, node: str) -> None:
        """The node's kubelet is alive (it posts the node's status: the node is never marked Unknown) but cannot
        finish its terminating pods: a container stuck in the kernel (in a GPU driver after an Xid error, on a hung
        NFS mount) that SIGKILL does not end, or a container runtime that is down. They stay Terminating (until
        ``finish_terminating``)."""
        with self._lock:
            self._pods_hung.add(node)

    def start_kubelet(self, node: str) -> None:
        """The node's kubelet is back (after ``stop_kubelet``): it finishes its terminating pods again (those past
        their time at the next read) and posts the node's status, each condition it owns as on a healthy node
        (``KUBELET_CONDITIONS``: ``Ready`` True), its ``lastHeartbeatTime`` now and its ``lastTransitionTime`` now
        where the status changed."""
        with self._lock:
            self._kubelets_down.pop(node, None)
            found = self._objects.get(("", "nodes", "", node))
            if found is None:
                return
            now = _stamp_time(self.clock())
            conditions = found.setdefault("status", {}).setdefault("conditions", [])
            if not any(c.get("type") == "Ready" for c in conditions):
                conditions.append({"type": "Ready"})
            for condition in conditions:
                if (posted := KUBELET_CONDITIONS.get(condition.get("type", ""))) is None:
                    continue
                status, reason, message = posted
                if condition.get("status") != status:
                    condition["lastTransitionTime"] = now
                condition.update(status=status, reason=reason, message=message, lastHeartbeatTime=now)
            self._stamp(found["metadata"], new=False)

    def _reap(self) -> None:
        """Remove the terminating pods whose kubelet has finished them: it is up and their time has come. Mark the
        nodes whose kubelet has been silent past the node monitor's grace period (``_mark_unknown``)."""
        now = self.clock()
        for key, pod in list(self._objects.items()):
            stamp = pod["metadata"].get("deletionTimestamp") if key[:2] == ("", "pods") else None
            host = (pod.get("spec") or {}).get("nodeName")
            if stamp and host not in self._kubelets_down and host not in self._pods_hung and now >= _time(stamp):
                del self._objects[key]
        for node, since in self._kubelets_down.items():
            if now >= since + NODE_MONITOR_GRACE_PERIOD:
                self._mark_unknown(node, since, now)

    def _mark_unknown(self, name: str, since: datetime, now: datetime) -> None:
        """As the node lifecycle controller does for a node whose kubelet stopped posting its status
        (``tryUpdateNodeHealth``): each condition not already Unknown becomes Unknown, reason ``NodeStatusUnknown``,
        its ``lastHeartbeatTime`` the kubelet's last and its ``lastTransitionTime`` now; a node that never had a
        ``Ready`` condition gets one so. Its taints (``node.kubernetes.io/unreachable``) are not modelled."""
        node = self._objects.get(("", "nodes", "", name))
        if node is None:
            return
        conditions = node.setdefault("status", {}).setdefault("conditions", [])
        if not any(c.get("type") == "Ready" for c in conditions):
            conditions.append({"type": "Ready"})
        changed = [c for c in conditions if c.get("status") != "Unknown"]
        reason, message = NODE_STATUS_UNKNOWN
        for condition in changed:
            condition.update(
                status="Unknown",
                reason=reason,
                message=message,
                lastHeartbeatTime=_stamp_time(since),
                lastTransitionTime=_stamp_time(now),
            )
        if changed:
            self._stamp(node["metadata"], new=False)

    # -- answers before the eviction's own: admission, authorization, throttling --------------------------------
    def terminate_namespace(self, namespace: str) -> None:
        """The namespace is being deleted: the NamespaceLifecycle admission plugin refuses every create in it, an
        Eviction included, with 403 and a ``NamespaceTerminating`` cause (its pods are left as they are here)."""
        with self._lock:
            self._eviction_refusals()[namespace] = lambda name: ApiError(
                403,
                "Forbidden",
                f'pods "{name}" is forbidden: unable to create new content in namespace {namespace} because it is '
                "being terminated",
                {
                    "name": name,
                    "kind": "pods",
                    "causes": [
                        {
                            "reason": "NamespaceTerminating",
                            "message": f"namespace {namespace} is being terminated",
                            "field": "metadata.namespace",
                        }
                    ],
                },
            )

    def deny_evictions(self, namespace: str, webhook: str | None = None, reason: str = "") -> None:
        """Evictions in the namespace are refused with 403: by RBAC (the role does not grant create on
        pods/eviction there), or, given ``webhook``, by that validating admission webhook with ``reason``."""
        user = "system:serviceaccount:leadtime:leadtime"

        def refusal(name: str) -> ApiError:
            if webhook is not None:
                message = f'admission webhook "{webhook}" denied the request: {reason}'
                return ApiError(403, "Forbidden", message)
            return ApiError(
                403,
                "Forbidden",
                f'pods "{name}" is forbidden: User "{user}" cannot create resource "pods/eviction" in API group "" in '
                f'the namespace "{namespace}"',
                {"name": name, "kind": "pods"},
            )

        with self._lock:
            self._eviction_refusals()[namespace] = refusal

    def throttle_evictions(self, count: int, retry_after_s: int = 1) -> None:
        """The next ``count`` evictions are rejected by API priority and fairness: 429, no cause, with its
        Retry-After (here as the Status's ``details.retryAfterSeconds``: the fake sets no header)."""
        with self._lock:
            self.__dict__["_throttled_evictions"] = (count, retry_after_s)

    def _eviction_refusals(self) -> dict[str, Callable[[str], ApiError]]:
        found: dict[str, Callable[[str], ApiError]] = self.__dict__.setdefault("_refusals_by_namespace", {})
        return found

    # -- the Eviction subresource -----------------------------------------------------------------------------
    def _evict(self, namespace: str, name: str) -> tuple[int, Obj]:
        """The Eviction subresource: a refusal set up above first; then a pod that is finished, Pending or already
        terminating is deleted without looking at budgets; otherwise more than one covering PDB is a 500, a PDB
        that allows no disruption a 429, and an allowed eviction deletes the pod gracefully."""
        count, retry_after_s = self.__dict__.get("_throttled_evictions", (0, 1))
        if count > 0:
            self.__dict__["_throttled_evictions"] = (count - 1, retry_after_s)
            raise ApiError(429, "TooManyRequests", THROTTLED_MESSAGE, {"retryAfterSeconds": retry_after_s})
        if (refuse := self._eviction_refusals().get(namespace)) is not None:
            raise refuse(name)
        key = ("", "pods", namespace, name)
        pod = self._objects.get(key)
        if pod is None:
            raise ApiError(404, "NotFound", f'pods "{name}" not found', {"name": name, "kind": "pods"})
        phase = (pod.get("status") or {}).get("phase")
        if phase not in ("Succeeded", "Failed", "Pending") and not pod["metadata"].get("deletionTimestamp"):
            pdbs = list(self._pdbs_covering(pod))
            if len(pdbs) > 1:
                raise ApiError(500, "", MULTIPLE_PDBS)
            for pdb in pdbs:
                allowed, healthy, desired = self._disruptions_allowed(pdb)
                if allowed < 1 and not (not _is_healthy(pod) and 0 < desired <= healthy):
                    pdb_name = pdb["metadata"]["name"]
                    raise ApiError(
                        429,
                        "TooManyRequests",
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                        {
                            "causes": [
                                {
                                    "reason": "DisruptionBudget",
                                    "message": f"The disruption budget {pdb_name} needs {desired} healthy pods "
                                    f"and has {healthy} currently",
                                }
                            ]
                        },
                    )
        self._delete_gracefully(key, pod)
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    def _delete_gracefully(self, key: tuple[str, str, str, str], pod: Obj) -> None:
        """A DELETE of the pod without options: its own grace period, 0 for a pod on no node or a finished one;
        0 deletes at once, else the pod is marked and left to its kubelet; a pod already terminating is left as
        it is."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        if meta.get("deletionTimestamp"):
            return
        grace = spec.get("terminationGracePeriodSeconds")
        grace = DEFAULT_TERMINATION_GRACE_SECONDS if grace is None else max(int(grace), 0)
        if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            grace = 0
        if grace == 0:
            del self._objects[key]
            return
        meta["deletionTimestamp"] = _stamp_time(self.clock() + timedelta(seconds=grace), round_up=True)
        meta["deletionGracePeriodSeconds"] = grace
        self._stamp(meta, new=False)

    def _pdbs_covering(self, pod: Obj) -> Iterator[Obj]:
        labels = pod["metadata"].get("labels") or {}
        for (g, r, ns, _), pdb in self._objects.items():
            if (g, r, ns) == ("policy", "poddisruptionbudgets", pod["metadata"]["namespace"]):
                selector = (pdb.get("spec") or {}).get("selector") or {}
                # an empty selector matches no pod here (the eviction subresource's own rule)
                if (selector.get("matchLabels") or selector.get("matchExpressions")) and selector_object_matches(
                    selector, labels
                ):
                    yield pdb

    def _disruptions_allowed(self, pdb: Obj) -> tuple[int, int, int]:
        """(disruptions allowed, healthy pods, desired healthy) for a PDB, counting matching pods directly."""
        spec, ns = pdb.get("spec") or {}, pdb["metadata"]["namespace"]
        selector = spec.get("selector") or {}
        pods = [
            p
            for (g, r, pns, _), p in self._objects.items()
            if (g, r, pns) == ("", "pods", ns) and selector_object_matches(selector, p["metadata"].get("labels") or {})
        ]
        # The disruption controller takes the expected count from the owning controller's scale; a test sets it
        # as status.expectedPods (pods evicted and not yet replaced still count), else the matching pods count.
        expected = (pdb.get("status") or {}).get("expectedPods", len(pods))
        healthy = sum(1 for p in pods if _is_healthy(p))
        if spec.get("maxUnavailable") is not None:
            desired = expected - _scaled(spec["maxUnavailable"], expected, round_up=True)
        else:
            desired = _scaled(spec.get("minAvailable", 1), expected, round_up=True)
        return healthy - max(desired, 0), healthy, max(desired, 0)


def _scaled(value: int | str, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        exact = int(value[:-1]) * total / 100
        return int(-(-exact // 1)) if round_up else int(exact)
    return int(value)


def _is_healthy(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")

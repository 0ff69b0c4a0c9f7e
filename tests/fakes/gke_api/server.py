"""``FakeGkeApi``: the fake GKE v1 API of node pools and operations that the real ``ClusterManagerClient`` (and,
through ``InstanceGroups``, ``InstanceGroupManagersClient``) talks to: seeding, the passing of lead time, a node
pool's calls (create, delete, setSize, setAutoscaling) and the refusals GKE gives them (a busy pool or cluster, the
concurrent operations quota, a stockout refused at the call), and the routing of each request."""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime
from typing import Any

from tests.fakes.gke_api.instance_groups import InstanceGroups
from tests.fakes.gke_api.resources import (
    _COMPUTE,
    SHOWN_ON,
    STOCKOUT_MESSAGE,
    ZERO_MAX_REFUSAL,
    Instance,
    Mig,
    NodePool,
    Operation,
    Stockout,
)
from tests.fakes.google_api import GoogleApiError, GoogleJsonServer, Obj


class FakeGkeApi(InstanceGroups, GoogleJsonServer):
    name = "fake-gke"

    def __init__(
        self,
        project: str = "test-project",
        location: str = "us-central1",
        cluster: str = "ml",
        node_locations: tuple[str, ...] = ("us-central1-a", "us-central1-b", "us-central1-c"),
        concurrent_operations_quota: int | None = None,
    ) -> None:
        super().__init__()
        # Operations the cluster may run at once (None: no limit); one more is refused with 429 (see _check_quota).
        self.concurrent_operations_quota = concurrent_operations_quota
        self.project, self.location, self.cluster = project, location, cluster
        self.node_locations = node_locations  # the cluster's default zones for its node pools
        self.now = datetime(2024, 5, 1, tzinfo=UTC)  # when operations start and end; tests move it
        self.pools: dict[str, NodePool] = {}
        self.operations: dict[str, Operation] = {}
        self.stockouts: dict[str, Stockout] = {}  # by zone
        self.lost_groups: set[tuple[str, str]] = set()  # (zone, name) of groups deleted under a node pool
        self._ids = itertools.count(1)
        self._short_sizes: set[str] = set()  # setSize operations that went on through a step whose creates failed
        # The node service accounts the caller may act as (iam.serviceAccounts.actAs); None: not checked. Creating a
        # node pool attaches its NodeConfig.serviceAccount (unset: "default", the project's Compute Engine default
        # service account, per the GKE v1 REST reference) to its VMs, which needs actAs on it: GKE's "Configure GKE
        # node service accounts" grants roles/iam.serviceAccountUser on it so that principals "can use that service
        # account to create clusters and node pools". The refusal's words are Compute Engine's for a VM created as an
        # account the caller cannot act as ("The user does not have access to service account ...").
        self.act_as: set[str] | None = None

    def start(self) -> FakeGkeApi:
        super().start()
        return self

    # -- seeding, time and faults ------------------------------------------------------------------------------
    def add_pool(self, name: str, nodes: int = 0, zones: tuple[str, ...] = ("us-central1-a",), **spec: Any) -> None:
        """A RUNNING node pool with ``nodes`` running instances spread over ``zones`` (first zones get more)."""
        with self._lock:
            pool = NodePool(name, {"name": name, "locations": list(zones), **spec}, [], status="RUNNING")
            pool.migs = [self._new_mig(name, i, zone) for i, zone in enumerate(zones)]
            self.pools[name] = pool
            self._resize(pool, nodes)
            for mig in pool.migs:
                for inst in mig.instances:
                    inst.action = "NONE"

    def report_error(
        self, name: str, status: str = "ERROR", conditions: tuple[Obj, ...] = (), message: str = ""
    ) -> None:
        """GKE puts the pool in an error state, its instances left as they are: it may stay so while its nodes run,
        e.g. after a stockout or an exhausted quota its groups' retries overcame (k8s-config-connector#321)."""
        with self._lock:
            pool = self.pools[name]
            pool.status, pool.status_message, pool.conditions = status, message, list(conditions)

    def stockout(
        self,
        zone: str = "us-central1-a",
        mode: str = "operation",
        room: int = 0,
        shown_on: tuple[str, ...] = SHOWN_ON,
        code: str = "ZONE_RESOURCE_POOL_EXHAUSTED",
        message: str = "",
    ) -> None:
        """``code`` and ``message``: what each instance the zone cannot create says on its ``lastAttempt.errors``
        ("": Compute's words for a zone out of resources, ``zone_stockout_message``)."""
        with self._lock:
            self.stockouts[zone] = Stockout(mode, room, shown_on, code, message)

    def autoscale(self, name: str, nodes: int) -> None:
        """GKE's own autoscaler resizes the pool (no operation: it resizes the instance groups directly)."""
        with self._lock:
            self._resize(self.pools[name], nodes)

    def restock(self) -> None:
        with self._lock:
            self.stockouts.clear()

    def finish_operations(self) -> None:
        """Running operations finish (GKE's resize operations end long before the new nodes are up)."""
        with self._lock:
            for op in self.operations.values():
                self._finish(op)

    def upgrade_cluster(self) -> str:
        """GKE starts an operation on the cluster itself (a control plane upgrade); ``advance()`` or
        ``finish_operations()`` ends it. Returns its name."""
        with self._lock:
            return str(self._start("UPGRADE_MASTER", self._cluster_path())["name"])

    def upgrade_nodes(self, name: str) -> str:
        """GKE upgrades the nodes of pool ``name`` (``UPGRADE_NODES``, ``targetLink`` the pool: an auto-upgrade or an
        operator's); ``advance()`` or ``finish_operations()`` ends it. Returns its name."""
        with self._lock:
            return str(self._start("UPGRADE_NODES", self.pools[name])["name"])

    def advance(self) -> None:
        """Lead time passes: instances arrive (unless their zone is stocked out) and running operations finish,
        with an error naming the stockout if some of the instances they asked for could not be created; a setSize
        whose creates failed finishes so on the next step, not on the one they failed in."""
        with self._lock:
            failures: dict[str, Obj] = {}  # node pool -> the error of the operation that grew it
            for pool in list(self.pools.values()):
                short: list[tuple[Mig, list[Instance]]] = []  # zones with instances that could not be created
                shown: list[tuple[Mig, list[Instance]]] = []  # those whose stockout shows on the operation
                for mig in pool.migs:
                    if stuck := self._create_instances(mig):
                        short.append((mig, stuck))
                        out = self.stockouts[mig.zone]
                        shown += [(mig, stuck)] if "operation" in out.shown_on else []
                    mig.instances = [i for i in mig.instances if i.action != "DELETING"]
                if shown:
                    failures[pool.name] = {"code": 8, "message": self._operation_message(shown)}
                if pool.status == "STOPPING":
                    del self.pools[pool.name]
                elif pool.status == "PROVISIONING":
                    ready = all(i.action == "NONE" for m in pool.migs for i in m.instances)
                    pool.status = "RUNNING" if ready else pool.status
                    if short:
                        self._created_short(pool, short)
            for op in self.operations.values():
                failing = op.status == "RUNNING" and op.target.rsplit("/", 1)[1] in failures
                if failing and op.op_type == "SET_NODE_POOL_SIZE" and op.name not in self._short_sizes:
                    # GKE's setSize waits for its groups' creates and gives up only after a timeout ("Not all
                    # instances running in IGM after 35m0s", REFERENCE.md): it runs on through the step in which
                    # they fail, and ends with their error on a later one.
                    self._short_sizes.add(op.name)
                elif op.status == "RUNNING":
                    self._finish(op)
                    op.error = failures.get(op.target.rsplit("/", 1)[1], op.error)

    def _operation_message(self, short: list[tuple[Mig, list[Instance]]]) -> str:
        """The error of an operation whose groups fell short: the first short zone's group in GKE's words, then one
        sentence naming each further short zone, as GKE writes a stockout of several zones (cluster-toolkit pull
        request 6278)."""
        first, stuck = short[0]
        more = "".join(
            f" The zone 'projects/{self.project}/zones/{mig.zone}' does not have enough resources available to "
            "fulfill the request."
            for mig, _ in short[1:]
        )
        return self._igm_message(first, stuck) + more

    def _created_short(self, pool: NodePool, short: list[tuple[Mig, list[Instance]]]) -> None:
        """A pool being created that a stockout left short: RUNNING_WITH_ERROR when some of its instances run
        (terraform-provider-google#3304), ERROR when none does (k8s-config-connector#321), said in its message, zone
        by zone, and in its conditions: each instance that failed (GCE_STOCKOUT) and each zone's group."""
        running = any(i.action == "NONE" for m in pool.migs for i in m.instances)
        pool.status = "RUNNING_WITH_ERROR" if running else "ERROR"
        pool.status_message = "; ".join(f"{mig.zone}: {self._igm_message(mig, stuck)}" for mig, stuck in short)
        pool.conditions = []
        for mig, stuck in short:
            failed = {"code": "GCE_STOCKOUT", "canonicalCode": "RESOURCE_EXHAUSTED"}
            pool.conditions.append(failed | {"message": self._instance_failure(mig, stuck[0])})
            pool.conditions.append({"message": self._igm_message(mig, stuck)})

    # -- HTTP -----------------------------------------------------------------------------------------------------
    def route(self, method: str, path: str, query: dict[str, str], body: Obj) -> Obj:
        base = f"/v1/projects/{self.project}/locations/{self.location}"
        pools_path = f"{base}/clusters/{self.cluster}/nodePools"
        if m := re.fullmatch(r"/compute/v1/projects/[^/]+/zones/([^/]+)/instanceGroupManagers/([^/]+)(/\w+)?", path):
            return self._compute(method, m[1], m[2], (m[3] or "").lstrip("/"), query, body)
        if path == f"{base}/operations" and method == "GET":
            return {"operations": [self._operation_json(op) for op in self.operations.values()]}
        if path.startswith(f"{base}/operations/") and method == "GET":
            return self._operation_json(self._find_operation(path.rsplit("/", 1)[1]))
        if path == pools_path and method == "GET":
            return {"nodePools": [self._pool_json(p) for p in self.pools.values()]}
        if path == pools_path and method == "POST":
            self._check_quota()
            return self._create_pool(body["nodePool"])
        if m := re.fullmatch(re.escape(pools_path) + r"/([^/:]+)(?::(\w+))?", path):
            return self._pool_call(method, self._find_pool(m[1]), m[2] or "", body)
        raise GoogleApiError(404, f"unknown path {path}")

    def _pool_call(self, method: str, pool: NodePool, verb: str, body: Obj) -> Obj:
        if method == "GET" and not verb:
            return self._pool_json(pool)
        self._check_not_busy(pool)
        self._check_quota()
        if method == "DELETE" and not verb:
            pool.status = "STOPPING"
            return self._start("DELETE_NODE_POOL", pool)
        if method == "POST" and verb == "setSize":
            per_zone = int(body.get("nodeCount", 0))  # applied to every zone of the pool
            self._check_capacity(pool, per_zone)
            for mig in pool.migs:
                self._resize_mig(mig, per_zone)
            return self._start("SET_NODE_POOL_SIZE", pool)
        if method == "POST" and verb == "setAutoscaling":
            # New bounds only: the pool keeps its size, even below a raised minimum (GKE's autoscaler adds nodes
            # for pods that cannot be scheduled, never for its bounds; see REFERENCE.md). ``autoscale`` plays it.
            pool.spec["autoscaling"] = _checked_autoscaling(body.get("autoscaling", {}))
            return self._start("UPDATE_CLUSTER", pool)
        raise GoogleApiError(400, f"unsupported call {method} {verb} on a node pool")

    def _create_pool(self, spec: Obj) -> Obj:
        name = spec.get("name", "")
        if name in self.pools:
            raise GoogleApiError(409, f"Already exists: projects/{self.project}/.../nodePools/{name}.")
        account = (spec.get("config") or {}).get("serviceAccount") or "default"
        if self.act_as is not None and account not in self.act_as:
            raise GoogleApiError(
                403,
                f"The user does not have access to service account {account!r}. Ask a project owner to grant you the "
                "iam.serviceAccountUser role on the service account (iam.serviceAccounts.actAs).",
            )
        zones = tuple(spec.get("locations") or self.node_locations)  # unset: the cluster's default node locations
        pool = NodePool(name, spec, [self._new_mig(name, i, z) for i, z in enumerate(zones)])
        per_zone = int(spec.get("initialNodeCount", 0))  # per zone, like setSize
        self._check_capacity(pool, per_zone)
        self.pools[name] = pool
        for mig in pool.migs:
            self._resize_mig(mig, per_zone)
        return self._start("CREATE_NODE_POOL", pool)

    def _new_mig(self, pool: str, index: int, zone: str) -> Mig:
        """A node pool's instance group in ``zone``, created ``now`` (Compute's ``creationTimestamp``)."""
        return Mig(f"gke-{self.cluster}-{pool}-{index}-grp", zone, created=self.now.isoformat(timespec="milliseconds"))

    def _check_capacity(self, pool: NodePool, per_zone: int) -> None:
        """A call growing a zone that refuses (stockout mode "http") is refused whole."""
        refused = [m for m in pool.migs if per_zone > m.target_size and self._refuses(m.zone)]
        if refused:
            raise GoogleApiError(503, f"Insufficient capacity for node pool {pool.name}: {STOCKOUT_MESSAGE}")

    def _check_not_busy(self, pool: NodePool) -> None:
        """A running operation on this pool, or on the cluster itself, refuses changes to the pool (operations of
        the location's other clusters do not)."""
        for op in self.operations.values():
            if op.status != "RUNNING":
                continue
            if op.target == self._cluster_path():
                raise GoogleApiError(
                    400, f"Cluster is running incompatible operation {op.name}.", "FAILED_PRECONDITION"
                )
            if op.target == f"{self._cluster_path()}/nodePools/{pool.name}":
                raise GoogleApiError(
                    400,
                    f"Operation {op.name} is currently operating on node pool {pool.name}. "
                    "Please wait and try again once it is done.",
                    "FAILED_PRECONDITION",
                )

    def _check_quota(self) -> None:
        """With a concurrent operations quota, a change that would start one operation too many is refused, in the
        words GKE uses (terraform-provider-google issue 15205)."""
        running = sum(1 for op in self.operations.values() if op.status == "RUNNING")
        quota = self.concurrent_operations_quota
        if quota is not None and running >= quota:
            raise GoogleApiError(
                429,
                f'Too many operations: cluster "{self.cluster}" hits the concurrent operations quota {quota}, '
                "please try again later.",
            )

    def _resize(self, pool: NodePool, nodes: int) -> None:
        """Seeding and GKE's own autoscaler: ``nodes`` in total, spread over the zones (first zones get more)."""
        per_zone = [nodes // len(pool.migs) + (1 if i < nodes % len(pool.migs) else 0) for i in range(len(pool.migs))]
        for mig, want in zip(pool.migs, per_zone, strict=True):
            self._resize_mig(mig, want)

    def _start(self, op_type: str, target: NodePool | str) -> Obj:
        """An operation on a node pool, or on what ``target`` names (the cluster's path)."""
        serial = next(self._ids)
        name = f"operation-{serial}-{op_type.lower()}"
        if isinstance(target, NodePool):
            target = f"{self._cluster_path()}/nodePools/{target.name}"
        self.operations[name] = Operation(name, op_type, target, start_time=self._timestamp(serial))
        return self._operation_json(self.operations[name])

    def _finish(self, op: Operation) -> None:
        if op.status != "DONE":
            op.status, op.end_time = "DONE", self._timestamp(next(self._ids))

    def _timestamp(self, serial: int) -> str:
        """``now`` in RFC 3339 with nanoseconds, as GKE writes it; ``serial`` orders what happens in one instant."""
        return f"{self.now:%Y-%m-%dT%H:%M:%S}.{serial:09d}Z"

    def _cluster_path(self) -> str:
        """How ``targetLink`` names the cluster (GKE's is a full URL ending so: ``.../clusters/C[/nodePools/NP]``)."""
        return f"/projects/{self.project}/locations/{self.location}/clusters/{self.cluster}"

    def _find_pool(self, name: str) -> NodePool:
        if name not in self.pools:
            raise GoogleApiError(404, f"Not found: projects/{self.project}/locations/{self.location}/.../{name}.")
        return self.pools[name]

    def _find_operation(self, name: str) -> Operation:
        if name not in self.operations:
            raise GoogleApiError(404, f"Not found: operation {name}.")
        return self.operations[name]

    def _pool_json(self, pool: NodePool) -> Obj:
        urls = [f"{_COMPUTE}/projects/{self.project}/zones/{m.zone}/instanceGroupManagers/{m.name}" for m in pool.migs]
        out = {**pool.spec, "status": pool.status, "statusMessage": pool.status_message, "instanceGroupUrls": urls}
        return out | ({"conditions": pool.conditions} if pool.conditions else {})

    def _operation_json(self, op: Operation) -> Obj:
        out: Obj = {"name": op.name, "operationType": op.op_type, "status": op.status, "targetLink": op.target}
        out["startTime"] = op.start_time
        if op.end_time:
            out["endTime"] = op.end_time
        if op.error is not None and op.status == "DONE":
            out["error"] = op.error
            out["statusMessage"] = op.error["message"]
        return out


def _checked_autoscaling(autoscaling: Obj) -> Obj:
    """GKE refuses per-zone bounds (``min/maxNodeCount``) together with total ones (``totalMin/totalMaxNodeCount``),
    and autoscaling on with a maximum of 0 in both forms (proto3 JSON leaves zeros out, so a 0-0 body is just
    ``{"enabled": true}``): "Node_pool_autoscaling.max_node_count and node_pool_autoscaling.total_max_node_count cannot
    be both set to zero." (see REFERENCE.md)."""
    per_zone = [k for k in ("minNodeCount", "maxNodeCount") if autoscaling.get(k)]
    total = [k for k in ("totalMinNodeCount", "totalMaxNodeCount") if autoscaling.get(k)]
    if per_zone and total:
        raise GoogleApiError(400, f"autoscaling: {per_zone} cannot be used with {total}; set per-zone or total limits")
    if autoscaling.get("enabled") and not autoscaling.get("maxNodeCount") and not autoscaling.get("totalMaxNodeCount"):
        raise GoogleApiError(400, ZERO_MAX_REFUSAL)
    return autoscaling

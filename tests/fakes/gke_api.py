"""FakeGkeApi: GKE v1 node pools and operations, plus the Compute Engine managed instance groups behind them.

The real ``ClusterManagerClient`` and ``InstanceGroupManagersClient`` (REST transport, anonymous credentials,
``api_endpoint`` = ``fake.url``) talk to it. Served:

    GET    /v1/projects/P/locations/L/clusters/C/nodePools[/NP]        list / get node pools
    POST   /v1/projects/P/locations/L/clusters/C/nodePools             create (an operation)
    DELETE /v1/projects/P/locations/L/clusters/C/nodePools/NP          delete (an operation)
    POST   /v1/.../nodePools/NP:setSize | :setAutoscaling              resize / autoscaling (an operation)
    GET    /v1/projects/P/locations/L/operations[/OP]                  list / get operations
    GET    /compute/v1/projects/P/zones/Z/instanceGroupManagers/M      a pool's MIG (targetSize)
    POST   /compute/v1/.../instanceGroupManagers/M/listManagedInstances    its instances (paged)
    POST   /compute/v1/.../instanceGroupManagers/M/resize?size=N       one zone's group to N instances
    POST   /compute/v1/.../instanceGroupManagers/M/deleteInstances     delete chosen instances

Sizes are per zone where the references say so (``tests/fakes/REFERENCE.md`` lists every fact relied on here, with
its source): ``setSize``'s ``nodeCount`` and ``initialNodeCount`` are applied to each zone's instance group, so a
pool in three zones set to 4 has 12 nodes; a MIG ``resize`` changes its own zone only.

Nothing moves on its own: ``advance()`` is the passing of lead time (operations finish, creating instances become
running unless their zone is stocked out, deleting ones go away, provisioning pools become RUNNING). Faults:
``fail_next`` (any status and message), ``stockout(zone, mode)`` where mode "http" refuses the call the way GKE
does and mode "operation" accepts it and fails later: the zone creates ``room`` more instances, the others stay
CREATING and the failure shows where ``shown_on`` says: on each instance's ``lastAttempt.errors``
(ZONE_RESOURCE_POOL_EXHAUSTED, as cluster-autoscaler reads it) and/or on the error of the operation that asked for
them ("Not all instances running in IGM ...", the shape GKE reports, e.g. terraform-provider-google issue 3304; one
error naming every zone that fell short, as in cluster-toolkit pull request 6278).
A pool being created that the stockout leaves short becomes RUNNING_WITH_ERROR when some of its instances run, ERROR
when none does, its ``statusMessage`` naming each short zone in the same words ("us-central1-a: ... Not all instances
running in IGM ...") and in its ``conditions`` (GCE_STOCKOUT for each instance that failed, and each zone's group).
``lose_group(pool, zone)`` deletes a zone's group under a node pool that still lists it (reads of it answer 404).
``restock()`` ends it: instances still being created come up on the next ``advance()`` (the group keeps retrying);
the pool's status, message and conditions stay as they were, as GKE's do. ``report_error`` puts a pool in ERROR (or
another status) with conditions of a test's choosing while its instances run.
``upgrade_cluster()`` starts an operation on the cluster itself (as GKE's own upgrades do): until it finishes, every
change to a node pool is refused with 400 FAILED_PRECONDITION "Cluster is running incompatible operation ...".
With ``concurrent_operations_quota`` N, a change while N operations run is refused with 429 "Too many operations".

Operations carry ``startTime`` and, once done, ``endTime`` at ``now`` (a test moves it); the cluster is regional, so
a node pool created without ``locations`` gets the cluster's ``node_locations`` (``initialNodeCount`` in each).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests.fakes.google_api import GoogleApiError, GoogleJsonServer, Obj

# What a refused call says of a zone out of resources (the fake's words, the code first, as its 503s read).
STOCKOUT_MESSAGE = "ZONE_RESOURCE_POOL_EXHAUSTED: The zone does not have enough resources available (GCE_STOCKOUT)"
# GKE's answer to autoscaling on with no maximum (terraform-google-kubernetes-engine pull request 1554).
ZERO_MAX_REFUSAL = (
    "Node_pool_autoscaling.max_node_count and node_pool_autoscaling.total_max_node_count cannot be both set to zero."
)
_COMPUTE = "https://www.googleapis.com/compute/v1"
SHOWN_ON = ("instances", "operation")


@dataclass
class Stockout:
    mode: str  # "http": the call is refused; "operation": the call is accepted and the creates fail later
    room: int = 0  # instances the zone can still create before it runs out (mode "operation")
    shown_on: tuple[str, ...] = SHOWN_ON  # where a late failure shows: instances' last attempt, the operation
    # What an instance's lastAttempt.errors says (mode "operation"): a stockout, or e.g. QUOTA_EXCEEDED with Compute's
    # "Quota '...' exceeded. Limit: ..." (tests/fakes/REFERENCE.md); "": Compute's stockout message for the zone
    # (``zone_stockout_message``), its code apart
    code: str = "ZONE_RESOURCE_POOL_EXHAUSTED"
    message: str = ""


def zone_stockout_message(zone: str, project: str = "test-project") -> str:
    """Compute's message on the last attempt of an instance its zone has no resources for, the code
    (ZONE_RESOURCE_POOL_EXHAUSTED) sent apart from it (tests/fakes/REFERENCE.md)."""
    return (
        f"The zone 'projects/{project}/zones/{zone}' does not have enough resources available to fulfill the request. "
        " Try a different zone, or try again later."
    )


_INSTANCE_IDS = itertools.count(4_000_000_000_000_000_001)
_NOT_CREATED = ("CREATING", "RECREATING")
# The instanceStatus of the VM of an instance whose group is not creating it, by currentAction (REFERENCE.md): NONE,
# VERIFYING (created, being verified), REFRESHING (changed without stopping it) and ABANDONING (leaving the group) run;
# a restart stops and starts it (STAGING: preparing it for boot again), a delete stops it first
_VM_STATUS = {"RESTARTING": "STAGING", "DELETING": "STOPPING"}


@dataclass
class Instance:
    """A managed instance. Its ``id`` is Compute's id of its VM: none while no VM exists (being created or recreated
    and no ``status`` set), a new one each time a VM is created for it; setting ``action`` keeps it so, and a test
    creates the VM of an instance still CREATING or RECREATING by setting ``status`` (PROVISIONING, STAGING, RUNNING:
    Compute gives the id once the VM exists, while the group's action goes on). Setting ``action`` ends a ``status`` a
    test set (REFERENCE.md). A recreate deletes the old VM before it creates the new one, and the deletion may wait
    up to 60 s after connection draining: a test that sets ``status`` STOPPING on an instance put under RECREATING
    lists it with its old VM's id, kept until another status or action is set (REFERENCE.md)."""

    name: str
    action: str = "CREATING"  # CREATING | RECREATING | NONE (running) | VERIFYING | ... | DELETING (currentAction)
    error: str = ""
    error_code: str = "ZONE_RESOURCE_POOL_EXHAUSTED"
    id: str = field(default="", init=False)
    # The instanceStatus a test sets (``set_instance_status``); None: the one its action gives, "" none (no VM)
    status: str | None = None

    def __post_init__(self) -> None:
        self._renew_id()

    def __setattr__(self, key: str, value: Any) -> None:
        if key == "action" and value == "RECREATING" and getattr(self, "action", None) != "RECREATING":
            super().__setattr__("_old_vm", getattr(self, "id", ""))  # the VM the recreate deletes first
        super().__setattr__(key, value)
        if key == "action":
            super().__setattr__("status", None)
        if key in ("action", "status"):
            self._renew_id()

    @property
    def instance_status(self) -> str:
        """What Compute answers as ``instanceStatus``: "" when no VM exists."""
        if self.status is not None or not self.id:
            return self.status or ""
        return _VM_STATUS.get(self.action, "RUNNING")

    def _renew_id(self) -> None:
        status, old_vm = getattr(self, "status", None), getattr(self, "_old_vm", "")
        if self.action == "RECREATING" and status == "STOPPING" and old_vm:
            super().__setattr__("id", old_vm)  # its old VM, still being deleted
        elif self.action in _NOT_CREATED and not status:
            super().__setattr__("id", "")
        elif not getattr(self, "id", "") or (self.action == "RECREATING" and self.id == old_vm):
            super().__setattr__("id", str(next(_INSTANCE_IDS)))


@dataclass
class Mig:
    name: str
    zone: str
    target_size: int = 0
    instances: list[Instance] = field(default_factory=list)
    created: str = ""  # creationTimestamp (RFC 3339), set when the fake creates it


@dataclass
class NodePool:
    name: str
    spec: Obj
    migs: list[Mig]
    status: str = "PROVISIONING"
    status_message: str = ""  # deprecated in GKE's API for conditions, still sent
    conditions: list[Obj] = field(default_factory=list)  # StatusCondition: code, canonicalCode, message


@dataclass
class Operation:
    name: str
    op_type: str
    target: str
    status: str = "RUNNING"
    error: Obj | None = None
    start_time: str = ""
    end_time: str = ""


class FakeGkeApi(GoogleJsonServer):
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

    def set_instance_status(self, name: str, status: str) -> None:
        """Compute reports ``status`` as the ``instanceStatus`` of each instance of pool ``name`` still being created,
        e.g. RUNNING for one whose VM runs while the group's action is still CREATING and its last attempt keeps an
        earlier error, with the VM's id; "" leaves both out: no VM (REFERENCE.md)."""
        with self._lock:
            for inst in (i for m in self.pools[name].migs for i in m.instances if i.action in _NOT_CREATED):
                inst.status = status

    def autoscale(self, name: str, nodes: int) -> None:
        """GKE's own autoscaler resizes the pool (no operation: it resizes the instance groups directly)."""
        with self._lock:
            self._resize(self.pools[name], nodes)

    def lose_group(self, name: str, zone: str) -> None:
        """The instance group of pool ``name`` in ``zone`` is deleted, its instances with it, while the node pool
        still lists its URL in ``instanceGroupUrls``: reading the group answers 404 (terraform-provider-google issues
        4314 and 17024)."""
        with self._lock:
            mig = next(m for m in self.pools[name].migs if m.zone == zone)
            mig.instances, mig.target_size = [], 0
            self.lost_groups.add((zone, mig.name))

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

    def advance(self) -> None:
        """Lead time passes: instances arrive (unless their zone is stocked out) and running operations finish,
        with an error naming the stockout if some of the instances they asked for could not be created."""
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
                if op.status == "RUNNING":
                    self._finish(op)
                    op.error = failures.get(op.target.rsplit("/", 1)[1], op.error)

    def _create_instances(self, mig: Mig) -> list[Instance]:
        """Instances being created come up, as far as the zone has room; returns those that could not (only in a
        zone stocked out in mode "operation")."""
        out = self.stockouts.get(mig.zone)
        late = out if out is not None and out.mode == "operation" else None
        creating = [i for i in mig.instances if i.action == "CREATING"]
        for inst in creating:
            if late is None or late.room > 0:
                inst.action, inst.error = "NONE", ""
                if late is not None:
                    late.room -= 1
            elif "instances" in late.shown_on:
                inst.error = late.message or zone_stockout_message(mig.zone, self.project)
                inst.error_code = late.code
        return [i for i in creating if i.action == "CREATING"]

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

    def _igm_message(self, mig: Mig, stuck: list[Instance]) -> str:
        """GKE's words for a zone's group that could not create all its instances."""
        running = sum(1 for i in mig.instances if i.action == "NONE")
        return (
            f"Google Compute Engine: Not all instances running in IGM after 35m0s. Expected {mig.target_size}, "
            f"running {running}, transitioning {len(stuck)}. Current errors: "
            f"[ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS]: {self._instance_failure(mig, stuck[0])}"
        )

    def _instance_failure(self, mig: Mig, inst: Instance) -> str:
        return (
            f"Instance '{inst.name}' creation failed: The zone 'projects/{self.project}/zones/{mig.zone}' does not "
            "have enough resources available to fulfill the request. '(resource type:compute)'."
        )

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

    def _refuses(self, zone: str) -> bool:
        out = self.stockouts.get(zone)
        return out is not None and out.mode == "http"

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

    def _resize_mig(self, mig: Mig, want: int) -> None:
        """One zone's group to ``want`` instances; shrinking drops creating instances first, then the newest."""
        live = [i for i in mig.instances if i.action != "DELETING"]
        while len(live) < want:
            inst = Instance(f"{_base_instance_name(mig)}-{next(self._ids):04d}")
            mig.instances.append(inst)
            live.append(inst)
        surplus = len(live) - want
        for inst in sorted(live, key=lambda i: (i.action != "CREATING", -live.index(i)))[:surplus]:
            inst.action = "DELETING"
        mig.target_size = want

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

    # -- Compute Engine managed instance groups ---------------------------------------------------------------
    def _compute(self, method: str, zone: str, name: str, verb: str, query: dict[str, str], body: Obj) -> Obj:
        mig = next((m for p in self.pools.values() for m in p.migs if m.name == name and m.zone == zone), None)
        if mig is None or (zone, name) in self.lost_groups:
            where = f"projects/{self.project}/zones/{zone}/instanceGroupManagers/{name}"
            raise GoogleApiError(404, f"The resource '{where}' was not found", reason="notFound")
        if method == "GET" and not verb:
            stable = all(i.action == "NONE" for i in mig.instances)
            group = {"name": mig.name, "zone": zone, "targetSize": mig.target_size, "status": {"isStable": stable}}
            return group | {"baseInstanceName": _base_instance_name(mig), "creationTimestamp": mig.created}
        if verb == "listManagedInstances":
            start, size = int(query.get("pageToken") or 0), int(query.get("maxResults") or 500)
            page = mig.instances[start : start + size]
            out: Obj = {"managedInstances": [self._instance_json(mig, i) for i in page]}
            if start + size < len(mig.instances):
                out["nextPageToken"] = str(start + size)
            return out
        if method == "POST" and verb == "resize":
            if "size" not in query:
                raise GoogleApiError(400, "Required field 'size' not specified")
            size = int(query["size"])
            if size < 0:
                raise GoogleApiError(
                    400, f"Invalid value for field 'size': '{size}'. Must be greater than or equal to 0."
                )
            if size > mig.target_size and self._refuses(zone):
                message = f"Instance group {name} cannot grow in zone {zone}: {STOCKOUT_MESSAGE}"
                raise GoogleApiError(503, message, reason="insufficientCapacity")
            self._resize_mig(mig, size)
            return self._zonal_operation("resize", zone, name)
        if verb == "deleteInstances":
            wanted = {u.rsplit("/", 1)[1] for u in body.get("instances", [])}
            found = [i for i in mig.instances if i.name in wanted and i.action != "DELETING"]
            if len(found) != len(wanted):
                raise GoogleApiError(
                    400, f"Some instances are not members of {name}: {sorted(wanted)}", reason="invalid"
                )
            for inst in found:
                inst.action = "DELETING"
            mig.target_size -= len(found)
            return self._zonal_operation("deleteInstances", zone, name)
        raise GoogleApiError(400, f"unsupported call {method} {verb} on an instance group manager")

    def _zonal_operation(self, kind: str, zone: str, mig: str) -> Obj:
        """A Compute zonal Operation: DONE once the group has scheduled the actions, not when they are carried out."""
        target = f"{_COMPUTE}/projects/{self.project}/zones/{zone}/instanceGroupManagers/{mig}"
        zone_url = f"{_COMPUTE}/projects/{self.project}/zones/{zone}"
        serial = next(self._ids)
        out: Obj = {"kind": "compute#operation", "name": f"operation-{serial}-{kind}", "operationType": kind}
        return out | {"status": "DONE", "progress": 100, "targetLink": target, "zone": zone_url}

    def _instance_json(self, mig: Mig, inst: Instance) -> Obj:
        out: Obj = {
            "instance": f"{_COMPUTE}/projects/{self.project}/zones/{mig.zone}/instances/{inst.name}",
            "name": inst.name,
            "currentAction": inst.action,
        }
        if inst.id:  # "empty when the instance does not exist"; a uint64, sent as a string
            out["id"] = inst.id
        if inst.instance_status:  # empty too without a VM, left out as proto3 JSON does
            out["instanceStatus"] = inst.instance_status
        if inst.error:
            out["lastAttempt"] = {"errors": {"errors": [{"code": inst.error_code, "message": inst.error}]}}
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


def _base_instance_name(mig: Mig) -> str:
    """The prefix of the names of a group's instances: GKE's group ``gke-C-NP-<hash>-grp`` names them
    ``gke-C-NP-<hash>-<suffix>`` (the fake's suffix is a serial number of four digits, Compute's four random
    characters)."""
    return mig.name.removesuffix("-grp")

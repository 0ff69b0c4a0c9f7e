"""What the fake GKE and Compute Engine APIs hold: node pools, their managed instance groups and instances (an
instance's id and instanceStatus follow Compute's rules), operations, and zones out of resources (``Stockout``),
with the words GKE and Compute use for them."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.google_api import Obj

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

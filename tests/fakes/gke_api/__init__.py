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

Its parts: ``resources`` (what the fake holds: node pools, instance groups and their instances, operations,
stockouts), ``instance_groups`` (the Compute Engine managed instance groups: their REST calls, instances coming up
or stuck in a stockout, lost groups) and ``server`` (``FakeGkeApi``: seeding, the passing of lead time, node pools
and operations, and the routing of each request).
"""

from tests.fakes.gke_api.resources import (
    SHOWN_ON,
    STOCKOUT_MESSAGE,
    ZERO_MAX_REFUSAL,
    Instance,
    Mig,
    NodePool,
    Operation,
    Stockout,
    zone_stockout_message,
)
from tests.fakes.gke_api.server import FakeGkeApi

__all__ = [
    "SHOWN_ON",
    "STOCKOUT_MESSAGE",
    "ZERO_MAX_REFUSAL",
    "FakeGkeApi",
    "Instance",
    "Mig",
    "NodePool",
    "Operation",
    "Stockout",
    "zone_stockout_message",
]

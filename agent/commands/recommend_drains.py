"""The drains in progress as ``leadtime recommend`` plans on them: read from the cluster as the daemon reads them,
never continued, nothing written.

The daemon in enforce mode takes over every drain the cluster records on the pools it drains (a node cordoned with
leadtime's drain marks, ``actuators.drain_marks``): its nodes are out of the pool's ready and target units, and billed
until the drain deletes them, which a budget's projection counts for one more tick only (``agent.drains``,
``agent.planning.budgeting.draining_going_units``). The cloud's adapters still count those nodes in the pool's target,
so a recommendation that read the pools through them alone planned on nodes that are going as if they stayed, and
projected each budget with them billing to the period's end. ``DrainsRead`` reads the drains (and the idle nodes) of
the pools through the daemon's own drainers (``agent.daemon.live``), and ``DrainedStates`` hands the tick the pools
as the daemon's ``NodeDrains`` sees them. A dry run's drainer would leave the drains alone, as an agent in dry-run
mode must (it cannot continue them); recommend tells what the agent would do in enforce mode, where they go on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from actuators.base import Actuator, NodeDrainer, unforced_drains, unread_pools
from actuators.dry_run import DryRunDrainer
from agent.commands.recommend_cluster import kubeconfig_problem
from agent.commands.recommend_warnings import Check
from agent.drains import NodeDrains
from config.schema import Settings
from models import ActionResult, ActuatorError, AlertEvent, PoolState
from models.clock import Clock, SystemClock

if TYPE_CHECKING:
    from actuators.aws_wiring import AwsActuators
    from actuators.cloud_wiring import CloudActuators


class DrainsRead(DryRunDrainer):
    """A drainer that reads the drains in progress, the idle nodes and which drains were forced for real, records any
    drain asked of it (as a dry-run drainer does), and writes nothing at all: not even the marks of a drain a person
    ended (that is the daemon's to clear). It says it sends drains, so that the agent takes over the drains the
    cluster records, as the daemon in enforce mode does. A failed read of the drains in progress is kept
    (``failures``), for the report to say that the pool's nodes being drained were counted as staying."""

    def __init__(self, inner: NodeDrainer, clock: Clock) -> None:
        super().__init__(inner, clock)
        self.guard_writes(lambda: False)
        self._drainer = inner
        self.failures: dict[str, ActuatorError] = {}

    def draining_nodes(self, pool_id: str) -> Mapping[str, str]:
        try:
            return super().draining_nodes(pool_id)
        except ActuatorError as exc:
            self.failures[pool_id] = exc
            raise

    def unforced_drains(self, pool_id: str) -> frozenset[str]:
        return frozenset(unforced_drains(self._drainer, pool_id))

    def sends_drains(self) -> bool:
        return True


class DrainedStates:
    """``inner``'s pools as the planner sees them in the daemon: the drains in progress the cluster records taken
    over, their nodes out of the ready and target units and counted as being drained, the idle nodes observed
    (``NodeDrains.observe``). Writes pass through (``recommend`` wraps this in ``DryRunActuator``). What the daemon
    alerts on as it observes them (an idle node a drain cannot empty, idle nodes that cannot be read) is kept from
    the latest read (``alerts``), as are the pools whose drains in progress could not be read (``unread_drains``),
    for the report to tell."""

    def __init__(self, inner: Actuator, drainers: Mapping[str, DrainsRead], window: timedelta, clock: Clock) -> None:
        self._inner = inner
        self._drainers = drainers
        self._drains = NodeDrains(drainers, window)
        self._clock = clock
        self.alerts: tuple[AlertEvent, ...] = ()

    def list_pools(self) -> Sequence[PoolState]:
        read = self._inner.list_pools()
        seen, self.alerts = self._drains.observe({s.pool_id: s for s in read}, self._clock.now())
        return [seen[s.pool_id] for s in read]

    def unread_pools(self) -> Mapping[str, ActuatorError]:
        return unread_pools(self._inner)

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        return self._inner.resize(pool_id, to_units, key)

    def unread_drains(self) -> dict[str, ActuatorError]:
        """Each pool whose drains in progress could not be read, and why."""
        return {p: exc for d in self._drainers.values() for p, exc in d.failures.items()}


def read_alerts(read_side: Actuator) -> tuple[AlertEvent, ...]:
    """What the daemon would alert on in the pools' nodes as recommend's read observed them (``DrainedStates``):
    none where no drainer read them."""
    return read_side.alerts if isinstance(read_side, DrainedStates) else ()


def unread_drains(read_side: Actuator) -> dict[str, ActuatorError]:
    """The pools whose drains in progress recommend's read could not read (``DrainedStates``), and why: their nodes
    being drained are counted as staying (``agent.commands.recommend_warnings.node_alerts`` says so)."""
    return read_side.unread_drains() if isinstance(read_side, DrainedStates) else {}


def read_drains(
    settings: Settings,
    pools: Sequence[str],
    read: Actuator,
    google: CloudActuators | None,
    aws: AwsActuators | None,
) -> tuple[Actuator, list[Check]]:
    """``read`` (the pools through the cloud's adapters) with the drains in progress on the pools the daemon drains
    (``pools``),
    read through its drainers on the Kubernetes API (``daemon.kubernetes``: its ``api_url``, the pod's service
    account or the kubeconfig, as the daemon connects); with none of those pools, ``read`` itself. Where no API can be
    reached, or the kubeconfig's current context names another cluster than the one configured
    (``agent.commands.recommend_cluster``), ``read`` too, and a warning (as a ``Check``) that the nodes being drained
    are counted as staying; a context whose name does not say which cluster it is is read, and told."""
    if not pools:
        return read, []
    from agent.daemon.live import aws_drainers, cloud_drainers  # the Kubernetes client: only when the cloud is read
    from kube import KubernetesApi, KubernetesNeeds, kubernetes_api_client
    from kube.kubeconfig_context import kubeconfig_cluster
    from models import KubernetesUnconfigured

    staying = (
        f"Nodes leadtime is draining in {', '.join(pools)} are counted as staying, in their pools' units and in their "
        "budgets' projections to the period's end"
    )
    try:
        client = kubernetes_api_client(settings.daemon.kubernetes, needs=KubernetesNeeds(live=False))
    except KubernetesUnconfigured as exc:
        told = f"drains in progress not read: {exc}. {staying}"
        return read, [lambda: [told]]
    cluster: list[str] = []
    if (seen := kubeconfig_cluster(settings.daemon.kubernetes)) is not None:
        reads, said = kubeconfig_problem(seen, str(client.configuration.host), settings)
        if not reads:
            refused = f"{said}. {staying}"
            return read, [lambda: [refused]]
        cluster += [said] if said else []
    clock = SystemClock()
    api = KubernetesApi(client, settings.daemon.kubernetes.request_timeout)
    inner: dict[str, NodeDrainer] = {}
    if google is not None:
        inner |= cloud_drainers(settings, clock, api, google)
    if aws is not None and aws.drains:
        inner |= aws_drainers(settings, clock, api, aws)
    wrapped = {id(d): DrainsRead(d, clock) for d in inner.values()}
    drainers = {pool: wrapped[id(d)] for pool, d in inner.items()}
    states = DrainedStates(read, drainers, settings.planner.scale_down_stabilization, clock)
    return states, [lambda: cluster]

"""What ``leadtime recommend`` warns of beside its plan (``agent.commands.recommend``), and the reason it gives an
on-prem pool it counts whole: slices it cannot tell are running, units it assumed, on-prem pools planned on their
``max_units``, idle nodes no drain can empty, pools whose nodes cannot be read, and what the daemon's start-up checks
find on the pools read (``Check``: the AWS groups' AZRebalance check, ``actuators.aws_wiring``). Each is a line for the
report's warnings and stderr, saying what to do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from agent.drain_records import IDLE_UNREAD
from agent.loop import Agent, TickReport
from agent.sources.onprem_capacity import onprem_queries, unobserved_onprem_pools
from models import AlertEvent, AlertKind, PoolKind, PoolSpec, PoolState

Check = Callable[[], Sequence[str]]  # an advisory check of the daemon's start: the warnings it finds


def failed_slices(agent: Agent, states: Mapping[str, PoolState]) -> list[str]:
    """A TPU slice in ERROR may still run a job: the daemon reads the cluster's nodes and counts such a slice broken
    (paid for, kept, its room taken from max_units); recommend reads the nodes for the drains in progress only, so the
    slice group's adapter counts every slice in ERROR failed, neither serving nor paid for, and the plan may buy one in
    its place. Say so."""
    out = []
    for spec in agent.pools:
        state = states.get(spec.pool_id)
        if spec.kind is not PoolKind.TPU_SLICE_GROUP or state is None or not state.failed_units:
            continue
        out.append(
            f"pool {spec.pool_id}: {state.failed_units} slice(s) failed or in ERROR are counted as neither serving "
            "nor paid for: recommend does not judge slices by the cluster's nodes, so it cannot tell whether a job "
            "still runs on one. The daemon counts such a slice broken (paid for, kept, its room taken from "
            "max_units); here the recommendation may buy a slice in its place and leaves its cost out. Check the pods "
            "on the slices' nodes before acting on this pool"
        )
    return out


def start_up_warnings(checks: Sequence[Check]) -> list[str]:
    """What the daemon's start-up checks find, as it logs them: advisory, so a check that fails is said, not fatal."""
    found: list[str] = []
    for check in checks:
        try:
            found += check()
        except Exception as exc:  # noqa: BLE001 - advisory, as in the daemon (agent.daemon.runtime)
            found.append(f"a start-up check failed: {exc}")
    return found


_IDLE_SUBJECT = "idle nodes of "  # the subject of ``agent.drain_records.idle_nodes_alert``, before the pool's id
_STAYING = (
    "nodes leadtime is draining in it are counted as staying, in its units and in its budgets' projections to the "
    "period's end"
)


def idle_unread_pool(alert: AlertEvent) -> str | None:
    """The pool of an alert that its idle nodes cannot be read (``agent.drain_records.idle_nodes_alert``, the one
    alert under that subject raised for an error), else None."""
    if alert.subject.startswith(_IDLE_SUBJECT) and "error" in alert.details:
        return alert.subject.removeprefix(_IDLE_SUBJECT)
    return None


def node_alerts(alerts: Sequence[AlertEvent], drains_unread: Mapping[str, Exception] | None = None) -> list[str]:
    """What the daemon alerts on in the nodes of the pools it drains as it reads them (``agent.drains``), which the
    dry-run tick does not raise itself (its pools are read with their drains, ``agent.commands.recommend_drains``):
    each idle node a drain cannot empty, not released and still billed until a person frees it, and a pool whose
    idle nodes cannot be read (``IDLE_UNREAD``). Each as the alert says it; one raised for an error says it after
    the alert's subject (the pool), which its summary does not name. Then each pool whose drains in progress could
    not be read (``drains_unread``): its nodes being drained are counted as staying. A pool whose idle nodes and
    drains failed to read with the same error (listing its nodes refused) is told once, with both consequences."""
    drains_unread = drains_unread or {}
    both = {
        pool: error
        for a in alerts
        if (pool := idle_unread_pool(a)) is not None
        and pool in drains_unread
        and (error := a.details["error"]) == str(drains_unread[pool])
    }
    out = []
    for alert in alerts:
        pool = idle_unread_pool(alert)
        if pool in both:
            out.append(
                f"pool {pool}: the drains in progress could not be read, nor its idle nodes ({both[pool]}): "
                f"{_STAYING}; it is not shrunk for idleness (none of its units is known idle), and still scaled up "
                "when demand needs more"
            )
        elif pool is not None:
            out.append(f"{alert.subject}: {IDLE_UNREAD} ({alert.details['error']})")
        elif "error" in alert.details:
            out.append(f"{alert.subject}: {alert.summary} ({alert.details['error']})")
        else:
            out.append(alert.summary)
    out += [
        f"pool {pool}: the drains in progress could not be read ({exc}): {_STAYING}"
        for pool, exc in sorted(drains_unread.items())
        if pool not in both
    ]
    return out


def assumed_units(agent: Agent, pool_state_source: str) -> list[str]:
    """Without ``--current-units`` and with no cloud or aws section to read, the pools are taken to hold their
    ``min_units``: the cost "now" and every change are then measured from an assumed state, not the pools'. Say so."""
    if pool_state_source != "min_units":
        return []
    assumed = ", ".join(f"{spec.pool_id}={spec.min_units}" for spec in agent.pools)
    return [
        f"current units not read: assumed min_units ({assumed}); the cost now and the change are measured from "
        "them. Give --current-units POOL=N[,POOL=N] or a cloud or aws section to read the pools"
    ]


def onprem_held(agent: Agent, spec: PoolSpec) -> str:
    """Why an on-prem pool that no cloud reads is counted at its ``max_units``, now and recommended: it is never
    resized, its nodes are paid for whether they take work or not, and the daemon's budgets count a pool they have
    no record of at its ``max_units`` (``agent.planning.budget_caps``)."""
    if unobserved_onprem_pools(agent.settings.prometheus, [spec]):
        planned = f"planned on its max_units ({spec.max_units}) at every tick, having no capacity_query"
    else:
        planned = "planned on the units its capacity_query reads at each tick (at most its max_units)"
    return f"on-prem, never resized: counted at its max_units ({spec.max_units}) in the costs; {planned}"


def onprem_unobserved(agent: Agent) -> list[str]:
    """The daemon's start-up warning of each on-prem pool without a capacity query (``agent.daemon.live``)."""
    return [
        f"on-prem pool {pool} has no prometheus.pools.{pool}.capacity_query: it is planned on its max_units at "
        "every tick, and work its nodes down or cordoned would run waits instead of bursting; give it a query "
        "counting its Ready, schedulable nodes (README, On-prem capacity)"
        for pool in unobserved_onprem_pools(agent.settings.prometheus, agent.pools)
    ]


def onprem_short(agent: Agent, tick: TickReport) -> list[str]:
    """Each on-prem pool whose capacity query read fewer units than its ``max_units`` this tick (the daemon's
    ``onprem-capacity`` alert): the demand its missing units would run went to the cloud pools, or waits. A read of
    0 names the query: a label value that names no node reads 0 through a fallback on the label, not nothing, and
    every unit of the pool's work then bursts."""
    queries = onprem_queries(agent.settings.prometheus, agent.pools) if agent.settings.prometheus else {}
    out = []
    for alert in tick.alerts:
        if alert.kind is not AlertKind.ONPREM_CAPACITY or "ready_units" not in alert.details:
            continue
        pool, ready, top = alert.subject, alert.details["ready_units"], alert.details["max_units"]
        line = (
            f"on-prem pool {pool}: its prometheus.pools.{pool}.capacity_query reads {ready} of its {top} units ready "
            "and schedulable: the demand the missing ones would run is planned on the other pools serving its "
            "classes, or waits"
        )
        if ready == "0":
            line += (
                ". If its nodes are up, the query selects none of them: a label value that names no node (a misspelt "
                "pool name) reads 0 through a fallback on the label, not nothing; check the value in "
                f"{queries.get(pool, 'the query')}, and fall back on the pool's own label (README, On-prem capacity)"
            )
        out.append(line)
    return out

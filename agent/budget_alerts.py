"""What the agent tells people about its budgets, as ``AlertEvent`` values: pure builders for a threshold of a cap
crossed, a projected overspend (with the scale-ups that drove it and what the tick shed), a ledger that holds the
period's spend only in part, and a hard stop deferred for pools that cannot be read.

The budget watch (``agent.budget_watch``) decides when each holds; subjects name the budget, so the Notifier's
de-duplication sends one message per condition per window, as for the other alerts (``agent.alerts``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from agent.alerts import alert_time
from agent.ledger.coverage import LedgerCoverage
from agent.planning.budget import ScaleUpCharge
from agent.planning.enforcement import DeferredStop, Overspend
from models import (
    DRAIN_KEY_MARK,
    ActionResult,
    ActionStatus,
    AlertEvent,
    AlertKind,
    BudgetSnapshot,
    Resize,
    Severity,
)

MAX_LISTED = 5


def budget_threshold_events(
    snapshot: BudgetSnapshot, previous_spent_usd: float | None, thresholds: Sequence[float], at: datetime
) -> list[AlertEvent]:
    """An event for each threshold (a fraction of the cap) that spend crossed since ``previous_spent_usd``.

    With no previous value (the agent just started) only the highest threshold already reached is reported,
    not every one below it. Spend falling back (a new period) crosses nothing.
    """
    if snapshot.cap_usd is None or snapshot.cap_usd <= 0:
        return []
    now_fraction = snapshot.spent_usd / snapshot.cap_usd
    crossed = [t for t in sorted(thresholds) if now_fraction >= t]
    if previous_spent_usd is None:
        crossed = crossed[-1:]
    else:
        before = previous_spent_usd / snapshot.cap_usd
        crossed = [t for t in crossed if before < t]
    return [_threshold_event(snapshot, t, at) for t in crossed]


def _threshold_event(snapshot: BudgetSnapshot, threshold: float, at: datetime) -> AlertEvent:
    cap = snapshot.cap_usd or 0.0
    percent = round(threshold * 100)
    severity = Severity.CRITICAL if threshold >= 1.0 else Severity.WARNING if threshold >= 0.8 else Severity.INFO
    return AlertEvent(
        kind=AlertKind.BUDGET_THRESHOLD,
        severity=severity,
        at=at,
        subject=f"budget {snapshot.budget}: {percent}% of cap",
        summary=(
            f"Spent {snapshot.spent_usd:,.2f} USD of {cap:,.2f} USD "
            f"({snapshot.spent_usd / cap:.0%}) in the period ending {alert_time(snapshot.period_end)}; "
            f"projected {snapshot.projected_usd:,.2f} USD by then."
        ),
        details={
            "period": f"{alert_time(snapshot.period_start)} to {alert_time(snapshot.period_end)}",
            "remaining": f"{max(0.0, cap - snapshot.spent_usd):,.2f} USD",
        },
    )


def projected_overspend_event(
    overspend: Overspend,
    at: datetime,
    drivers: Sequence[ScaleUpCharge],
    releases: Iterable[Resize],
    results: Sequence[ActionResult],
) -> AlertEvent:
    """The projection breaks a cap even with no further scale-up: which scale-ups drove it, and the releases the
    plan made in the budget's pools (burst capacity shed, cheapest to lose first), each told by what the tick did
    with it (``results``): carried out, only recommended in dry-run, or rejected or failed, and why. A release is
    never said to be under way because it was planned."""
    listed = list(drivers)[:MAX_LISTED]
    lines = [c.describe() for c in listed]
    if len(drivers) > len(listed):
        lines.append(f"... and {len(drivers) - len(listed)} more")
    shed = [(r, _results_of(r, results)) for r in releases if not r.is_scale_up]
    shedding = [
        f"{r.pool_id}: {r.from_units} -> {r.to_units} units"
        + (" (hard stop: busy units too)" if r.forced else "")
        + f": {_outcome(mine)}"
        for r, mine in shed
    ]
    recommending = any(r.status is ActionStatus.RECORDED for r in results)
    over = overspend.projected_usd - overspend.cap_usd
    return AlertEvent(
        kind=AlertKind.PROJECTED_OVERSPEND,
        severity=Severity.CRITICAL,
        at=at,
        subject=f"budget {overspend.budget} ({overspend.cap})",
        summary=(
            f"Projected {overspend.projected_usd:,.2f} USD against a {overspend.cap} cap of "
            f"{overspend.cap_usd:,.2f} USD by {alert_time(overspend.by)} ({over:,.2f} USD over)"
            f"{_elsewhere(overspend)}. "
            f"{'No scale-up is recommended' if recommending else 'Scale-ups are stopped'}; "
            f"{_shedding(shed, overspend.draining_units)}."
        ),
        details={
            "scale-ups that drove it": "\n".join(lines) or "none by the agent this period",
            "shedding": "\n".join(shedding) or _nothing_shed(overspend.draining_units),
        },
    )


def _elsewhere(overspend: Overspend) -> str:
    """How much of a shared budget's projection the other agents sharing it hold reserved."""
    if overspend.elsewhere_usd <= 0.0:
        return ""
    return (
        f", of which {overspend.elsewhere_usd:,.2f} USD is reserved by the other agents sharing the budget "
        f"for the units they hold"
    )


_CARRIED = (ActionStatus.DONE, ActionStatus.STARTED)


def _results_of(release: Resize, results: Sequence[ActionResult]) -> list[ActionResult]:
    """The outcomes of ``release``: its own result, or those of the drains it became (one per node)."""
    return [r for r in results if r.key == release.key or r.key.startswith(release.key + DRAIN_KEY_MARK)]


def _draining(units: int) -> str:
    return (
        f"{units} node{'s' if units != 1 else ''} released earlier {'are' if units != 1 else 'is'} still being drained"
    )


def _nothing_shed(draining: int) -> str:
    """The shedding detail of a tick that released nothing in the budget's pools: the agent's nodes being drained
    (``draining``, counted billing one more tick) are told, not taken for nothing being done."""
    rest = "no unit idle long enough, or at minimum"
    if draining:
        return f"{_draining(draining)} (billed until their drains end); no other unit can go safely now ({rest})"
    return f"nothing can go safely now ({rest})"


def _shedding(shed: Sequence[tuple[Resize, Sequence[ActionResult]]], draining: int = 0) -> str:
    """What the tick did about the budget, from the releases' outcomes, never from the plan alone, and the nodes it
    released earlier still being drained (``draining``)."""
    if not shed:
        return _draining(draining) if draining else "nothing can be shed"
    carried = [r for r, mine in shed if any(o.status in _CARRIED for o in mine)]
    recommended = [r for r, mine in shed if mine and all(o.status is ActionStatus.RECORDED for o in mine)]
    said = []
    if any(r.forced for r in carried):
        said.append("the hard stop is releasing burst units, busy ones too")
    elif carried:
        said.append("burst capacity is being shed")
    if any(r.forced for r in recommended):
        said.append("the hard stop's release of burst units, busy ones too, is recommended (dry-run), not carried out")
    elif recommended:
        said.append("shedding burst capacity is recommended (dry-run), not carried out")
    if missed := len(shed) - len(carried) - len(recommended):
        said.append(f"{missed} of {len(shed)} planned releases not carried out (see shedding)")
    if draining:
        said.append(_draining(draining))
    return "; ".join(said)


def _outcome(mine: Sequence[ActionResult]) -> str:
    """What happened to one release: its outcome, or the nodes of the drains it became by their outcome."""
    if not mine:
        return "not carried out (no outcome this tick)"
    if len(mine) == 1:
        return _said(mine[0])
    nodes: dict[str, list[str]] = {}
    for o in mine:
        nodes.setdefault(_said(o), []).append(o.key.partition(DRAIN_KEY_MARK)[2] or o.pool_id)
    return "; ".join(f"{', '.join(named)}: {said}" for said, named in nodes.items())


def _said(result: ActionResult) -> str:
    if result.status is ActionStatus.RECORDED:
        return "recommended (dry-run), not carried out"
    if result.status is ActionStatus.DONE:
        return "done"
    if result.status is ActionStatus.STARTED:
        return "under way"
    why = result.error or result.detail or "no reason given"
    return f"{result.status}: {why}"


def ledger_incomplete_event(coverage: LedgerCoverage, at: datetime) -> AlertEvent:
    """The ledger holds some of the budget's pools only from after its period started: its spend so far (and so the
    cap's headroom) leaves out their spend before their first records. The subject names the period, so it is told
    once per period."""
    since = "no record yet" if coverage.since is None else alert_time(coverage.since)
    return AlertEvent(
        kind=AlertKind.BUDGET_LEDGER_INCOMPLETE,
        severity=Severity.WARNING,
        at=at,
        subject=f"budget {coverage.budget}: period from {alert_time(coverage.period_start)}",
        summary=(
            f"The ledger holds this budget's spend whole only since {since}, but its period started "
            f"{alert_time(coverage.period_start)}: the spend of {', '.join(p for p, _ in coverage.late)} before "
            f"{'its first record' if len(coverage.late) == 1 else 'their first records'} is counted as 0, so the "
            "cap allows that much more until the period ends."
        ),
        details={
            "ledger": coverage.where,
            "period": f"{alert_time(coverage.period_start)} to {alert_time(coverage.period_end)}",
            "first record": since,
            "pools recorded late": coverage.late_pools(alert_time),
            "what to do": (
                "Keep the ledger where restarts do not lose it (deploy/components/sqlite-ledger-volume or "
                "deploy/components/postgresql-ledger), and fill this period with the bill of each pool named: "
                "`leadtime ledger import-billing` (it lists the pools the export did not bill). A pool created "
                "after the period started had no spend before its first record: the ledger cannot tell it from "
                "lost records, so for such a pool nothing is missing."
            ),
        },
    )


def hard_stop_deferred_event(deferred: DeferredStop, at: datetime) -> AlertEvent:
    """A budget's hard stop is due but waits for pools of the budget whose state cannot be read. The subject names
    since when they are unread (the oldest of their last records): raised every tick while the stop waits, it is
    told once per outage and de-duplication window, and its end once the pools are read again."""
    counted = ", ".join(f"{pool} ({_counted_at(units)})" for pool, units in deferred.unread)
    return AlertEvent(
        kind=AlertKind.BUDGET_HARD_STOP_DEFERRED,
        severity=Severity.CRITICAL,
        at=at,
        subject=f"budget {deferred.budget}: unread since {alert_time(deferred.since)}",
        summary=(
            f"The money left is {deferred.usd:,.2f} USD short of paying for the units held through the next two "
            f"ticks, but the hard stop is deferred: the state of {counted} could not be read since "
            f"{alert_time(deferred.since)}, and busy units are not released on a projection that is partly a guess. "
            f"Unless every pool of the budget is read first, the stop runs at {alert_time(deferred.until)} without "
            "them, counting them at the units shown. Meanwhile the budget runs over its cap."
        ),
        details={
            "unread pools (counted at)": counted,
            "unread since": alert_time(deferred.since),
            "hard stop deferred until": alert_time(deferred.until),
            "short over the next two ticks": f"{deferred.usd:,.2f} USD",
            "what to do": (
                "See the pool-unreadable alert for why the pool cannot be read (a revoked permission, an API that "
                "cannot be reached). budgets[].unread_stop_wait sets how long the stop waits."
            ),
        },
    )


def _counted_at(units: int | None) -> str:
    """What a deferred stop's unread pool is counted at: ``None`` is a pool nobody knows the units of, which is not a
    pool known to hold none."""
    if units is None:
        return "not known: counted at nothing, its spend not in this projection"
    return f"{units} units"

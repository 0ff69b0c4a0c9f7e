"""The planner's last step: hold its decisions to the budget caps. Pure.

Scale-ups are trimmed by ``enforce_budgets``. Where a cap is broken anyway (prices rose, a cap was lowered, a
new period began with capacity bought late in the last one), the units it names are released through the
planner's safe release rule: only units observed idle for the stabilization window go, never from a pool the
planner is holding. Whatever should go but cannot go safely is kept, with a budget skip that says how many and why;
the loop alerts on the overrun.

The pools held are read from the planner's inputs, whatever size it wanted for them: a pool whose state could not
be read, one blocked by a permanent error, one serving a class whose demand is unknown; and those its own decision
held this tick (an operation in flight). A pool already at the size the planner wants gets no skip of its own,
but is held all the same.

No budget release names a unit of a held pool: its units still count in the projection, and what the cap needs
is taken from the budget's other pools. Where those cannot cover it, each held pool gets a budget skip saying how
far the cap stays broken and why the pool keeps its units.

A budget with a commit horizon holds its cap by a hard stop instead: the units its stop names go whether idle or
busy (a ``forced`` release, which the executor drains idle nodes first for), never from a held pool. Across the
budget's pools it names units idle for the stabilization window first, then units idle now, then units still
provisioning in the pools whose release takes those first (those not in ``drained``: a size change removes units in
flight before ready ones, where a drain could only take a ready node), then busy ones.

A pool whose state could not be read is counted at the units it is known to hold (the more of those the agent last
read it at and those the ledger last recorded; nothing known: see ``agent.planning.enforcement``), its spend since
counted too, and the hard stop of its budget waits for
it: busy work is not evicted on a projection that is partly a guess. The pool gets a budget skip saying so and until
when (the budget's ``unread_stop_wait`` after the pool's last record); idle units are still shed. After that the
stop runs on the budget's other pools, the unread pool held.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from agent.planning.budget import BudgetSpend, billed_after, draining_going, released_to, target_for
from agent.planning.budget_shed import Shed, Shortfall
from agent.planning.budget_trim import Trim
from agent.planning.enforcement import DeferredStop, budget_snapshots, enforce_budgets
from agent.planning.needs import Unknown, missing_for
from models import BudgetSnapshot, PoolKind, PoolSpec, PoolState, Resize, Skip, SkipReason
from models.durations import format_duration

_HOLDS = {SkipReason.MISSING_DATA, SkipReason.PERMANENT_ERROR, SkipReason.IN_FLIGHT}  # the planner's own holds


@dataclass(frozen=True)
class BudgetedDecisions:
    resizes: tuple[Resize, ...]
    skips: tuple[Skip, ...]
    targets: dict[str, int]
    snapshots: tuple[BudgetSnapshot, ...] = ()
    trims: tuple[Trim, ...] = ()  # the scale-ups a cap cut short
    shed: tuple[Shed, ...] = ()  # the units a broken cap asked to release (some may be kept: see the skips)


def apply_budgets(
    now: datetime,
    tick: timedelta,
    stabilization: timedelta,
    pools: Sequence[PoolSpec],
    states: Mapping[str, PoolState],
    spends: Sequence[BudgetSpend],
    resizes: Sequence[Resize],
    skips: Sequence[Skip],
    targets: Mapping[str, int],
    *,
    blocked: Mapping[str, str],
    unknown: Unknown,
    drained: Collection[str] | None = None,
    last_read: Mapping[str, int] | None = None,
) -> BudgetedDecisions:
    """The planner's decisions held to the caps of ``spends``. ``blocked`` holds the pools a permanent error
    blocks (with the error), ``unknown`` the classes whose pools are held for missing data (``needs.Unknown``).
    ``drained`` holds the pools whose releases are drains of their nodes (``None``: not known, every pool taken as
    drained); ``last_read`` the units the agent last read each pool at (a pool not read this tick is counted at
    them)."""
    if not spends:
        return BudgetedDecisions(tuple(resizes), tuple(skips), dict(targets))
    specs = {p.pool_id: p for p in pools}
    # Money is counted in billed units, sizes in target units: each figure below says which it holds.
    billed = {pool_id: state.billed_units for pool_id, state in states.items()}
    current_units = {pool_id: state.target_units for pool_id, state in states.items()}
    settled = {pool_id: _settled_idle(state, now, stabilization) for pool_id, state in states.items()}
    proposed = {r.pool_id: _billed(states, r.pool_id, r.to_units) for r in resizes}  # billed
    idle_now = {pool_id: max(state.idle_units, len(state.idle_since)) for pool_id, state in states.items()}
    held = _held(pools, states, blocked, unknown, skips)
    provisioning = {  # billed: a unit waiting for resources is not
        pool_id: max(0, state.provisioning_units - state.waiting_units)
        for pool_id, state in states.items()
        if drained is not None and pool_id not in drained
    }
    # billed units no release can take: broken units, and nodes already being drained (billed until deleted)
    broken = {
        pool_id: len(state.broken_units) + state.draining_units
        for pool_id, state in states.items()
        if state.broken_units or state.draining_units
    }
    out = enforce_budgets(
        now, spends, specs, billed, proposed, settled, tick, stabilization, idle_now, held, provisioning, broken,
        last_read, draining_going_units(states, resizes),
    )  # fmt: skip

    allowed = {  # target units
        r.pool_id: r.to_units if out.targets[r.pool_id] == proposed[r.pool_id] else _target(states, r, out.targets)
        for r in resizes
    }
    by_pool = _trimmed(now, resizes, allowed)
    new_targets = {**targets, **{t.pool_id: allowed[t.pool_id] for t in out.trims if t.pool_id in allowed}}
    resized = {r.pool_id: r for r in resizes}
    trimmed = [
        _trim_skip(trim, skip, states.get(trim.pool_id), resized.get(trim.pool_id), allowed, specs)
        for trim, skip in zip(out.trims, out.skips, strict=True)
    ]
    new_skips = [*skips, *trimmed]
    stopped = {s.pool_id for s in out.shed if s.forced}  # the hard stop says it all
    for shed in out.shed:
        if shed.forced:
            continue
        pool_id = shed.pool_id
        current = current_units[pool_id]
        planned = by_pool.get(pool_id)
        after = planned.to_units if planned is not None else current
        release = min(shed.units, max(0, settled.get(pool_id, 0) - (current - after)))
        if release:
            cut = _released(now, shed, states[pool_id], current, after, release)
            if isinstance(cut, Resize):
                by_pool[pool_id] = cut
            else:  # all it gives up is the planner's take-back of nodes being drained
                by_pool.pop(pool_id, None)
                new_skips.append(cut)
            to_units = cut.to_units if isinstance(cut, Resize) else current
            new_targets[pool_id] = min(new_targets.get(pool_id, to_units), to_units)
        if release < shed.units and pool_id not in stopped:
            detail = (
                f"budget {shed.budget!r} projected over its {shed.cap} cap: {shed.units - release} more units "
                f"should be released but are not idle for {format_duration(stabilization)}; keeping them"
            )
            new_skips.append(Skip(pool_id, SkipReason.BUDGET, detail))
    for stop in (s for s in out.shed if s.forced):
        forced = _hard_stop(now, stop, states[stop.pool_id], by_pool.get(stop.pool_id), out.targets)
        if forced is not None:
            by_pool[stop.pool_id] = forced
            new_targets[stop.pool_id] = min(new_targets.get(stop.pool_id, forced.to_units), forced.to_units)
    for short in out.shortfalls:
        for pool_id in short.held:
            new_skips.append(Skip(pool_id, SkipReason.BUDGET, _kept_by_hold(short, held[pool_id])))
    recorded = {p for spend in spends for p in spend.last_units}
    read = last_read or {}
    for deferred in out.deferred:
        for pool_id, units in deferred.unread:
            counted = _counted(units, read.get(pool_id) == units, pool_id in recorded)
            new_skips.append(Skip(pool_id, SkipReason.BUDGET, _stop_deferred(deferred, counted, units is None)))
    ordered = tuple(by_pool[p] for p in sorted(by_pool))
    # projected with the units actually kept: busy units that should go but stay keep billing, and show
    kept = {**billed, **{r.pool_id: _billed(states, r.pool_id, r.to_units) for r in ordered}}
    # the nodes being drained projected as the shed counts them: one more tick
    snapshots = budget_snapshots(
        now, spends, specs, billed, kept, tick, last_read, draining_going_units(states, ordered)
    )
    return BudgetedDecisions(ordered, tuple(new_skips), new_targets, snapshots, out.trims, out.shed)


def draining_going_units(states: Mapping[str, PoolState], resizes: Sequence[Resize]) -> dict[str, int]:
    """The nodes being drained of each pool that still go at the target ``resizes`` leave it at (``draining_going``):
    what a shed, the snapshots and the projected-overspend alert count billing one more tick only."""
    asked = {r.pool_id: r.to_units for r in resizes}
    return {p: draining_going(s, asked.get(p, s.target_units)) for p, s in states.items() if s.draining_units}


def _released(now: datetime, shed: Shed, state: PoolState, current: int, after: int, release: int) -> Resize | Skip:
    """The release of ``release`` idle units a shed asks of ``state``'s pool planned at ``after`` (``released_to``),
    or, where all it gives up is the planner's take-back of its nodes being drained, the skip saying so."""
    to_units = released_to(state, after, release)
    if to_units == current:
        return Skip(
            shed.pool_id,
            SkipReason.BUDGET,
            f"budget {shed.budget!r} projected over its {shed.cap} cap: its {release} idle nodes being drained are "
            "not taken back",
        )
    reason = (
        f"budget {shed.budget!r} projected over its {shed.cap} cap: releasing {release} idle units "
        f"(cheapest to lose first)"
    )
    return Resize(shed.pool_id, current, to_units, reason, _key(now, shed.pool_id, to_units))


def _hard_stop(
    now: datetime, stop: Shed, state: PoolState, planned: Resize | None, allowed: Mapping[str, int]
) -> Resize | None:
    """The forced release of a budget's hard stop in ``state``'s pool, from the size the plan leaves it at
    (``planned``, else its target); ``stop`` counts billed units, as ``allowed`` (the caps' targets) does."""
    current = state.target_units
    after = planned.to_units if planned is not None else current
    billed = state.billed_units
    stopped_at = min(billed_after(state, after), min(allowed.get(stop.pool_id, billed), billed) - stop.units)
    to_units = min(after, target_for(state, stopped_at))
    if to_units >= after:
        return None
    busy = max(0, stop.units - stop.idle_units - stop.provisioning_units)
    reason = (
        f"budget {stop.budget!r} hard stop: the money left does not pay for the units held through the next two "
        f"ticks: releasing {current - to_units} units ({busy} of them busy; their work goes back to the queue)"
    )
    return Resize(stop.pool_id, current, to_units, reason, _key(now, stop.pool_id, to_units), forced=True)


def _trim_skip(
    trim: Trim,
    skip: Skip,
    state: PoolState | None,
    resize: Resize | None,
    allowed: Mapping[str, int],
    specs: Mapping[str, PoolSpec],
) -> Skip:
    """A trim's skip in the sizes of the resize it trims (target units), with the units billed beside them where
    those differ: the cap counts billed units, so "2->2 instead of ->3" would say nothing of a resize asked 1->2."""
    if state is None or resize is None or state.billed_units == state.target_units:
        return skip
    unit = "slice" if specs[trim.pool_id].kind is PoolKind.TPU_SLICE_GROUP else "unit"
    because = []
    if state.broken_units:
        broken = len(state.broken_units)
        because.append(f"{broken} broken {unit}{'s' if broken > 1 else ''}")
    if state.draining_units:
        because.append(f"{state.draining_units} being drained")
    if state.waiting_units:
        because.append(f"not {state.waiting_units} waiting for resources")
    billed = f"{state.billed_units} {unit}{'s' if state.billed_units != 1 else ''} billed with " + ", ".join(because)
    granted, wanted = trim.allowed_units - trim.billed_units, trim.wanted_units - trim.billed_units
    detail = (
        f"{trim.label} allows {granted} of {wanted} more units ({resize.from_units}->{resize.to_units} asked, "
        f"trimmed to {resize.from_units}->{allowed[trim.pool_id]}; {billed}); "
        f"{trim.room_usd:,.2f} USD of room left to period end"
    )
    return replace(skip, detail=detail)


def _kept_by_hold(short: Shortfall, why: str) -> str:
    """What a held pool's budget skip says when the releases the budget's other pools allow leave its cap broken."""
    if short.forced:
        return (
            f"budget {short.budget!r} hard stop: the money left does not pay for the units held through the next two "
            f"ticks, {short.usd:,.2f} USD more than releasing the units of its other pools saves, but the pool is "
            f"held ({why}); keeping its units"
        )
    return (
        f"budget {short.budget!r} projected over its {short.cap} cap, {short.usd:,.2f} USD more than releasing the "
        f"units of its other pools saves; its units are in a pool that is held ({why}); keeping them"
    )


def _counted(units: int | None, last_read: bool, recorded: bool) -> str:
    """What an unread pool is counted at in its budgets' projection, and why (``budget_caps.units_now``; ``None``:
    units nobody knows)."""
    if units is not None and last_read:
        return f"the {units} units this agent last read it at"
    if units is not None and recorded:
        return f"its last recorded {units} units"
    if units is not None:  # an on-prem pool, never resized, known by neither
        return f"its max_units, {units}, as an on-prem pool"
    return (
        "nothing, neither this agent nor the ledger knowing what it holds; a scale-up is granted only where it fits "
        "it at its max_units over the scale-up's hold"
    )


def _stop_deferred(deferred: DeferredStop, counted: str, unknown: bool) -> str:
    """What an unread pool's budget skip says when its budget's hard stop waits for every pool to be read
    (``unknown``: nobody knows its units, so the stop's projection leaves its spend out)."""
    kept = (
        "this one held, its units not known and its spend not in the projection the stop runs on"
        if unknown
        else "this one kept at those units"
    )
    return (
        f"budget {deferred.budget!r} hard stop not started: the money left is {deferred.usd:,.2f} USD short of paying "
        f"for the units held through the next two ticks, but this pool's state could not be read (it is counted at "
        f"{counted}). No busy unit of the budget's pools is released until every one of them is read, or until "
        f"{deferred.until:%Y-%m-%d %H:%M} UTC: the stop then runs on the pools read, {kept}"
    )


def _held(
    pools: Sequence[PoolSpec],
    states: Mapping[str, PoolState],
    blocked: Mapping[str, str],
    unknown: Unknown,
    skips: Sequence[Skip],
) -> dict[str, str]:
    """The pools no budget release may touch, and why. ``enforce_budgets`` names none of their units: they count
    in the projection, and what a broken cap needs is released from the budget's other pools."""
    held = {s.pool_id: s.detail for s in skips if s.reason in _HOLDS}
    for pool in pools:
        missing = missing_for(pool, unknown)
        if pool.pool_id not in states:
            held[pool.pool_id] = "its state could not be read"
        elif pool.pool_id in blocked:
            held[pool.pool_id] = f"blocked by a permanent error: {blocked[pool.pool_id]}"
        elif missing:
            held[pool.pool_id] = f"no trustworthy demand for {', '.join(missing)}"
    return held


def _trimmed(now: datetime, resizes: Sequence[Resize], allowed: Mapping[str, int]) -> dict[str, Resize]:
    """The planner's resizes with scale-ups cut to the units the caps allow (none left where nothing is)."""
    by_pool: dict[str, Resize] = {}
    for resize in resizes:
        units = allowed[resize.pool_id]
        if units == resize.to_units:
            by_pool[resize.pool_id] = resize
        elif units != resize.from_units:
            reason = f"{resize.reason}; trimmed to {units} units by a budget cap"
            by_pool[resize.pool_id] = Resize(
                resize.pool_id, resize.from_units, units, reason, _key(now, resize.pool_id, units)
            )
    return by_pool


def _billed(states: Mapping[str, PoolState], pool_id: str, to_units: int) -> int:
    """The units a pool is counted as billing at a target of ``to_units`` (the target itself for a pool not read)."""
    state = states.get(pool_id)
    return to_units if state is None else billed_after(state, to_units)


def _target(states: Mapping[str, PoolState], resize: Resize, allowed: Mapping[str, int]) -> int:
    """The target of ``resize``'s pool at which it bills the units a cap allows it (``allowed``, billed units)."""
    state = states.get(resize.pool_id)
    units = allowed[resize.pool_id]
    return units if state is None else target_for(state, units)


def _settled_idle(state: PoolState, now: datetime, window: timedelta) -> int:
    return sum(1 for since in state.idle_since if now - since >= window)


def _key(now: datetime, pool_id: str, to_units: int) -> str:
    """The planner's idempotency key format: one key per pool, tick and target."""
    return f"{pool_id}@{now.isoformat()}->{to_units}"

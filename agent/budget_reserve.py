"""Reserving a plan's scale-ups against budgets that other agents share, before the executor carries them out.

The planner trims scale-ups to the caps with what this agent knows. Agents in other clusters that name the same
budget (a budget with ``remote_pools``) spend from it too, so before a scale-up the agent reserves the spend it adds
(the units it adds to the bill at the pool's price to the end of each cap's period, or over the budget's
``commit_horizon`` if that ends first; in the next hour for an hourly cap, and in the next month period for a
monthly cap once a unit bought now reaches it: ``agent.budget_reserve_caps``) in the ledger: all of a tick's requests
in one transaction against everyone's recorded and reserved spend (``agent.ledger.reservations``). The idle nodes being
drained that a scale-up takes back first are not asked for: they are billed, so the pool's standing reservation
holds them already. A scale-up not granted in full is trimmed to the units the headroom fits (with the nodes it
takes back) and reserved again; if even that is refused (another agent took the room in between), the pool is held.
Either way the plan carries a budget skip and the tick alerts. A budget no other agent spends from is reserved in
nothing: the planner's trim holds it to its cap, and a reservation there would only count units twice (those of a
scale-up, still reserved after a release took them, and those bought again).

Reservations of scale-ups not carried out (rejected, failed, only recorded in dry-run) are released as soon as the
executor reports.

The ledger records spend only as it accrues, so a reservation that expired would leave the other agents blind to
what the units it paid for go on costing: they would commit the same money again. So the agent also keeps what it
holds reserved (``commit``, every tick): the units each of its pools bills, at the pool's price to the end of each
cap's period (or over the commit horizon), reserved for ``reservation_ttl`` and replaced at the next tick. Those
standing reservations cover the scale-ups carried out, whose own reservations are then released, and follow the
units billed: once a release's units stop billing, the next tick reserves them no more. An agent that stops leaves
its reservations to expire. The units it is releasing (``releasing_units``) are also marked as going, apart from the
caps' keys and for two ticks only (``releasing_elsewhere``): another agent's shed of a broken cap counts them as shed
already instead of shedding for the same excess, while its scale-ups still count them until they stop billing. A
tick's releases are marked before the executor acts too, the others' marks read again in the same transaction under
the ledger's writer lock, and its sheds cut by what they marked since the planner read them
(``agent.budget_shed_claims``): two agents ticking at the same instant shed once, not each.

The standing reservations are the deployment's, not the replica's: their holder is the deployment's name (the same
for all its replicas) with its pools, which no other deployment on the ledger has, and each commit replaces all of
the deployment's, whichever replica or process made them. A new leader (or a restarted agent) therefore takes over
its predecessor's standing reservations in its first commit instead of reserving the same units beside them until
they expire, and never counts them as another agent's (``held_elsewhere``), even when it was rolled out with a pool
added, removed or renamed: a standing reservation is the deployment's when it is named for the deployment and names
one of its pools or an id one was known by (``agent.ledger.reservations.StandingHolder``). The standing
reservations of another deployment, whose pools are its own, are never touched.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from agent.budget_reserve_caps import Cap, ReleaseMarks, Releasing, keyed, reserved_periods, span_paid_for
from agent.budget_shed_claims import ShedClaims, resize_key
from agent.ledger.pool_ids import Previous, counted_pools
from agent.ledger.reservations import CountedTo, Grant, Reservations, StandingHolder
from agent.planning.budget import Budget, CapKind, billed_after, target_for
from models import (
    ActionResult,
    ActionStatus,
    AlertEvent,
    AlertKind,
    BudgetCut,
    CapacityPlan,
    PoolSpec,
    PoolState,
    Resize,
    Severity,
    Skip,
    SkipReason,
)

_CARRIED_OUT = (ActionStatus.DONE, ActionStatus.STARTED)
_EPS_USD = 1e-6


@dataclass(frozen=True)
class Reserved:
    """The plan with its scale-ups cut to what the shared budgets granted, and the alerts to raise about it."""

    plan: CapacityPlan
    alerts: tuple[AlertEvent, ...] = ()


class BudgetReserver:
    """Reserves scale-ups in ``ledger`` for ``holder`` (the deployment's name, the same for all its replicas; shown
    to operators), and keeps the units held reserved as ``standing_holder`` (``commit``). ``previous_ids``
    names the ids each pool was known by before a rename (its own pools' ``previous_ids`` and a shared budget's
    ``remote_previous_ids``): each request counts the spend recorded under them as the budget's too."""

    def __init__(
        self,
        ledger: Reservations,
        budgets: Sequence[Budget],
        pools: Mapping[str, PoolSpec],
        holder: str,
        ttl: timedelta,
        previous_ids: Previous | None = None,
        hold: timedelta = timedelta(0),
        tick: timedelta = timedelta(minutes=1),
    ) -> None:
        self.ledger = ledger
        # beyond its lead time, how long a unit bought is held at least (the idle window before a release, one tick):
        # as the planner's trim, a monthly cap's next period is reserved in once a unit bought now reaches it
        self.hold = hold
        self.previous_ids = previous_ids or {}
        self.budgets = list(budgets)
        self.pools = pools
        self.holder = holder
        # the deployment's pools make its standing reservations its own: deployments sharing a ledger never share a
        # pool id, though they may share a name (every install names its Lease ``leadtime``). Its pools' previous ids
        # (not a remote pool's) name a predecessor's from before a rename.
        olds = sorted({old for pool_id in pools for old in self.previous_ids.get(pool_id, ())})
        self.standing = StandingHolder(holder, tuple(sorted(pools)), tuple(olds))
        self.standing_holder = self.standing.label
        self.ttl = ttl
        self.tick, self.marks = tick, ReleaseMarks(tick)  # a mark lives two ticks unless renewed; a drain's: first two
        self._held: dict[str, list[int]] = {}  # resize key -> its reservations
        self._covered: list[int] = []  # scale-ups' reservations the next standing reservations will cover
        self._standing: list[int] = []  # the units held now, reserved for the other agents to see (``commit``)
        # the others' marks as the plan counts them, and the claim of a tick's sheds against them
        free = [p for p, spec in pools.items() if spec.price_per_unit_hour_usd <= 0.0]  # priced at nothing
        self.sheds = ShedClaims(ledger, self.budgets, self.standing, tick, self._caps, self._mine, free)

    def reserve(
        self,
        now: datetime,
        plan: CapacityPlan,
        states: Mapping[str, PoolState] | None = None,
        unread: Mapping[str, int] | None = None,
    ) -> Reserved:
        """Reserve every scale-up of ``plan`` on a budgeted pool; trim or hold the ones not granted. ``states`` are
        the pools the plan was made on: a scale-up asks only for the units it adds to the bill (``billed_after``),
        as the planner counts them. The idle nodes being drained it takes back are billed already and reserved in
        the pool's standing reservation (``commit``); a pool without a state counts every unit it adds as new.
        ``unread``: the units the planner counts each pool not read at (``ShedClaims.claim``)."""
        states = states or {}
        plan = self.sheds.claim(now, plan, states, unread)  # the sheds decided again, and marked, under the lock
        new = {r.key: _new_units(r, states.get(r.pool_id)) for r in plan.resizes if r.is_scale_up}
        ups = sorted(
            (r for r in plan.resizes if new.get(r.key, 0) > 0 and self._caps(now, r.pool_id)),
            key=lambda r: self.pools[r.pool_id].fill_key,
        )
        if not ups:
            return Reserved(plan)
        first = self._ask(now, [(r.pool_id, new[r.key], _labelled(r, states.get(r.pool_id), new[r.key])) for r in ups])
        allowed: dict[str, int] = {}
        headroom: dict[str, tuple[str, float]] = {}
        for resize, grants in zip(ups, first, strict=True):
            wanted = new[resize.key]
            if all(g.granted for _, g in grants):
                self._held[resize.key] = _kept(grants)
                continue
            self.ledger.release([g.reservation_id for _, g in grants if g.reservation_id is not None])
            units, budget, room = min(
                (max(0, math.floor((g.headroom_usd + _EPS_USD) / cap.per_unit_usd)), cap.key, max(0.0, g.headroom_usd))
                for cap, g in grants
                if not g.granted
            )
            allowed[resize.pool_id], headroom[resize.pool_id] = min(wanted, units), (budget, room)
        trimmed = [r for r in ups if allowed.get(r.pool_id, 0) > 0]
        second = self._ask(
            now,
            [(r.pool_id, allowed[r.pool_id], _labelled(r, states.get(r.pool_id), allowed[r.pool_id])) for r in trimmed],
        )
        for resize, grants in zip(trimmed, second, strict=True):
            if all(g.granted for _, g in grants):
                to_units = _granted_target(resize, states.get(resize.pool_id), allowed[resize.pool_id])
                self._held[resize_key(now, resize.pool_id, to_units)] = _kept(grants)
            else:
                self.ledger.release([g.reservation_id for _, g in grants if g.reservation_id is not None])
                allowed[resize.pool_id] = 0
        return self._cut(now, plan, states, new, allowed, headroom)

    def settle(self, results: Sequence[ActionResult]) -> None:
        """Release the reservations of the scale-ups the executor did not carry out; keep the others until the next
        standing reservations cover them (``commit``)."""
        carried_out = {r.key for r in results if r.status in _CARRIED_OUT}
        abandoned = [i for key, ids in self._held.items() if key not in carried_out for i in ids]
        self._covered += [i for key, ids in self._held.items() if key in carried_out for i in ids]
        self._held = {}
        self.ledger.release(abandoned)

    def commit(
        self,
        now: datetime,
        units: Mapping[str, int],
        covered: Mapping[str, int] | None = None,
        releasing: Releasing | None = None,
    ) -> None:
        """Reserve what the ``units`` each pool bills cost to the end of each shared cap's period (or its commit
        horizon), in place of the deployment's standing reservations (this replica's previous tick's, and a
        previous leader's) and of the scale-ups' they cover: of a pool to no more units than ``covered`` gives it (its
        units ``in_service``; ``None``: ``units``) and ``units`` reserves. Never refused: the units are already paid
        for; the other agents' next reservations see them. Of those, the units each pool is releasing (``releasing``,
        ``releasing_units``: still billed, still reserved; a drain's at its first two ticks, ``ReleaseMarks``) are also
        marked as going, for two ticks (``releasing_elsewhere``): the other agents' sheds count them as shed already."""
        requests = [
            cap.request(now, held, self.standing_holder, self.ttl, cap_usd=math.inf)
            for pool_id, held in sorted(units.items())
            if held > 0
            for cap in self._caps(now, pool_id)
        ]
        requests += [
            cap.releasing(now, min(going, units.get(pool_id, 0)), self.standing_holder, self.tick)
            for pool_id, going in sorted(self.marks.marked(releasing, now).items())
            if min(going, units.get(pool_id, 0)) > 0
            for cap in self._caps(now, pool_id)
            if cap.current
        ]
        replaced, self._covered = [*self._standing, *self._covered, *self.sheds.taken()], []
        # One transaction: never both the old and the new reservations, never neither.
        # a predecessor's scale-ups these units cover are replaced too (``StandingHolder.holds``)
        covers = units if covered is None else covered
        reserved = {pool_id: min(n, units.get(pool_id, 0)) for pool_id, n in covers.items()}
        covering = replace(self.standing, covered=tuple(sorted(reserved.items())))
        grants = self.ledger.reserve_many(requests, now, replacing=replaced, replacing_holder=covering)
        self.sheds.committed()  # a commit that fails leaves a release's claim to its tick's failure (``release``)
        self._standing = [g.reservation_id for g in grants if g.reservation_id is not None]

    def held_elsewhere(self, now: datetime, to_period_end: bool = False) -> dict[str, float]:
        """What the other agents sharing each budget with a monthly cap keep reserved in its current period (under
        the period's keys, ``reserved_periods``): the units they hold and the scale-ups they are making, each at its
        own rate over the span this agent counts its own units over (to the period's end, or over its commit
        horizon; ``to_period_end``: to the period's end whatever its horizon), whatever span that agent reserved
        over (``agent.ledger.reservations.carried``). The planner counts this deployment's own units itself, so its
        reservations are left out: its standing ones, whichever replica made them and whatever pools they name
        (``StandingHolder.holds``), and its scale-ups' not yet replaced by them."""
        mine = self._mine()
        out = {}
        for budget in self.budgets:
            if budget.remote_pools and budget.monthly_cap_usd is not None:
                period = budget.period(now)
                keys = [budget.name, keyed(budget.name, period)]
                own_end = span_paid_for(period, now, budget.commit_horizon)[1]
                to = CountedTo(period.end if to_period_end else own_end, own_end)
                out[budget.name] = self.ledger.reserved_by_others(keys, now, self.standing, mine, to)
        return out

    def held_elsewhere_this_hour(self, now: datetime) -> dict[str, float]:
        """What the other agents sharing each budget with an hourly cap keep reserved in the current hour (under
        ``NAME/hourly`` and the key it was reserved under while it was the next hour): their units to the hour's
        end and the scale-ups they are making, this deployment's left out as ``held_elsewhere`` leaves them."""
        out = {}
        for budget in self.budgets:
            if budget.remote_pools and budget.hourly_cap_usd is not None:
                hour, plain = budget.hour(now), f"{budget.name}/{CapKind.HOUR}"
                keys = [plain, keyed(plain, hour)]
                to = CountedTo(hour.end, hour.end)
                out[budget.name] = self.ledger.reserved_by_others(keys, now, self.standing, self._mine(), to)
        return out

    def releasing_elsewhere(self, now: datetime, hourly: bool = False) -> dict[str, float]:
        """What the other agents sharing each budget mark as being released (``ShedClaims.releasing_elsewhere``)."""
        return self.sheds.releasing_elsewhere(now, hourly)

    def staying_elsewhere(self, now: datetime, span: timedelta) -> dict[str, float]:
        """What the other agents' units kept cost over a hard stop's ``span`` (``ShedClaims.staying_elsewhere``)."""
        return self.sheds.staying_elsewhere(now, span)

    def _mine(self) -> list[int]:
        """This replica's reservations: its standing ones and its scale-ups' not yet replaced by them."""
        return [*self._standing, *self._covered, *(i for ids in self._held.values() for i in ids)]

    # -- internals ------------------------------------------------------------------------------------------
    def _caps(self, now: datetime, pool_id: str) -> list[Cap]:
        """The caps of the shared budgets over ``pool_id`` (those with ``remote_pools``): a budget no other agent
        spends from is reserved in nothing, its scale-ups trimmed by the planner alone."""
        spec = self.pools.get(pool_id)
        if spec is None or spec.price_per_unit_hour_usd <= 0.0:
            return []
        caps = []
        for budget in self.budgets:
            # only a budget other agents spend from too: the planner holds every cap to what this agent knows
            if pool_id not in budget.pools or not budget.remote_pools:
                continue
            for key, period, cap_usd, horizon, also in reserved_periods(budget, now, spec.lead_time + self.hold):
                hours = period.remaining(now, horizon).total_seconds() / 3600.0
                if hours > 0.0:
                    counted = tuple(counted_pools(budget.pools, self.previous_ids))
                    per_unit = spec.price_per_unit_hour_usd * hours
                    caps.append(Cap(key, budget, period, cap_usd, per_unit, counted, also, horizon))
        return caps

    def _ask(self, now: datetime, wants: Sequence[tuple[str, int, int]]) -> list[list[tuple[Cap, Grant]]]:
        """Ask for ``units`` more of each pool (to ``to`` units in service, ``in_service``) in every cap over it, in
        one transaction; the grants by request. Held under the scale-up's label (``StandingHolder.scale_up_label``),
        which a successor's commit replaces once it reads and reserves the pool at ``to`` units in service or more,
        should this replica die before its own."""
        asked = [(i, cap) for i, (pool_id, _, _) in enumerate(wants) for cap in self._caps(now, pool_id)]
        requests = [
            cap.request(now, wants[i][1], self.standing.scale_up_label(wants[i][0], wants[i][2]), self.ttl, cap.cap_usd)
            for i, cap in asked
        ]
        grants = self.ledger.reserve_many(requests, now) if requests else []
        out: list[list[tuple[Cap, Grant]]] = [[] for _ in wants]
        for (i, cap), grant in zip(asked, grants, strict=True):
            out[i].append((cap, grant))
        return out

    def _cut(
        self,
        now: datetime,
        plan: CapacityPlan,
        states: Mapping[str, PoolState],
        new: Mapping[str, int],
        allowed: Mapping[str, int],
        headroom: Mapping[str, tuple[str, float]],
    ) -> Reserved:
        resizes: list[Resize] = []
        skips = list(plan.skips)
        alerts = []
        targets = dict(plan.targets)
        decisions = dict(plan.decisions)
        for resize in plan.resizes:
            if resize.pool_id not in allowed or not resize.is_scale_up:
                resizes.append(resize)
                continue
            wanted, granted = new[resize.key], allowed[resize.pool_id]
            to_units = _granted_target(resize, states.get(resize.pool_id), granted)
            budget, room = headroom[resize.pool_id]
            targets[resize.pool_id] = to_units
            back = to_units - resize.from_units - granted  # idle nodes being drained taken back: billed already
            detail = (
                f"budget {budget!r} shared with other agents granted {granted} of {wanted} more units "
                f"({resize.from_units}->{to_units} instead of ->{resize.to_units}"
                f"{f', {back} of them taken back from their drains, billed already' if back > 0 else ''}); "
                f"{room:,.2f} USD of headroom left after everyone's recorded and reserved spend"
            )
            reason = f"{resize.reason}; trimmed to {to_units} units by budget {budget!r} shared with other agents"
            decision = decisions.get(resize.pool_id)
            if decision is not None:
                cut = BudgetCut(budget, "shared", wanted - granted, detail)
                decision = replace(decision, budget_cuts=(*decision.budget_cuts, cut), target_units=to_units)
                decisions[resize.pool_id], reason = decision, decision.why()
            if to_units > resize.from_units:
                resizes.append(
                    replace(resize, to_units=to_units, reason=reason, key=resize_key(now, resize.pool_id, to_units))
                )
            skips.append(Skip(resize.pool_id, SkipReason.BUDGET, detail))
            alerts.append(
                AlertEvent(
                    kind=AlertKind.BUDGET_RESERVATION_REFUSED,
                    severity=Severity.WARNING,
                    at=now,
                    subject=f"budget {budget}: {resize.pool_id}",
                    summary=f"Scale-up of {resize.pool_id} {'trimmed' if to_units > resize.from_units else 'held'}: "
                    f"{detail}",
                    details={"holder": self.holder, "wanted_units": str(wanted), "granted_units": str(granted)},
                )
            )
        reserved = replace(plan, resizes=tuple(resizes), skips=tuple(skips), targets=targets, decisions=decisions)
        return Reserved(reserved, tuple(alerts))


def _new_units(resize: Resize, state: PoolState | None) -> int:
    """The units ``resize`` adds to its pool's bill: beyond the idle nodes being drained it takes back first."""
    if state is None:
        return resize.to_units - resize.from_units
    return billed_after(state, resize.to_units) - state.billed_units


def in_service(state: PoolState, to_units: int | None = None) -> int:
    """The units ``state``'s pool bills other than broken ones and nodes being drained (its target less the units
    waiting for resources), or once a scale-up brings it to ``to_units``: what a scale-up's reservation is labelled
    with and a successor's commit takes it over by (``commit``). A broken unit or a drained node may be gone when a
    successor reads the pool while the units the scale-up bought bill on."""
    target = state.target_units if to_units is None else max(to_units, state.target_units)
    return max(0, target - state.waiting_units)


def _labelled(resize: Resize, state: PoolState | None, added: int) -> int:
    """The units in service of ``resize``'s pool once ``added`` more bill: its scale-up reservation's label."""
    return resize.from_units + added if state is None else in_service(state, _granted_target(resize, state, added))


def _granted_target(resize: Resize, state: PoolState | None, granted: int) -> int:
    """The target at which ``resize`` adds only ``granted`` units to its pool's bill (``target_for``): the nodes
    being drained it takes back, and ``granted`` more."""
    if state is None:
        return resize.from_units + granted
    return min(resize.to_units, target_for(state, state.billed_units + granted))


def _kept(grants: Sequence[tuple[Cap, Grant]]) -> list[int]:
    return [g.reservation_id for _, g in grants if g.reservation_id is not None]

"""What the other agents sharing a budget mark as being released, and the claim of a tick's sheds against them.

Each agent marks in the ledger the units it is releasing (``agent.budget_reserve.BudgetReserver.commit``), and a
shed counts the others' marks as shed already (``releasing_elsewhere``; a hard stop, what their units kept cost:
``staying_elsewhere``). The planner reads them at the start of the tick, and the marks were written only once the
executor had acted: two agents ticking at the same instant both read before either wrote, and both shed the whole
excess (6 units released where 3 were needed). So before the executor acts, a tick that releases units of a budget
shared with other agents claims them (``ShedClaims.claim``): in one transaction under the ledger's writer lock
(``agent.ledger.reservations.Claims``, as a scale-up's grant is decided), it reads the others' marks again and
writes its own for the units its releases take off the bill. What the others marked since the planner read takes
that much off its sheds (their units go: counted as shed, as the planner would have counted them had it read them),
and of an agent claiming at the same instant, the second to take the lock reads the first's marks. The commit
replaces the claim with the marks of the releases carried out.

A claim says a release is being carried out before it is: only a release the executor sends is claimed. An agent
whose releases are only recorded (dry-run, ``sends`` false) reads the others' marks again and cuts its sheds by them,
but claims nothing, as it marks nothing at its commit. Once the executor acted, the claims of the releases it did not
carry out are taken back (``executed``; an executor that raises part-way is judged on what it did until then, a drain
started before a later node's raised too), and a tick that fails takes back those it has not yet judged (``release``),
so an agent whose ticks fail before it acts marks nothing and the others shed for its units. A release carried out
keeps its claim through a failure later in the tick (a later action raising, writing its spend, its commit): its
units are going, and the standing reservation that counts them as staying was not replaced, so taking it back had the
others shed for them again (and the agent buy back what they shed). The failed tick replaces that claim with the
release's marks, as its commit would have (two ticks): an agent ticking first at the next instant read no claim and
shed for the same units. A release whose call failed with no clear answer (``ActionResult.unclear``: a timeout, no
answer, an error raised once it was sent; ``agent.executor_resizes.unclear_release``) counts as carried out, as the
cloud may carry it out, until its pool's releases have had no clear answer for its lead time (``agent.budget_watch``);
a release the cloud refused does not. A claim lives one tick (not two, as a mark), so one a tick could neither
replace nor take back (its process killed, the ledger lost) is not read by the next ticks of the others.

The in-process ledgers (memory, SQLite) decide a claim under the process's lock: only one process writes them
(``leadtime run`` refuses ``remote_pools`` on them), so no other agent's marks can come between. A ledger without
claims (the shared file, ``agent.ledger.shared_file``, whose leader is the one process writing it) is read, then
written. A ledger that cannot be written leaves the plan as it is: a release is not held back for the ledger (its
marks then fail at the commit, as before).

A shed is cut only on a pool whose budgets all are shared with other agents, by what every cap of its budget
(the hard stop: its own reading over the next two ticks) saw marked since, in units of the pool counted as the
others' marks are (``carried``): never by more than the others' new marks pay for, so no cap the planner held is
left broken by the cut. The planner's record of a release names one budget, though the release may bring two back
under their caps: of a pool in several budgets, every cap of the others must see as much newly marked too (a
release ``team`` and ``lab`` both needed was cut whole by marks in ``team`` alone, and ``lab`` stayed over its cap a
tick longer). Only the budgets the release is needed for count so: one whose projection with the plan stays within
its cap with the released units kept (``lab`` with room for the whole fleet, where nobody marks) would otherwise keep
the whole release, and both agents shed for ``team`` (6 units where 3 were needed). An hourly cap is held over the
whole next hour too, which no snapshot projects: it counts there at the more of the units each of its pools this
agent runs bills now and after the plan (with room for the whole fleet, it counted always, and the two agents shed 6),
a pool not read this tick at the units the planner counts it at, one without a price at nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from agent.budget_reserve_caps import Cap, keyed, releasing_key, span_paid_for
from agent.budget_shed_cuts import EPS_USD, STOP, ShedAsked, cap_kinds, cut_plan, kept_units, resize_key
from agent.ledger.reservations import (
    Claims,
    CountedTo,
    Grant,
    OthersRead,
    ReservationRequest,
    Reservations,
    StandingHolder,
    carried,
)
from agent.planning.budget import Budget, CapKind, billed_after
from models import (
    DRAIN_KEY_MARK,
    ActionResult,
    ActionStatus,
    CapacityPlan,
    LedgerUnavailable,
    PoolState,
    Resize,
)

__all__ = ["ShedClaims", "resize_key"]  # the planner's key format, as the reservations of scale-ups use it

log = logging.getLogger(__name__)


def carried_out(result: ActionResult) -> bool:
    """Whether ``result``'s action counts as carried out for the claims and marks of a release: accepted or
    started, or failed with no clear answer (``ActionResult.unclear``: a timeout, no answer, an error after it was
    sent), which the cloud may carry out; counting it as not, the other agents shed for its units too."""
    return result.status in (ActionStatus.DONE, ActionStatus.STARTED) or result.unclear


class ShedClaims:
    """The marks of the other agents sharing ``budgets`` in ``ledger``, as this agent (``standing``) reads them, and
    the claim of its sheds. ``caps`` gives the caps over a pool (``BudgetReserver._caps``), ``mine`` this replica's
    reservations."""

    def __init__(
        self,
        ledger: Reservations,
        budgets: Sequence[Budget],
        standing: StandingHolder,
        tick: timedelta,
        caps: Callable[[datetime, str], list[Cap]],
        mine: Callable[[], list[int]],
        free: Collection[str] = (),
    ) -> None:
        self.ledger, self.budgets, self.standing, self.tick = ledger, list(budgets), standing, tick
        self._caps, self._mine = caps, mine
        self._free = frozenset(free)  # this agent's pools without a price: they cost nothing, whatever they hold
        self._seen: dict[tuple[str, str], tuple[datetime, float]] = {}  # (budget, reading) -> what the plan counted
        self._claimed: dict[str, list[int]] = {}  # pool -> its release's claims not yet judged carried out
        self._keys: dict[str, str] = {}  # pool -> the key of its release claimed (``executed`` judges it by)
        self._sent: list[int] = []  # the claims of releases carried out: the next commit replaces them
        # pool -> the marks failed ticks wrote for its releases carried out since (``release``): the commit's too
        self._marked: dict[str, list[int]] = {}
        self._at: datetime | None = None  # the tick of the claims made since the last commit
        self._released: dict[str, tuple[Resize, PoolState | None]] = {}  # pool -> its release claimed, and its state
        self._going: dict[str, int] = {}  # pool -> the units its release carried out takes off the bill (``executed``)
        self.sends = True  # whether the executor sends the releases (dry-run: they are only recorded, never claimed)

    def releasing_elsewhere(self, now: datetime, hourly: bool = False) -> dict[str, float]:
        """What the other agents sharing each budget mark as being released in its current month period (``hourly``:
        hour), counted as ``held_elsewhere`` (``held_elsewhere_this_hour``) counts their units: units they decided to
        release at one of their last two ticks and still bill. Their reservations still hold them; a shed counts them
        as shed already. A mark its agent stopped renewing (the agent died, or its ticks fail) lapses after two of
        its ticks, and the units count as staying again."""
        kind = CapKind.HOUR if hourly else CapKind.MONTH
        out = {}
        for budget in self.budgets:
            read = self._read(budget, now, kind)
            if read is not None:
                out[budget.name] = self._count(budget, kind, now, read)
        return out

    def staying_elsewhere(self, now: datetime, span: timedelta) -> dict[str, float]:
        """What the units the other agents sharing each budget with a commit horizon hold, less those they mark as
        being released, cost from their last tick to ``span`` from ``now``: what a hard stop projects over its next
        two ticks beside the spend recorded (their spend since their last tick is not recorded yet)."""
        out = {}
        for budget in self.budgets:
            going = self._read(budget, now, STOP, span)
            if going is None:
                continue
            period = budget.period(now)
            held = self.ledger.reserved_by_others(
                [budget.name, keyed(budget.name, period)], now, self.standing, self._mine(), going.to
            )
            out[budget.name] = max(0.0, held - self._count(budget, STOP, now, going))
        return out

    def taken(self) -> list[int]:
        """The claims made since the last commit, which replaces them with its marks (``committed`` once it did)."""
        marked = (i for ids in self._marked.values() for i in ids)
        return [*marked, *self._sent, *(i for ids in self._claimed.values() for i in ids)]

    def committed(self) -> None:
        """The commit replaced the claims ``taken`` gave it."""
        self._claimed, self._keys, self._sent, self._released, self._going = {}, {}, [], {}, {}
        self._marked = {}

    def executed(self, results: Sequence[ActionResult], given_up: Collection[str] = ()) -> None:
        """Judge the releases claimed by what the executor did (``results``): the claims of those it carried out
        (their size change, or a drain of theirs, accepted or started, or failed with no clear answer: ``unclear``,
        the cloud may carry it out) stay for the commit to replace, and those of the others are taken back now, their
        units staying. What each release carried out takes off the bill is kept for ``release``. ``given_up``: the
        pools whose releases with no clear answer are no longer counted as carried out (``agent.budget_watch``): the
        marks failed ticks wrote for them are taken back too."""
        accepted = {r.key for r in results if carried_out(r)}
        dropped: list[int] = [i for pool_id in sorted(given_up) for i in self._marked.pop(pool_id, [])]
        for pool_id, ids in self._claimed.items():
            key = self._keys.get(pool_id)
            sent = key is not None and any(k == key or k.startswith(key + DRAIN_KEY_MARK) for k in accepted)
            if sent:
                self._sent += ids
                self._going[pool_id] = self._going_units(pool_id, accepted)
            else:
                dropped += ids
        self._claimed, self._keys = {}, {}
        self._release(dropped, "claims of releases not carried out")

    def release(self) -> None:
        """The tick that made the claims since the last commit ends without one. Take back those of the releases not
        judged carried out (it failed before the executor acted; one raising part-way judged what it did first): they
        may not be carried out. Those of releases carried out are replaced with their marks, as the commit marks them
        (the units each takes off the bill, for two ticks; the next commit replaces them): a claim lives one tick, and
        an agent ticking first at the next instant would otherwise shed for units already going. The marks an earlier
        failed tick wrote stay (their units are still going, and no commit has counted them gone): a tick that failed
        before judging any release replaced them with nothing, and the others shed for those units. A ledger that
        cannot be written leaves the claims to lapse."""
        claimed = [i for ids in self._claimed.values() for i in ids]
        self._claimed, self._keys = {}, {}
        self._release(claimed, "claims of releases not carried out")
        sent, going, at = self._sent, self._going, self._at
        self._released, self._going = {}, {}
        if not sent or at is None:  # nothing judged carried out since the last commit or failed tick
            return
        marks = [
            (pool_id, cap.releasing(at, units, self.standing.label, self.tick))
            for pool_id, units in sorted(going.items())
            if units > 0
            for cap in self._current(at, pool_id)
        ]
        try:
            grants = self.ledger.reserve_many([mark for _, mark in marks], at, replacing=sent)
        except LedgerUnavailable as exc:
            log.warning("marks of releases carried out not written, their claims left to lapse: %s", exc)
            return
        self._sent = []
        for (pool_id, _), grant in zip(marks, grants, strict=False):
            if grant.reservation_id is not None:
                self._marked.setdefault(pool_id, []).append(grant.reservation_id)

    def _release(self, claimed: Sequence[int], what: str) -> None:
        """Take ``claimed`` back; a ledger that cannot be written leaves them to lapse (a tick)."""
        if not claimed:
            return
        try:
            self.ledger.release(claimed)
        except LedgerUnavailable as exc:
            log.warning("%s left to lapse at the next tick: %s", what, exc)

    def claim(
        self,
        now: datetime,
        plan: CapacityPlan,
        states: Mapping[str, PoolState],
        unread: Mapping[str, int] | None = None,
    ) -> CapacityPlan:
        """Mark the units ``plan``'s releases take off the bill of pools in shared budgets, reading the others' marks
        in the same transaction (``Claims``), and ``plan`` with its sheds cut by what the others marked since the
        planner read them. Releases the executor does not send (``sends`` false) are cut as well, but not marked.
        ``unread``: the units the planner counts each pool not read this tick at (``BudgetWatch.observe``)."""
        releases = [r for r in plan.resizes if not r.is_scale_up and self._current(now, r.pool_id)]
        if not releases:
            return plan
        sheds = self._sheds(now, plan, releases, states, unread or {})
        keys = sorted({(b.name, k) for s in sheds for b, k in s.readings})
        seen = {key: self._seen[key][1] for key in keys if self._seen.get(key, (None,))[0] == now}
        by_name = {b.name: b for b in self.budgets}
        read = {key: self._read(by_name[key[0]], now, key[1], 2 * self.tick) for key in keys if key in seen}
        kept = [key for key, r in read.items() if r is not None]
        asked = [r for r in read.values() if r is not None]

        def cut(figures: Sequence[float]) -> dict[str, int]:
            new = {key: max(0.0, f - seen[key]) for key, f in zip(kept, figures, strict=True)}
            return kept_units(sheds, new, lambda s, b, k: self._per_unit(now, s, b, k))

        owners: list[str] = []  # the pool of each request of the last choice: the one the ledger granted

        def choose(figures: Sequence[float]) -> list[ReservationRequest]:
            marks = self._marks(now, releases, cut(figures), states)
            owners[:] = [pool_id for pool_id, _ in marks]
            return [mark for _, mark in marks]

        try:
            if not self.sends:  # only recorded: read without the lock, nothing written
                figures = [self.ledger.reserved_by_others(r.budgets, now, r.holder, r.mine, r.to) for r in asked]
                grants: list[Grant] = []
            elif isinstance(self.ledger, Claims):
                figures, grants = self.ledger.claim(asked, choose, now)
            else:  # read, then written: another agent may write between
                figures = [self.ledger.reserved_by_others(r.budgets, now, r.holder, r.mine, r.to) for r in asked]
                grants = self.ledger.reserve_many(choose(figures), now)
        except LedgerUnavailable as exc:  # a release saves money: it is not held for the ledger
            log.warning("releases not claimed in the ledger, carried out as planned: %s", exc)
            return plan
        cuts = cut(figures)
        new = {key: max(0.0, f - seen[key]) for key, f in zip(kept, figures, strict=True)}
        out = cut_plan(now, plan, sheds, cuts, new)
        sent_as = {r.pool_id: r for r in out.resizes if not r.is_scale_up}
        if len(owners) != len(grants):  # one grant a request, in their order; else no release is judged sent
            owners = [""] * len(grants)
        for pool_id, grant in zip(owners, grants, strict=True):
            if grant.reservation_id is not None:
                self._claimed.setdefault(pool_id, []).append(grant.reservation_id)
                if pool_id in sent_as:
                    self._keys[pool_id] = sent_as[pool_id].key
                    self._released[pool_id] = (sent_as[pool_id], states.get(pool_id))
        self._at = now
        return out

    # -- internals ------------------------------------------------------------------------------------------
    def _read(self, budget: Budget, now: datetime, kind: str, span: timedelta | None = None) -> OthersRead | None:
        """How the marks of ``budget``'s cap of ``kind`` are read (``None``: it has no such cap shared)."""
        if not budget.remote_pools:
            return None
        if kind == CapKind.HOUR:
            if budget.hourly_cap_usd is None:
                return None
            hour = budget.hour(now)
            key, to = releasing_key(f"{budget.name}/{CapKind.HOUR}"), CountedTo(hour.end, hour.end)
        else:
            if budget.monthly_cap_usd is None or (kind == STOP and budget.commit_horizon is None):
                return None
            period = budget.period(now)
            own_end = span_paid_for(period, now, budget.commit_horizon)[1]
            until = min(period.end, now + (span or 2 * self.tick)) if kind == STOP else own_end
            key, to = releasing_key(budget.name), CountedTo(until, own_end)
        return OthersRead((key,), self.standing, tuple(self._mine()), to)

    def _count(self, budget: Budget, kind: str, now: datetime, read: OthersRead) -> float:
        """The others' marks of ``read``, remembered as what this tick's plan counts (``claim``)."""
        usd = self.ledger.reserved_by_others(read.budgets, now, read.holder, read.mine, read.to)
        self._seen[(budget.name, kind)] = (now, usd)
        return usd

    def _current(self, now: datetime, pool_id: str) -> list[Cap]:
        return [cap for cap in self._caps(now, pool_id) if cap.current]

    def _going_units(self, pool_id: str, accepted: Collection[str]) -> int:
        """The units ``pool_id``'s release claimed takes off the bill once carried out (``accepted``: the keys of
        the executor's results carried out), as the commit marks them (``releasing_units``): all of them for its size
        change, one a drain of it."""
        resize, state = self._released[pool_id]
        going = resize.from_units - resize.to_units
        if state is not None:
            going = max(0, state.billed_units - billed_after(state, resize.to_units))
        if resize.key not in accepted:
            going = min(going, sum(1 for key in accepted if key.startswith(resize.key + DRAIN_KEY_MARK)))
        return going

    def _sheds(
        self,
        now: datetime,
        plan: CapacityPlan,
        releases: Sequence[Resize],
        states: Mapping[str, PoolState],
        unread: Mapping[str, int],
    ) -> list[ShedAsked]:
        """The releases a broken cap of a shared budget asked for, on pools whose budgets all are shared: the hard
        stops first (busy units: the dearest to lose), then by pool. Of the pool's other shared budgets, those whose
        caps the plan's releases keep (``_needs``) must each pay for a unit kept too."""
        shared = {b.name: b for b in self.budgets if b.remote_pools}
        needs = {name: self._needs(now, plan, budget, releases, states, unread) for name, budget in shared.items()}
        out = []
        for resize in releases:
            decision = plan.decisions.get(resize.pool_id)
            if decision is None or any(resize.pool_id in b.pools and not b.remote_pools for b in self.budgets):
                continue
            for cut in decision.budget_cuts:
                budget = shared.get(cut.budget)
                if budget is None or cut.units <= 0:
                    continue
                kinds = (STOP,) if cut.cap.startswith(STOP) else cap_kinds(budget, stop=False)
                also = tuple(
                    b for b in shared.values() if resize.pool_id in b.pools and b.name != budget.name and needs[b.name]
                )
                out.append(ShedAsked(resize, budget, min(cut.units, resize.from_units - resize.to_units), kinds, also))
        return sorted(out, key=lambda s: (not s.resize.forced, s.resize.pool_id))

    def _needs(
        self,
        now: datetime,
        plan: CapacityPlan,
        budget: Budget,
        releases: Sequence[Resize],
        states: Mapping[str, PoolState],
        unread: Mapping[str, int],
    ) -> bool:
        """Whether ``budget``'s caps may need the units ``releases`` take off its pools' bill: unless each cap's
        projection with this plan (the planner's snapshot, released units billing one more tick) stays within it with
        all of them kept to the period's end, which holds its hard stop too, and an hourly cap's next hour does as
        well (``_next_hour_usd``: the planner holds the cap over it, and no snapshot projects it). A cap without a
        snapshot, or whose caps over a pool or reads of one are not known, needs them."""
        for kind, _, _ in budget.caps(now):
            key = budget.name if kind is CapKind.MONTH else f"{budget.name}/{kind}"
            snapshot = next((s for s in plan.budgets if s.budget == key), None)
            kept = self._kept_usd(now, key, budget, releases, states)
            if snapshot is None or snapshot.cap_usd is None or kept is None:
                return True
            if snapshot.projected_usd + kept > snapshot.cap_usd + EPS_USD:
                return True
            if kind is CapKind.HOUR:
                next_hour = self._next_hour_usd(now, key, budget, plan, states, unread)
                if next_hour is None or next_hour > snapshot.cap_usd + EPS_USD:
                    return True
        return False

    def _kept_usd(
        self, now: datetime, key: str, budget: Budget, releases: Sequence[Resize], states: Mapping[str, PoolState]
    ) -> float | None:
        """What the units ``releases`` take off the bill of ``budget``'s pools would add to its cap ``key``'s
        period, kept to its end from the tick after this one (when the ledger sees them gone); ``None`` where a pool's
        cap is not known."""
        kept = 0.0
        for resize in releases:
            if resize.pool_id not in budget.pools:
                continue
            cap = next((c for c in self._current(now, resize.pool_id) if c.key == key), None)
            start, end = span_paid_for(cap.period, now, cap.horizon) if cap is not None else (now, now)
            if cap is None or end <= start:
                return None
            state = states.get(resize.pool_id)
            units = resize.from_units - resize.to_units
            if state is not None:
                units = max(units, state.billed_units - billed_after(state, resize.to_units))
            billing = max(timedelta(0), cap.period.end - max(start, now + self.tick))  # once the ledger sees it gone
            kept += units * cap.per_unit_usd * (billing / (end - start))
        return kept

    def _next_hour_usd(
        self,
        now: datetime,
        key: str,
        budget: Budget,
        plan: CapacityPlan,
        states: Mapping[str, PoolState],
        unread: Mapping[str, int],
    ) -> float | None:
        """What the pools of ``budget`` this agent runs cost over the whole next hour, each at the more of the units
        it bills now and after ``plan``: no less than the planner projects that hour at with the plan's releases kept
        (it counts this agent's pools only). A pool not read counts at the units the planner counts it at
        (``unread``), one without a price at nothing. ``None`` where a pool's units (not read, and known by no one)
        or its hourly cap ``key`` are not known."""
        after = {r.pool_id: r.to_units for r in plan.resizes}
        total = 0.0
        for pool_id in sorted(budget.pools - budget.remote_pools - self._free):
            state = states.get(pool_id)
            units = unread.get(pool_id) if state is None else None
            if state is not None:
                units = max(state.billed_units, billed_after(state, after.get(pool_id, state.target_units)))
            cap = next((c for c in self._current(now, pool_id) if c.key == key), None)
            left = cap.period.remaining(now) if cap is not None else timedelta(0)
            if units is None or cap is None or left <= timedelta(0):
                return None
            total += units * cap.per_unit_usd * ((cap.period.end - cap.period.start) / left)
        return total

    def _per_unit(self, now: datetime, shed: ShedAsked, budget: Budget, kind: str) -> float:
        """What one unit of ``shed``'s pool marked now comes to in ``budget``'s reading of ``kind``, as the others'
        are."""
        read = self._read(budget, now, kind, 2 * self.tick)
        key = budget.name if kind != CapKind.HOUR else f"{budget.name}/{CapKind.HOUR}"
        cap = next((c for c in self._current(now, shed.resize.pool_id) if c.key == key), None)
        if read is None or cap is None:
            return 0.0
        mark = cap.releasing(now, 1, self.standing.label, self.tick)
        return carried(mark.amount_usd, mark.covers, now, read.to)

    def _marks(
        self, now: datetime, releases: Sequence[Resize], cuts: Mapping[str, int], states: Mapping[str, PoolState]
    ) -> list[tuple[str, ReservationRequest]]:
        """The marks of the units ``releases`` take off the bill once ``cuts`` kept some (as ``releasing_units``
        counts a release accepted), in every current shared cap over their pools, each for one tick (a claim: the
        commit replaces it within the tick), with the pool of each."""
        out = []
        for resize in releases:
            to_units = min(resize.from_units, resize.to_units + cuts.get(resize.pool_id, 0))
            state = states.get(resize.pool_id)
            going = resize.from_units - to_units
            if state is not None:
                going = max(0, state.billed_units - billed_after(state, to_units))
            if going > 0:
                holder = self.standing.label
                out += [
                    (resize.pool_id, replace(mark, ttl=min(mark.ttl, self.tick)))
                    for cap in self._current(now, resize.pool_id)
                    for mark in (cap.releasing(now, going, holder, self.tick),)
                ]
        return out

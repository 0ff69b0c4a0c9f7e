"""The shadow account of a dry-run daemon: what its recommendations would have cost and served, beside what ran.

Pure bookkeeping, no I/O. Each tick hands in the demand just observed, the pools as observed and the targets
the plan recommended. The interval since the previous tick is charged in arrears, as the simulator charges a
step: the units paid for during it (the units billed at the previous tick, as the ledger and the budgets count
them: ``PoolState.billed_units``) at the pools' prices, and the demand observed for it served cheapest first by the
units that were ready during it (``models.allocation``). Two runs are kept side by side:

* ``recommended``: a what-if copy of each pool that follows the recommended targets the way the simulated
  cluster does (clamped to the pool's bounds, paid from the request, ready after the pool's lead time, in-flight
  units cancelled first on a scale-down, no interruptions); paid: the units the observed pool would bill at the
  what-if's target (``agent.planning.budget.billed_after``: its broken units still billed, units waiting for
  resources unbilled);
* ``actual``: the pools as observed (paid: their billed units, serving: their ready units).

An interval is charged only when every demand class has an observed value and the previous tick is at most
``max_interval`` ago; otherwise it counts neither cost nor service (missing demand is never read as zero).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from actuators.simulated import cancel_in_flight
from agent.planning.budget import billed_after
from models import PoolSpec, PoolState
from models.allocation import allocate, unassigned

RUNS = ("recommended", "actual")
DAYS_KEPT = 31


@dataclass
class Totals:
    """Cost and service of one run over the charged intervals."""

    cost_usd: float = 0.0
    demanded_chip_hours: float = 0.0
    unserved_chip_hours: float = 0.0

    def add(self, cost_usd: float, demanded: float, unserved: float) -> None:
        self.cost_usd += cost_usd
        self.demanded_chip_hours += demanded
        self.unserved_chip_hours += unserved

    @property
    def unserved_fraction(self) -> float:
        return self.unserved_chip_hours / self.demanded_chip_hours if self.demanded_chip_hours > 0 else 0.0


@dataclass
class Period:
    """Both runs over one span (the whole account, or one UTC day), and how many intervals were charged."""

    runs: dict[str, Totals] = field(default_factory=lambda: {run: Totals() for run in RUNS})
    hours: float = 0.0
    intervals: int = 0
    skipped: int = 0

    @property
    def savings_usd(self) -> float:
        """What following the recommendations would have saved against what ran (negative: it costs more)."""
        return self.runs["actual"].cost_usd - self.runs["recommended"].cost_usd


@dataclass
class WhatIfPool:
    """A pool that follows the recommended targets: ``ready`` units now, ``arrivals`` still in flight."""

    target: int
    ready: int
    arrivals: list[tuple[datetime, int]] = field(default_factory=list)

    def advance(self, now: datetime) -> None:
        self.ready += sum(n for at, n in self.arrivals if at <= now)
        self.arrivals = [(at, n) for at, n in self.arrivals if at > now]

    def resize(self, spec: PoolSpec, to_units: int, now: datetime) -> None:
        to_units = spec.clamp(to_units)
        if to_units > self.target:
            if spec.lead_time <= timedelta(0):
                self.ready += to_units - self.target
            else:
                self.arrivals.append((now + spec.lead_time, to_units - self.target))
        units = cancel_in_flight(self.arrivals, self.target - to_units)  # in-flight units go first, as simulated
        self.ready -= max(0, min(units, self.ready))
        self.target = to_units


@dataclass
class _Seen:
    """What was paid for and ready per run and pool at the previous tick, for the interval that follows it."""

    at: datetime
    paid: dict[str, dict[str, int]]
    ready: dict[str, dict[str, int]]


class ShadowAccount:
    def __init__(self, pools: Sequence[PoolSpec], classes: Sequence[str], max_interval: timedelta) -> None:
        self.pools = tuple(pools)
        self.classes = tuple(classes)
        self.max_interval = max_interval
        self.total = Period()
        self.days: dict[date, Period] = {}
        self.what_if: dict[str, WhatIfPool] = {}
        self.last: _Seen | None = None

    def record(
        self,
        now: datetime,
        demand: Mapping[str, float],
        observed: Sequence[PoolState],
        targets: Mapping[str, int],
    ) -> bool:
        """Charge the interval since the previous tick (``demand``: what was observed for it), then take this
        tick's pools and recommendations. Returns whether the interval was charged."""
        charged = self._charge(now, demand)
        by_id = {p.pool_id: p for p in observed}
        for spec in self.pools:
            seen = by_id.get(spec.pool_id)
            pool = self.what_if.get(spec.pool_id)
            if pool is None:  # the what-if starts where the pool is
                start = seen.target_units if seen is not None else spec.min_units
                pool = self.what_if[spec.pool_id] = WhatIfPool(start, seen.ready_units if seen else start)
            pool.advance(now)
            target = targets.get(spec.pool_id, pool.target)  # not in the plan: the what-if holds
            pool.resize(spec, target, now)
        complete = all(spec.pool_id in by_id for spec in self.pools)
        self.last = (
            _Seen(
                now,
                paid={
                    "recommended": {p: _billed(by_id.get(p), w.target) for p, w in self.what_if.items()},
                    "actual": {p: s.billed_units for p, s in by_id.items()},
                },
                ready={
                    "recommended": {p: w.ready for p, w in self.what_if.items()},
                    "actual": {p: s.ready_units for p, s in by_id.items()},
                },
            )
            if complete
            else None  # a pool not seen leaves the next interval uncharged: its units are unknown
        )
        return charged

    def _charge(self, now: datetime, demand: Mapping[str, float]) -> bool:
        last = self.last
        if last is None:
            return False
        elapsed = now - last.at
        day = self.days.setdefault(last.at.date(), Period())
        if elapsed <= timedelta(0) or elapsed > self.max_interval or any(c not in demand for c in self.classes):
            self.total.skipped += 1
            day.skipped += 1
            return False
        hours = elapsed.total_seconds() / 3600.0
        wanted = {c: max(0.0, float(demand[c])) for c in self.classes}
        demanded = sum(wanted.values()) * hours
        for period in (self.total, day):
            period.hours += hours
            period.intervals += 1
        for run in RUNS:
            paid, ready = last.paid[run], last.ready[run]
            cost = sum(paid.get(p.pool_id, 0) * p.price_per_unit_hour_usd for p in self.pools) * hours
            capacity = {p.pool_id: float(ready.get(p.pool_id, 0) * p.chips_per_unit) for p in self.pools}
            left = unassigned(wanted, allocate(wanted, self.pools, capacity))
            unserved = sum(left.values()) * hours
            for period in (self.total, day):
                period.runs[run].add(cost, demanded, unserved)
        for old in sorted(self.days)[:-DAYS_KEPT]:
            del self.days[old]
        return True

    # -- persistence ----------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        last = self.last
        return {
            "version": 1,
            "total": _period_dict(self.total),
            "days": {d.isoformat(): _period_dict(p) for d, p in sorted(self.days.items())},
            "what_if": {
                pool_id: {
                    "target": w.target,
                    "ready": w.ready,
                    "arrivals": [[at.isoformat(), n] for at, n in w.arrivals],
                }
                for pool_id, w in sorted(self.what_if.items())
            },
            "last": None if last is None else {"at": last.at.isoformat(), "paid": last.paid, "ready": last.ready},
        }

    def load(self, data: Mapping[str, Any]) -> None:
        """Continue from a saved account; raises ``ValueError`` naming what is wrong with it."""
        try:
            if data.get("version") != 1:
                raise ValueError(f"unknown version {data.get('version')!r}")
            self.total = _period(data["total"])
            self.days = {date.fromisoformat(d): _period(p) for d, p in data["days"].items()}
            self.what_if = {
                pool_id: WhatIfPool(
                    int(w["target"]),
                    int(w["ready"]),
                    [(datetime.fromisoformat(at), int(n)) for at, n in w["arrivals"]],
                )
                for pool_id, w in data["what_if"].items()
            }
            last = data["last"]
            self.last = (
                None
                if last is None
                else _Seen(
                    datetime.fromisoformat(last["at"]),
                    paid={r: {p: int(n) for p, n in last["paid"][r].items()} for r in RUNS},
                    ready={r: {p: int(n) for p, n in last["ready"][r].items()} for r in RUNS},
                )
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"missing or malformed field {exc}") from None


def _period_dict(period: Period) -> dict[str, Any]:
    return {
        "hours": period.hours,
        "intervals": period.intervals,
        "skipped": period.skipped,
        "runs": {
            run: {
                "cost_usd": t.cost_usd,
                "demanded_chip_hours": t.demanded_chip_hours,
                "unserved_chip_hours": t.unserved_chip_hours,
            }
            for run, t in period.runs.items()
        },
    }


def _period(data: Mapping[str, Any]) -> Period:
    runs = {
        run: Totals(
            float(data["runs"][run]["cost_usd"]),
            float(data["runs"][run]["demanded_chip_hours"]),
            float(data["runs"][run]["unserved_chip_hours"]),
        )
        for run in RUNS
    }
    return Period(runs, float(data["hours"]), int(data["intervals"]), int(data["skipped"]))


def _billed(seen: PoolState | None, target: int) -> int:
    """The units a pool seen as ``seen`` bills at a target of ``target`` (the target itself for a pool not seen)."""
    return target if seen is None else billed_after(seen, target)

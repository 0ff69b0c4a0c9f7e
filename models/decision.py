"""Why a pool's target is what it is: one record per pool and tick, from demand to the target. Pure data.

The planner fills a ``PoolDecision`` for every pool; the chain reads, in order:

need (chips of each demand given to the pool) -> whole units -> plus headroom and spot reserve -> within the
pool's bounds -> paced by the per-tick step (and, for a release, by the units idle long enough) -> trimmed by
budget caps -> the target. Holds say why the pool was not changed at all. A resize's reason, a skip's detail,
the log line, the Events and the reports are all rendered from this record, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from models.durations import format_duration


class SkipReason(StrEnum):
    """Why the planner decided not to change a pool (or changed it less than it wanted)."""

    COOLDOWN = "cooldown"
    IN_FLIGHT = "in-flight"
    MISSING_DATA = "missing-data"
    NOT_IDLE = "not-idle"
    STABILIZING = "stabilizing"
    BUDGET = "budget"
    BACKOFF = "backoff"
    PERMANENT_ERROR = "permanent-error"
    STEP_LIMIT = "step-limit"


@dataclass(frozen=True)
class DemandShare:
    """One demand (a class, or a group of classes planned together) and the chips of it this pool takes.

    ``need`` is the larger of the forecast ``peak`` (the ``service_level`` quantile over the lead time and one
    tick) and the demand ``observed`` now, for the demand as a whole; ``chips`` is the part given to this pool.
    ``unpaced_need`` is that larger value when a budget paced on a forecast funded less of it (``need``).
    ``summed``: of a group with no forecast of its summed demand, the classes whose own peaks ``peak`` adds up
    (empty: ``peak``, if any, is the demand's own forecast; ``own_peak`` says a group's is). The group's classes
    lacking a figure, each in one list: ``missing`` have neither a current value nor a forecast; ``no_current`` have a
    forecast but no current value (``observed`` leaves them out); ``no_forecast`` have a current value, kept beside
    the name and counted in ``observed``, but no forecast (a summed ``peak`` leaves them out). Beside a group's own
    peak every class's history is counted in it; a group with no peak at all (no forecast of its own nor of any
    class) counts a class lacking a figure nowhere but in ``observed``. The log line lists every name; the text
    names a few and counts the rest, so that a resize's reason keeps its target within an Event's note.
    """

    demand: str
    service_level: float
    peak: float | None
    observed: float | None
    need: float
    chips: float
    unpaced_need: float | None = None
    summed: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    no_current: tuple[str, ...] = ()
    no_forecast: tuple[tuple[str, float], ...] = ()
    own_peak: bool = False

    def peak_text(self) -> str:
        """The peak as what it is: the demand's own quantile, or the sum of its known classes' quantiles."""
        quantile = f"q{self.service_level:g}"
        if not self.summed:
            return f"{quantile} peak {_num(self.peak)}"
        if len(self.summed) <= _NAMED:
            return f"sum of the {quantile} peaks of {', '.join(self.summed)}: {_num(self.peak)}"
        left_out = [*self.missing, *(name for name, _ in self.no_forecast)]
        but = f" (all but {_names(left_out)})" if left_out else ""
        return f"sum of the {quantile} peaks of {len(self.summed)} classes{but}: {_num(self.peak)}"

    def gaps_text(self) -> str:
        """What went into each figure of the group's classes lacking one ('' when none lacks any)."""
        own = self.own_peak  # the group's own forecast: every class's history is in its peak
        quantile = f"q{self.service_level:g}"
        parts = []
        if self.missing:
            parts.append(
                f"{_names(self.missing)}: no current value and no forecast of {_its(self.missing)} own, counted only "
                "in the group's peak"
                if own
                else f"{_names(self.missing)} without data, not counted"
            )
        if self.no_current:
            peaks = f"its {quantile} peak" if len(self.no_current) == 1 else f"their {quantile} peaks"
            counted = "counted in the group's peak" if own else f"{peaks} counted"
            parts.append(f"{_names(self.no_current)}: no current value, {counted}")
        if self.no_forecast:
            names = [name for name, _ in self.no_forecast]
            now = sum(value for _, value in self.no_forecast)
            forecast = f"no forecast of {_its(names)} own" if own else "no forecast"
            parts.append(f"{_names(names)}: {forecast}, {_its(names)} {now:g} now counted")
        return ", ".join(parts)


_NAMED = 5
"""Names listed in a share's text before the rest are counted (the log line lists them all)."""


def _names(names: Sequence[str]) -> str:
    if len(names) <= _NAMED:
        return ", ".join(names)
    return f"{len(names)} classes ({', '.join(names[:3])} and {len(names) - 3} more)"


def _its(names: Sequence[str]) -> str:
    return "its" if len(names) == 1 else "their"


@dataclass(frozen=True)
class BudgetCut:
    """Units a budget took off the pool's target (a trimmed scale-up, or over-cap units to release).
    ``unknown_usd``: of a trim, the room the budget's pools nobody knows the units of kept back, set only where the
    cut would have been smaller without it (0 where they changed nothing, and for a release or a shared cut)."""

    budget: str
    cap: str
    units: int
    detail: str
    unknown_usd: float = 0.0


@dataclass(frozen=True)
class Hold:
    """Why the pool is not changed (or changed less) this tick, apart from the bounds, the step and budgets."""

    reason: SkipReason
    detail: str


class CarryCause(StrEnum):
    """What kept a spot pool from holding part of its reserve: its bound (``max_units`` less its broken units), or
    its current size while it cannot grow (backed off after a stockout, blocked after a permanent error), or the
    units it is known to hold while its state could not be read."""

    BOUND = "bound"
    BACKED_OFF = "backed-off"
    BLOCKED = "blocked"
    NOT_READ = "not-read"


@dataclass(frozen=True)
class ReserveCarry:
    """Chips of a spot pool's interruption reserve that it cannot hold (``cause``: its bound, or its size while it
    cannot grow), and the pool that holds them instead (``target``: the next eligible pool with room, cheapest
    first; None when no pool that may serve the spot pool's demand had room, so they are not held)."""

    source: str
    target: str | None
    chips: float
    cause: CarryCause = CarryCause.BOUND


@dataclass(frozen=True)
class PoolDecision:
    """The whole chain from demand to the target of one pool at one tick.

    Units are whole units of the pool (``chips_per_unit`` chips each). ``current_units`` is None when the
    pool's state could not be observed. ``stepped_units`` is the target after pacing: the per-tick step limit
    (``step_limit`` is set when it cut the change) and, for a release, the units idle long enough
    (``idle_settled`` of them idle for ``idle_window``); a held pool is not paced on (``stepped_units`` is its
    current size). ``target_units`` is what the pool is asked to be this tick: ``current_units`` when held, None
    when the pool is not observed.
    ``nodes`` are the nodes a release drains when they are chosen at plan time; otherwise ``nodes_note`` says who
    chooses them.
    ``unplaced`` holds the demand this pool may serve that no pool could take this tick (``chips`` is the part
    left over: every pool that may serve it is at its bounds, in back-off or blocked). ``reserve_carries`` are the
    spot reserve chips this pool's bound cut and where they went, or the ones it holds for another spot pool's
    reserve (``carried_reserve_units`` units, added before the bounds). ``budgets`` names the budgets over the
    pool, each with a cap: they priced its scale-up (empty for a pool in no budget). ``no_data`` names the classes the
    pool serves that have no trustworthy demand: not counted in its need (a release waits for them).
    """

    pool_id: str
    fixed: bool
    lead_time: timedelta
    chips_per_unit: int
    min_units: int
    max_units: int
    current_units: int | None
    demand: tuple[DemandShare, ...]
    rounded_units: int
    headroom_units: int
    spot_reserve_units: int
    bounded_units: int
    stepped_units: int
    target_units: int | None
    step_limit: int | None = None
    idle_settled: int | None = None
    idle_window: timedelta | None = None
    budget_cuts: tuple[BudgetCut, ...] = ()
    holds: tuple[Hold, ...] = ()
    nodes: tuple[str, ...] = ()
    nodes_note: str = ""
    unplaced: tuple[DemandShare, ...] = ()
    carried_reserve_units: int = 0
    reserve_carries: tuple[ReserveCarry, ...] = ()
    broken_units: int = 0  # paid for and serving nothing: they take their room from max_units
    budgets: tuple[str, ...] = ()  # the budgets over the pool (each with a cap): they priced its scale-up
    no_data: tuple[str, ...] = ()  # classes it serves without trustworthy demand: not counted in its need
    available_units: int | None = None  # an on-prem pool's units its capacity query read as able to take work

    @property
    def need_chips(self) -> float:
        return sum(share.chips for share in self.demand)

    @property
    def budgeted_units(self) -> int:
        """The target after budget cuts, before holds (the same as ``target_units`` unless the pool is held)."""
        return self.stepped_units - sum(cut.units for cut in self.budget_cuts)

    @property
    def held(self) -> bool:
        return bool(self.holds) and self.target_units == self.current_units

    def stages(self) -> dict[str, float]:
        """The chain as numbers, in units (the need in fractional units): what the metrics show."""
        stages = {
            "need": self.need_chips / self.chips_per_unit,
            "rounded": float(self.rounded_units),
            "bounded": float(self.bounded_units),
            "stepped": float(self.stepped_units),
            "budgeted": float(self.budgeted_units),
        }
        if self.target_units is not None:
            stages["target"] = float(self.target_units)
        return stages

    def why(self) -> str:
        """The chain in one line a person can read, e.g. for a resize's reason."""
        parts = [self._need_text()]
        extra = ""
        if self.headroom_units:
            extra += f" + {self.headroom_units} headroom"
        if self.spot_reserve_units:
            extra += f" + {self.spot_reserve_units} spot reserve"
        held_for = sorted({c.source for c in self.reserve_carries if c.target == self.pool_id})
        if self.carried_reserve_units:
            extra += f" + {self.carried_reserve_units} for the spot reserve of {', '.join(held_for)}"
        if self.fixed:
            # its size is its max_units (its min_units too): bounded_units is its demand's units within its bounds
            read = self.available_units
            takes = f", its demand takes {self.rounded_units}" if self.rounded_units else ""
            parts.append(f"fixed pool of {self.max_units} units" + _available(read, self.max_units) + takes)
            if self.carried_reserve_units:
                parts.append(f"{self.carried_reserve_units} units of it for the spot reserve of {', '.join(held_for)}")
        else:
            wanted = self.rounded_units + self.headroom_units + self.spot_reserve_units + self.carried_reserve_units
            parts.append(f"{self.rounded_units} units of {self.chips_per_unit} chips{extra} = {wanted}")
            if wanted != self.bounded_units:
                broken = f" less {self.broken_units} broken" if self.broken_units else ""
                parts.append(f"bounds {self.min_units}..{self.max_units}{broken}: {self.bounded_units}")
        parts.extend(self._carry_text())
        paused = any(hold.reason is not SkipReason.BUDGET for hold in self.holds)
        if self.stepped_units != self.bounded_units and self.current_units is not None and not paused:
            parts.append(self._pace_text())
        left = self.stepped_units
        for cut in self.budget_cuts:
            left -= cut.units
            parts.append(f"budget {cut.budget!r} ({cut.cap} cap) -{cut.units}: {left}")
        for hold in self.holds:
            parts.append(f"{hold.reason}: {hold.detail}")
        parts.append("target unknown" if self.target_units is None else f"target {self.target_units}")
        return " -> ".join(parts)

    def log_fields(self) -> dict[str, str | int | float | None]:
        """The record as flat fields for one structured log line (``None``: unknown or not applicable)."""
        return {
            "pool": self.pool_id,
            "current": self.current_units,
            "need_chips": round(self.need_chips, 3),
            "rounded": self.rounded_units,
            "headroom": self.headroom_units,
            "spot_reserve": self.spot_reserve_units,
            "bounded": self.bounded_units,
            "stepped": self.stepped_units,
            "budgeted": self.budgeted_units,
            "target": self.target_units,
            "step_limit": self.step_limit,
            "budget_cuts": ",".join(f"{c.budget}/{c.cap}:{c.units}" for c in self.budget_cuts) or None,
            "holds": ",".join(str(h.reason) for h in self.holds) or None,
            "demand": ",".join(
                f"{s.demand}:q{s.service_level:g}:peak={_num(s.peak)}:now={_num(s.observed)}:chips={s.chips:g}"
                + (f":peak_summed={'+'.join(s.summed)}" if s.summed else "")
                + (f":missing={'+'.join(s.missing)}" if s.missing else "")
                + (f":no_now={'+'.join(s.no_current)}" if s.no_current else "")
                + (f":no_forecast={'+'.join(n for n, _ in s.no_forecast)}" if s.no_forecast else "")
                for s in self.demand
            )
            or None,
            "nodes": ",".join(self.nodes) or None,
            "unplaced": ",".join(f"{s.demand}:chips={s.chips:g}" for s in self.unplaced) or None,
            "no_data": ",".join(self.no_data) or None,
            "carried_reserve": self.carried_reserve_units,
            "reserve_carries": ",".join(
                f"{c.source}>{c.target or 'none'}:chips={c.chips:g}"
                + ("" if c.cause is CarryCause.BOUND else f":cause={c.cause}")
                for c in self.reserve_carries
            )
            or None,
        }

    def _need_text(self) -> str:
        text = self._assigned_text()
        if self.unplaced:
            left = ", ".join(f"{s.chips:g} of {s.need:g} chips of {s.demand}" for s in self.unplaced)
            text += f"; no pool that may serve it has room for {left}"
        return text

    def _carry_text(self) -> list[str]:
        parts = []
        for carry in self.reserve_carries:
            if carry.source != self.pool_id:
                continue
            over = f"{carry.chips:g} chips of spot reserve {self._over_text(carry.cause)}"
            if carry.target is None:
                parts.append(f"{over} not held: no eligible pool has room")
            else:
                parts.append(f"{over} held in {carry.target}")
        return parts

    def _over_text(self, cause: CarryCause) -> str:
        """What the carried reserve is over: the bound, or the size the pool is held at while it cannot grow."""
        if cause is CarryCause.NOT_READ:
            return "over the units it is known to hold (state not read: cannot grow)"
        if cause is CarryCause.BOUND:
            return "over the bound"
        why = "backed off" if cause is CarryCause.BACKED_OFF else "blocked"
        return f"over its current {_num(self.current_units)} units ({why}: cannot grow)"

    def _assigned_text(self) -> str:
        uncounted = f"{_names(self.no_data)}: no data, not counted" if self.no_data else ""
        if not self.demand:
            return f"no demand assigned ({uncounted})" if uncounted else "no demand assigned"
        shares = "; ".join(
            f"{s.demand}: {s.peak_text()}, now {_num(s.observed)}"
            + (f", {gaps}" if (gaps := s.gaps_text()) else "")
            + ("" if s.unpaced_need is None else f", budget pacing funds {s.need:g} of {s.unpaced_need:g}")
            + ("" if abs(s.chips - s.need) < 1e-9 else f", {s.chips:g} of {s.need:g} here")
            for s in self.demand
        )
        shares += f"; {uncounted}" if uncounted else ""
        return f"need {self.need_chips:g} chips within lead time {format_duration(self.lead_time)} ({shares})"

    def _pace_text(self) -> str:
        current = self.current_units or 0
        if self.bounded_units > current:
            return f"step limit +{self.step_limit}/tick: {self.stepped_units}"
        pace = []
        if self.idle_settled is not None and self.idle_window is not None:
            pace.append(f"{self.idle_settled} units idle for {format_duration(self.idle_window)}")
        if self.step_limit is not None:
            pace.append(f"step limit -{self.step_limit}/tick")
        text = " and ".join(pace) or "held"
        return f"{text}: {self.stepped_units}"


def _num(value: float | None) -> str:
    return "unknown" if value is None else f"{value:g}"


def _available(units: int | None, max_units: int) -> str:
    """An on-prem pool's units able to take work, as its capacity query read them (nothing when not read)."""
    return "" if units is None else f", available: {units} of {max_units}"

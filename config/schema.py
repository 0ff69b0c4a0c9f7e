"""The configuration schema: grouped, typed, frozen settings with units in their names.

Unknown keys are rejected everywhere. Field-level rules live here; rules that relate several parts of the file
(names that must exist, bounds that must be ordered) live in ``config.rules`` so that every problem is reported
with its own key path.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from datetime import date, timedelta
from typing import Annotated, Literal, Self

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, PlainSerializer, model_validator

from config.alerts import AlertSettings
from config.aws import AwsSettings
from config.cloud import CloudSettings
from config.daemon import DaemonSettings
from config.durations import at_least_one_second, format_duration, parse_duration
from config.energy import EnergySettings
from config.fields import NumbersOnly
from config.ledger import LedgerSettings
from config.prometheus import PrometheusSettings
from models import AcceleratorFamily, CapacityTier, ConfigProblem, DemandClass, PoolKind, PoolSpec

Duration = Annotated[
    timedelta,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str),
]
Probability = Annotated[float, Field(gt=0.0, lt=1.0)]
Step = Annotated[Duration, AfterValidator(at_least_one_second)]
# How a budget's monthly cap is spent over its period: ``none`` holds only the cap; ``forecast`` paces the money
# over the period from a forecast of its remaining burst need, funding the dearest waiting first.
Pacing = Literal["none", "forecast"]
# The forecasters a configuration may name (``forecast.model``): the names ``leadtime backtest``, ``auto``'s notes and
# the reports use, each for the same model (``forecasting.registry``).
ModelName = Literal["auto", "naive", "persistence", "last-value", "seasonal_naive", "ets", "stl", "lightgbm"]
# Upper bounds that no real price or cap reaches: a larger value is a typo, and an unbounded one overflows sums.
MAX_PRICE_USD = 1e6
MAX_CAP_USD = 1e12


class _Section(NumbersOnly):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class DemandClassSettings(_Section):
    name: str = Field(min_length=1)
    family: AcceleratorFamily = AcceleratorFamily.GPU
    series: str | None = None
    waiting_cost_per_accelerator_hour_usd: float | None = Field(default=None, ge=0.0, le=MAX_PRICE_USD)
    service_level: Probability | None = None

    def to_demand_class(self) -> DemandClass:
        return DemandClass(
            name=self.name,
            family=self.family,
            series=self.series,
            waiting_cost_per_accelerator_hour=self.waiting_cost_per_accelerator_hour_usd,
            service_level=self.service_level,
        )


_POOL_ID = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class PoolSettings(_Section):
    id: str = Field(min_length=1, pattern=_POOL_ID)
    # The ids the pool was known by before a rename: the ledger keeps spend by pool id, so the spend recorded
    # under them counts as the pool's own in its budgets (config.rules keeps them unique and no pool's id).
    previous_ids: tuple[Annotated[str, Field(min_length=1, pattern=_POOL_ID)], ...] = ()
    kind: PoolKind
    tier: CapacityTier | None = None
    family: AcceleratorFamily = AcceleratorFamily.GPU
    chips_per_unit: int = Field(ge=1)
    min_units: int = Field(default=0, ge=0)
    max_units: int = Field(ge=0)
    price_per_chip_hour_usd: float | None = Field(default=None, ge=0.0, le=MAX_PRICE_USD)
    price_per_unit_hour_usd: float | None = Field(default=None, ge=0.0, le=MAX_PRICE_USD)
    lead_time: Duration
    serves: tuple[str, ...] = Field(min_length=1)
    spot_interruption_per_hour: float = Field(default=0.0, ge=0.0, le=1.0)

    @property
    def capacity_tier(self) -> CapacityTier:
        """The tier given, else the kind's own: ``on-prem`` for an on-prem pool (its cost is sunk, so it is filled
        first), ``on-demand`` for a cloud pool."""
        if self.tier is not None:
            return self.tier
        return CapacityTier.ON_PREM if self.kind is PoolKind.ON_PREM else CapacityTier.ON_DEMAND

    @property
    def unit_price_usd(self) -> float:
        if self.price_per_unit_hour_usd is not None:
            return self.price_per_unit_hour_usd
        return (self.price_per_chip_hour_usd or 0.0) * self.chips_per_unit

    def to_spec(self) -> PoolSpec:
        return PoolSpec(
            pool_id=self.id,
            kind=self.kind,
            tier=self.capacity_tier,
            family=self.family,
            chips_per_unit=self.chips_per_unit,
            min_units=self.min_units,
            max_units=self.max_units,
            price_per_unit_hour_usd=self.unit_price_usd,
            lead_time=self.lead_time,
            serves=self.serves,
            spot_interruption_per_hour=self.spot_interruption_per_hour,
        )


class PlannerSettings(_Section):
    """How forecasts become targets. ``service_level`` is the forecast quantile to provision for, for every class
    without its own; when unset it comes from each class's waiting cost against the chip-hour price of the cheapest
    cloud pool serving the class (newsvendor critical ratio), else 0.9."""

    service_level: Probability | None = None
    waiting_cost_per_accelerator_hour_usd: float | None = Field(default=None, ge=0.0, le=MAX_PRICE_USD)
    headroom_units: int = Field(default=0, ge=0)
    scale_down_stabilization: Duration = timedelta(minutes=10)
    # Releasing an idle unit and asking for it again costs a lead time of billing (billing starts at the request)
    # and exposes demand for a lead time while it provisions: like renting versus buying, hold idle units for
    # at least this many of their pool's lead times before releasing them (0 turns the rule off).
    idle_hold_lead_times: float = Field(default=2.0, ge=0.0, le=10.0)
    # A pool of whole slices serving one demand group alone also asks the forecast before releasing a slice idle
    # for the hold: only while the probability that it is needed again within its lead time is below the break-even
    # 1 - service level. On helios-earth-slices.yaml at equal service it cut the cost at 0.1% unserved from 1.413x
    # to 1.345x the oracle, at 0.5% from 1.022x to 1.021x. (Without the hold first, as it once was, it cost 1.338x
    # at 0.1% but 1.069x at 0.5%; idle_hold_lead_times 0 gives that.)
    slice_release_by_forecast: bool = True
    max_scale_up_units_per_tick: int | None = Field(default=None, ge=1)
    max_scale_down_units_per_tick: int | None = Field(default=None, ge=1)
    min_direction_change_interval: Duration = timedelta(0)


def _changed_model_meaning(value: object) -> object:
    """``naive`` in a configuration was bare persistence until this release, while the reports, ``auto`` and
    ``leadtime backtest`` call the calibrated last value ``naive``: pinning the model a report named gave a forecast
    with no band. It is now the calibrated last value everywhere (more headroom wherever demand has often risen
    within the horizon before: its upper quantiles then sit above the last value); a configuration that says it is
    told so once, at load, with the name that keeps the old forecast."""
    if value == "naive":
        warnings.warn(  # FutureWarning: shown to the person running leadtime, not only to developers
            "forecast.model: 'naive' is now the calibrated last value (the model the reports and backtest call naive: "
            "the newest value with a band from its recent errors), no longer bare persistence; to keep every quantile "
            "at the newest value, write 'persistence'",
            FutureWarning,
            stacklevel=2,
        )
    return value


class ForecastSettings(_Section):
    """``refit_interval``: how often the loop refits: forecasts are recalibrated on the newest residuals (cheap).
    ``reselect_interval``: how often ``auto`` re-chooses the model per demand class by backtest (cheap, reads stored
    residuals). ``retrain_interval``: how often the models themselves are retrained (costly). Each is at least a
    second here and at least one tick (``config.rules``): the scheduler would otherwise run refits back to back."""

    model: Annotated[ModelName, BeforeValidator(_changed_model_meaning)] = "auto"
    quantiles: tuple[Probability, ...] = (0.5, 0.9, 0.95)
    history: Duration = timedelta(days=7)
    refit_interval: Step = timedelta(hours=1)
    retrain_interval: Step = timedelta(days=1)
    reselect_interval: Step = timedelta(days=1)
    step: Step = timedelta(minutes=5)
    max_staleness: Duration = timedelta(minutes=15)

    @model_validator(mode="after")
    def _history_long_enough(self) -> Self:
        """A history shorter than two steps holds no range to read (``recommend`` stopped on Prometheus' "empty time
        range"); one shorter than ``calibration_history`` leaves every model but ``persistence`` uncalibrated, each
        class forecast as its bare last value. Both are refused: a bare number is seconds, so ``history: 72`` meant
        72 seconds, and the load said nothing."""
        calibrated = self.model != "persistence"
        needed = calibration_history(self.step) if calibrated else 2 * self.step
        if self.history >= needed:
            return self
        why = (
            f"the calibration of the forecast's band takes {format_duration(needed)} at forecast.step "
            f"{format_duration(self.step)} ({CALIBRATION_RESIDUALS} errors of forecasts "
            f"{format_duration(CALIBRATION_SPAN)} ahead); shorter, every class is forecast as its bare last value"
            if calibrated
            else f"it must hold two forecast.step ({format_duration(self.step)}) of demand"
        )
        raise ValueError(
            f"history {format_duration(self.history)} is too short: {why}. Give at least {format_duration(needed)} "
            f"(the default is 7d); a number without a unit is seconds ({self.history.total_seconds():g} is "
            f"{format_duration(self.history)}): write the unit, e.g. 3d"
        )

    def short_history(self) -> str | None:
        """Why the history is shorter than a day, the least over which the models that learn demand's daily pattern
        (seasonal_naive, ets, stl, lightgbm, and ``auto`` choosing among them) see one day; None when it is not, or
        for ``persistence``, which learns nothing. Told at load (``config.rules.load_warnings``), not refused."""
        if self.model == "persistence" or self.history >= RETRAIN_HISTORY:
            return None
        return (
            f"{format_duration(self.history)} is shorter than a day: each retraining sees less than "
            f"one day of demand, so no model learns its daily pattern (forecast.model {self.model}); give 1d or more, "
            "e.g. 7d (the default)"
        )


# What the forecast's calibration takes (``forecasting.calibrated``: a class is calibrated once it has
# ``forecasting.calibration.MIN_RESIDUALS`` errors of forecasts ``CALIBRATION_HORIZON`` ahead), kept here because
# configuration sits below forecasting; tests/test_forecast_history_bounds.py holds the two equal.
CALIBRATION_RESIDUALS = 24
CALIBRATION_SPAN = timedelta(hours=1)
RETRAIN_HISTORY = timedelta(days=1)


def calibration_history(step: timedelta) -> timedelta:
    """The history a class needs to be calibrated at ``step``: its residuals and the span they look ahead, in whole
    steps (3h at the default 5m)."""
    ahead = max(1, -(-CALIBRATION_SPAN // step))
    return (CALIBRATION_RESIDUALS + ahead) * step


class BudgetSettings(_Section):
    name: str = Field(min_length=1)  # a shared one's derives the ledger's keys: ``budget_name_problems``
    pools: tuple[str, ...] = Field(min_length=1)
    remote_pools: tuple[str, ...] = ()
    remote_previous_ids: dict[str, tuple[Annotated[str, Field(min_length=1, pattern=_POOL_ID)], ...]] = Field(
        default_factory=dict
    )
    monthly_cap_usd: float | None = Field(default=None, gt=0.0, le=MAX_CAP_USD)
    hourly_cap_usd: float | None = Field(default=None, gt=0.0, le=MAX_CAP_USD)
    period_start_day: int = Field(default=1, ge=1, le=28)
    timezone: str = "UTC"
    alert_thresholds: tuple[float, ...] = (0.5, 0.8, 1.0)
    pacing: Pacing = "none"
    commit_horizon: Duration | None = None
    unread_stop_wait: Duration = timedelta(minutes=10)


def _iso_text(value: object) -> object:
    """YAML reads an unquoted timestamp as a datetime (a date alone as a date): take it as the ISO-8601 text it
    was written as, which then means what the quoted text would (without an offset, UTC)."""
    return value.isoformat() if isinstance(value, date) else value  # a datetime is a date too


IsoTimestamp = Annotated[str, BeforeValidator(_iso_text)]


class StockoutWindow(_Section):
    """Simulation only: the pool cannot get new units between ``start`` and ``end`` (ISO-8601)."""

    pool: str
    start: IsoTimestamp
    end: IsoTimestamp


class SimulationSettings(_Section):
    stockouts: tuple[StockoutWindow, ...] = ()


class LoopSettings(_Section):
    tick_interval: Step = timedelta(seconds=60)
    read_deadline: Step | None = None  # unset: half of tick_interval


class Settings(_Section):
    demand_classes: tuple[DemandClassSettings, ...] = Field(min_length=1)
    pools: tuple[PoolSettings, ...] = Field(min_length=1)
    planner: PlannerSettings = PlannerSettings()
    forecast: ForecastSettings = ForecastSettings()
    budgets: tuple[BudgetSettings, ...] = ()
    simulation: SimulationSettings = SimulationSettings()
    loop: LoopSettings = LoopSettings()
    prometheus: PrometheusSettings | None = None
    daemon: DaemonSettings = DaemonSettings()
    cloud: CloudSettings | None = None
    aws: AwsSettings | None = None
    alerts: AlertSettings = AlertSettings()
    ledger: LedgerSettings = LedgerSettings()
    energy: EnergySettings = EnergySettings()

    def demand_class_models(self) -> tuple[DemandClass, ...]:
        return tuple(c.to_demand_class() for c in self.demand_classes)

    def pool_specs(self) -> tuple[PoolSpec, ...]:
        return tuple(p.to_spec() for p in self.pools)

    def waiting_costs(self) -> dict[str, float]:
        """Each class's waiting cost per accelerator-hour (its own, else the planner's); classes with neither are
        left out."""
        default = self.planner.waiting_cost_per_accelerator_hour_usd
        costs: dict[str, float] = {}
        for demand_class in self.demand_classes:
            cost = demand_class.waiting_cost_per_accelerator_hour_usd
            cost = cost if cost is not None else default
            if cost is not None:
                costs[demand_class.name] = cost
        return costs

    def planning_horizon(self, tick: timedelta | None = None) -> timedelta:
        """The furthest ahead the agent asks for a forecast: the longest lead time of the pools it scales, plus one
        tick. An on-prem pool is fixed, never provisioned, so its lead time is left out, as the planner leaves it
        out of each demand's horizon (``agent.planning.needs.horizon_steps``): forecasting further only costs fits
        and moves the calibration's held-out window. With on-prem pools alone the horizon is one tick."""
        scaled = (p.lead_time for p in self.pools if p.kind is not PoolKind.ON_PREM)
        longest = max(scaled, default=timedelta(0))
        return longest + (tick if tick is not None else self.loop.tick_interval)


def budget_name_problems(settings: Settings) -> Iterator[ConfigProblem]:
    """A shared budget's name (one with ``remote_pools``) is the ledger key of its monthly cap's reservations, and the
    ledger derives its other keys from it with ``/`` and ``@`` (``NAME/hourly``, ``NAME@START``, ``NAME/releasing``,
    ``NAME/hourly/releasing``, ``NAME/hourly@START``: ``agent.budget_reserve_caps``): a shared budget whose name holds
    either could be another's derived key, whose agents would then count its reservations as their own hourly cap's,
    a period's or units being released (``team/releasing``'s read as ``team``'s agents' marks: their hard stop spent
    past the cap). A budget no other agent shares writes no reservation, so its name may hold them, unless it is one
    of the keys of a shared budget of the same file (its figures would carry the other's hourly cap's name)."""
    names = {b.name for b in settings.budgets}
    shared = [(i, b.name) for i, b in enumerate(settings.budgets) if b.remote_pools]
    for i, budget in enumerate(settings.budgets):
        bad = sorted({c for c in budget.name if c in "/@"})
        if not bad:
            continue
        rename = (
            f"rename it (e.g. {_unused_name(budget.name, names)!r}, a name no other budget on the shared ledger uses)"
        )
        if budget.remote_pools:
            owner = re.split("[/@]", budget.name, maxsplit=1)[0]
            yield ConfigProblem(
                f"budgets[{i}].name",
                f"a shared budget's name (one with remote_pools) may not contain {' or '.join(repr(c) for c in bad)}: "
                "the ledger keeps each shared budget's hourly cap, its periods reserved ahead and the units it is "
                "releasing under keys made of its name with '/' or '@' (NAME/hourly, NAME@<period start>, "
                "NAME/releasing), so this budget's reservations could be counted as those of a budget named "
                f"{owner!r}, or the reverse; {rename} in the configuration of every agent that shares it "
                f"(got {budget.name!r})",
            )
            continue
        for j, owner in shared:
            if j != i and _derived_from(budget.name, owner):
                yield ConfigProblem(
                    f"budgets[{i}].name",
                    f"{budget.name!r} is one of the ledger keys of the shared budget {owner!r} (budgets[{j}]: "
                    f"NAME/hourly, NAME@<period start>, NAME/releasing), and its hourly cap's figures carry that name "
                    f"in metrics and alerts: the two budgets would be read as one; {rename}",
                )


def _derived_from(name: str, owner: str) -> bool:
    """Whether ``name`` is one of the ledger keys derived from the shared budget ``owner``'s name."""
    hourly = f"{owner}/hourly"
    exact = {hourly, f"{owner}/releasing", f"{hourly}/releasing"}
    return name in exact or name.startswith((f"{owner}@", f"{hourly}@"))


def _unused_name(name: str, names: set[str]) -> str:
    """``name`` with ``/`` and ``@`` made ``-``, numbered if a budget of the file has that name already."""
    plain = re.sub("[/@]", "-", name)
    return next(n for n in (plain, *(f"{plain}-{k}" for k in range(2, len(names) + 3))) if n not in names)

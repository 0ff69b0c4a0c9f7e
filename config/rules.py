"""Rules that relate several parts of a configuration; each broken rule is one problem with its key path."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime

from config.aws_checks import check_aws
from config.cloud import slice_account_warnings
from config.cloud_checks import check_cloud
from config.energy import energy_problems
from config.prometheus import prometheus_problems, zero_fallback_queries
from config.prometheus_shared_demand import shared_demand_problems
from config.schema import PoolSettings, Settings, budget_name_problems
from config.timing_rules import (
    alert_rules,
    forecast_interval_rules,
    liveness_rules,
    prometheus_staleness_rules,
    read_deadline_rules,
    readiness_rules,
)
from models import AcceleratorFamily, CapacityTier, ConfigProblem, PoolKind
from models.durations import format_duration


def check_rules(settings: Settings, invalid: frozenset[str] = frozenset()) -> list[ConfigProblem]:
    """Every broken rule. ``invalid`` names top-level sections that failed their own validation (and were left
    out of ``settings``): a rule that reads one of them is not run, so that it cannot report a false problem."""
    return [problem for rule, reads in _RULES if not reads & invalid for problem in rule(settings)]


def load_warnings(settings: Settings) -> list[ConfigProblem]:
    """What a valid configuration does that a person should know at load (``leadtime validate-config`` prints it,
    every command logs it), each with its key path: the file loads all the same."""
    short = settings.forecast.short_history()
    accounts = [ConfigProblem(key, message) for key, message in slice_account_warnings(settings.cloud)]
    return (
        list(_zero_fallback_warnings(settings))
        + ([ConfigProblem("forecast.history", short)] if short else [])
        + accounts
    )


def shared_ledger_problems(settings: Settings) -> list[ConfigProblem]:
    """A budget with ``remote_pools`` counts the spend other agents record for those pools in the ledger they all
    write: only a PostgreSQL ledger is shared. A SQLite file or memory is the agent's alone, so the cap would count
    the remote pools at 0 USD and let this agent spend what they already have. Checked for ``leadtime run`` (and
    ``validate-config --for run``): a simulation or a rehearsal has no other agents to share with, and a dry run
    changes nothing."""
    if settings.ledger.backend == "postgresql":
        return []
    return [
        ConfigProblem(
            f"budgets[{i}].remote_pools",
            f"budget {budget.name!r} counts the spend of pools other agents run ({', '.join(budget.remote_pools)}) "
            f"from the ledger they write, but ledger.backend is {settings.ledger.backend}, which no other agent "
            "writes: their spend would count as 0 USD and the cap be broken. Set ledger.backend: postgresql with "
            "the url of the ledger those agents write (docs/install.md), or remove remote_pools and give this "
            "agent a cap of its own. leadtime run refuses this; simulate and run --replay (no other agent runs "
            "there) and recommend (which changes nothing) accept it",
        )
        for i, budget in enumerate(settings.budgets)
        if budget.remote_pools
    ]


def memory_ledger_problems(settings: Settings) -> list[ConfigProblem]:
    """A budget's month-to-date spend and its state (holds, commitments) are kept in the ledger: a memory ledger
    loses them at every restart of the daemon, and the cap starts over at 0 USD. Checked for ``leadtime run`` (and
    ``validate-config --for run``). Without budgets nothing acts on the spend a memory ledger loses (its record is
    then only lost, and ``leadtime ledger`` and recommend read no memory ledger of another process anyway), so it is
    accepted; a simulation or a rehearsal starts from nothing by design."""
    if settings.ledger.backend != "memory" or not settings.budgets:
        return []
    names = ", ".join(budget.name for budget in settings.budgets)
    return [
        ConfigProblem(
            "ledger.backend",
            f"memory keeps no spend across restarts: a budget's cap would start over at every restart (budgets: "
            f"{names}); use sqlite or postgresql. simulate and run --replay accept memory",
        )
    ]


def _zero_fallback_warnings(settings: Settings) -> Iterator[ConfigProblem]:
    """A query with ``or vector(0)`` answers 0 when its exporter is down: the agent then reads no demand (or no
    on-prem nodes) where it would hold the pools and alert on a query that answers nothing."""
    for key, _ in zero_fallback_queries(settings.prometheus):
        if key.endswith(".capacity_query"):
            reads = (
                "the pool reads as having no nodes (an on-prem pool's work bursts to the cloud, a replay's actual "
                "row runs none) where a query that answers nothing leaves it unread, planned on its max_units, with "
                "an alert"
            )
            example, where = 'kube_node_labels{label_pool="onprem-a100"}', "On-prem capacity"
        else:
            reads = (
                "the class reads no demand where a query that answers nothing holds its pools (no scale-down) and "
                "raises an alert"
            )
            example, where = 'kube_namespace_created{namespace="team-a"}', "Reading demand from Prometheus"
        yield ConfigProblem(
            key,
            f"its `or vector(0)` answers 0 when the series it reads are missing (the exporter down, a metric or "
            f"label renamed), so {reads}. Drop the `or vector(0)`; where an absent series really means zero, fall "
            f"back on a series that exists while the exporter is up, e.g. `or on() (0 * count({example}))` "
            f"(README, {where})",
        )


def _cloud_rules(settings: Settings) -> Iterable[ConfigProblem]:
    return check_cloud(settings.cloud, settings.pools, settings.aws.mapped_in if settings.aws else None)


def _aws_rules(settings: Settings) -> Iterable[ConfigProblem]:
    return check_aws(settings.aws, settings.pools)


def _prometheus_rules(settings: Settings) -> Iterator[ConfigProblem]:
    yield from prometheus_problems(
        settings.prometheus, (c.name for c in settings.demand_classes), (p.id for p in settings.pools)
    )
    classes = [(c.name, c.series or c.name, c.family) for c in settings.demand_classes]
    yield from shared_demand_problems(settings.prometheus, classes)


def _energy_rules(settings: Settings) -> Iterable[ConfigProblem]:
    return energy_problems(settings.energy, (p.id for p in settings.pools))


def _unique_names(settings: Settings) -> Iterator[ConfigProblem]:
    for section, names in (
        ("demand_classes", [c.name for c in settings.demand_classes]),
        ("pools", [p.id for p in settings.pools]),
        ("budgets", [b.name for b in settings.budgets]),
    ):
        for name, count in Counter(names).items():
            if count > 1:
                yield ConfigProblem(section, f"name {name!r} is used {count} times; names must be unique")


def _shared_series(settings: Settings) -> Iterator[ConfigProblem]:
    """Two classes of one family reading one series (a namespace, a ClusterQueue, a trace column) read the same
    demand: it would be counted twice and their pools sized on double. Classes of different families may share
    it: their default queries count different accelerators."""
    first: dict[tuple[str, AcceleratorFamily], str] = {}
    for i, demand_class in enumerate(settings.demand_classes):
        series = demand_class.series or demand_class.name
        other = first.setdefault((series, demand_class.family), demand_class.name)
        if other != demand_class.name:
            at = f"demand_classes[{i}]" + (".series" if demand_class.series is not None else "")
            yield ConfigProblem(
                at,
                f"demand classes {other!r} and {demand_class.name!r} both read the {demand_class.family} demand of "
                f"series {series!r}: it would be counted twice and their pools sized on double; give each class a "
                "series of its own",
            )


def _pool_rules(settings: Settings) -> Iterator[ConfigProblem]:
    families = {c.name: c.family for c in settings.demand_classes}
    for i, pool in enumerate(settings.pools):
        at = f"pools[{i}]"
        if pool.min_units > pool.max_units:
            yield ConfigProblem(
                f"{at}.min_units", f"min_units ({pool.min_units}) must not exceed max_units ({pool.max_units})"
            )
        prices = (pool.price_per_chip_hour_usd, pool.price_per_unit_hour_usd)
        if all(p is None for p in prices):
            yield ConfigProblem(at, "set price_per_chip_hour_usd or price_per_unit_hour_usd")
        elif all(p is not None for p in prices):
            yield ConfigProblem(at, "set only one of price_per_chip_hour_usd and price_per_unit_hour_usd")
        if pool.kind is PoolKind.ON_PREM and pool.min_units != pool.max_units:
            yield ConfigProblem(f"{at}.min_units", "an on-prem pool is fixed: min_units must equal max_units")
        yield from _tier_problems(at, pool)
        yield from _interruption_problems(at, pool)
        is_tpu_kind = pool.kind in (PoolKind.TPU_SLICE_GROUP, PoolKind.TPU_QUEUED_RESOURCE)
        if is_tpu_kind and pool.family is not AcceleratorFamily.TPU:
            yield ConfigProblem(f"{at}.family", f"a {pool.kind} pool must have family 'tpu'")
        yield from _repeated(f"{at}.serves", pool.serves, "demand class")
        for j, name in enumerate(pool.serves):
            if name not in families:
                known = ", ".join(sorted(families)) or "none"
                yield ConfigProblem(f"{at}.serves[{j}]", f"unknown demand class {name!r} (known: {known})")
            elif families[name] is not pool.family:
                yield ConfigProblem(
                    f"{at}.serves[{j}]",
                    f"demand class {name!r} needs {families[name]} but pool {pool.id!r} has {pool.family}",
                )


def _tier_problems(at: str, pool: PoolSettings) -> Iterator[ConfigProblem]:
    """The tier must fit the kind: on-prem hardware is the ``on-prem`` tier, filled first as its cost is sunk; a
    cloud pool is bought as ``reserved``, ``spot`` or ``on-demand``."""
    if pool.tier is None:
        return
    if pool.kind is PoolKind.ON_PREM and pool.tier is not CapacityTier.ON_PREM:
        yield ConfigProblem(
            f"{at}.tier",
            f"an on-prem pool is tier 'on-prem', not {pool.tier.value!r}: remove tier (it defaults to 'on-prem') "
            "or use a cloud kind",
        )
    elif pool.kind is not PoolKind.ON_PREM and pool.tier is CapacityTier.ON_PREM:
        yield ConfigProblem(
            f"{at}.tier",
            f"tier 'on-prem' is for kind 'on-prem' pools; a {pool.kind.value} pool is 'reserved', 'spot' or "
            "'on-demand' (the default)",
        )


def _interruption_problems(at: str, pool: PoolSettings) -> Iterator[ConfigProblem]:
    """Only spot capacity is interrupted: the planner reserves for interruptions on spot pools alone, so an
    interruption rate on another tier would be ignored by the plan while the simulator interrupts the pool."""
    tier = pool.capacity_tier
    if pool.spot_interruption_per_hour > 0.0 and tier is not CapacityTier.SPOT:
        given = f"tier {tier.value!r}" if pool.tier is not None else f"tier {tier.value!r} (the default for its kind)"
        yield ConfigProblem(
            f"{at}.spot_interruption_per_hour",
            f"pool {pool.id!r} is {given}, and only spot pools are interrupted: the planner would ignore "
            f"{pool.spot_interruption_per_hour:g} interruptions an hour that the simulator applies; set tier: spot "
            "or remove spot_interruption_per_hour",
        )


def _coverage(settings: Settings) -> Iterator[ConfigProblem]:
    served = {name for pool in settings.pools for name in pool.serves}
    for i, demand_class in enumerate(settings.demand_classes):
        if demand_class.name not in served:
            yield ConfigProblem(f"demand_classes[{i}]", f"no pool serves demand class {demand_class.name!r}")


def _budget_rules(settings: Settings) -> Iterator[ConfigProblem]:
    pool_ids = {p.id for p in settings.pools}
    for i, budget in enumerate(settings.budgets):
        at = f"budgets[{i}]"
        if budget.monthly_cap_usd is None and budget.hourly_cap_usd is None:
            yield ConfigProblem(at, "set monthly_cap_usd, hourly_cap_usd or both")
        monthly, hourly = budget.monthly_cap_usd, budget.hourly_cap_usd
        if monthly is not None and hourly is not None and hourly > monthly:
            yield ConfigProblem(
                f"{at}.hourly_cap_usd",
                f"{hourly:g} USD an hour is more than the whole monthly cap ({monthly:g} USD): check the two caps",
            )
        yield from _repeated(f"{at}.pools", budget.pools, "pool")
        for j, pool in enumerate(budget.pools):
            if pool not in pool_ids:
                yield ConfigProblem(f"{at}.pools[{j}]", f"unknown pool {pool!r}")
        for j, pool in enumerate(budget.remote_pools):
            if pool in pool_ids:
                yield ConfigProblem(f"{at}.remote_pools[{j}]", f"{pool!r} is this agent's pool: list it in pools")
            elif not pool:
                yield ConfigProblem(f"{at}.remote_pools[{j}]", "a pool id must not be empty")
        if budget.pacing == "forecast":
            if budget.monthly_cap_usd is None:
                yield ConfigProblem(f"{at}.pacing", "pacing 'forecast' spends a monthly cap: set monthly_cap_usd")
            priced = [p for p in settings.pools if p.id in budget.pools and p.kind is not PoolKind.ON_PREM]
            if not any(p.unit_price_usd > 0.0 for p in priced):
                yield ConfigProblem(f"{at}.pacing", "pacing 'forecast' needs a priced cloud pool in pools")
        if budget.commit_horizon is not None:
            if budget.monthly_cap_usd is None:
                yield ConfigProblem(f"{at}.commit_horizon", "a commit horizon holds a monthly cap: set monthly_cap_usd")
            if budget.commit_horizon < 2 * settings.loop.tick_interval:
                yield ConfigProblem(
                    f"{at}.commit_horizon",
                    f"must be at least two ticks ({format_duration(2 * settings.loop.tick_interval)}): the hard stop "
                    "releases units two ticks before the money runs out",
                )
        for j, threshold in enumerate(budget.alert_thresholds):
            if not 0.0 < threshold <= 2.0:
                yield ConfigProblem(f"{at}.alert_thresholds[{j}]", "a threshold is a fraction of the cap in (0, 2]")
        try:
            from zoneinfo import ZoneInfo

            ZoneInfo(budget.timezone)
        except Exception:  # noqa: BLE001 - zoneinfo raises several unrelated types for a bad key
            yield ConfigProblem(f"{at}.timezone", f"unknown time zone {budget.timezone!r}")


def _simulation_rules(settings: Settings) -> Iterator[ConfigProblem]:
    pool_ids = {p.id for p in settings.pools}
    for i, window in enumerate(settings.simulation.stockouts):
        at = f"simulation.stockouts[{i}]"
        if window.pool not in pool_ids:
            yield ConfigProblem(f"{at}.pool", f"unknown pool {window.pool!r}")
        times = {}
        for key in ("start", "end"):
            try:
                times[key] = datetime.fromisoformat(getattr(window, key))
            except ValueError:
                yield ConfigProblem(f"{at}.{key}", "expected an ISO-8601 timestamp")
        if len(times) == 2:
            start, end = (t if t.tzinfo else t.replace(tzinfo=UTC) for t in (times["start"], times["end"]))
            if end <= start:
                yield ConfigProblem(f"{at}.end", f"must be after start ({window.start}); got {window.end}")


def _billing_rules(settings: Settings) -> Iterator[ConfigProblem]:
    """``ledger.billing`` matches billed rows to pools by pool id (``leadtime ledger import-billing``): an id of no
    pool (this agent's, or a budget's remote pool) would match nothing, and a misspelt one leave that pool's bill
    out."""
    known = {p.id for p in settings.pools} | {p for b in settings.budgets for p in b.remote_pools}
    listed = ", ".join(sorted(known)) or "none"
    billing = settings.ledger.billing
    for key, by_pool in (("pools", billing.pools), ("resource_prefixes", billing.resource_prefixes)):
        for pool_id in by_pool:
            if pool_id not in known:
                yield ConfigProblem(f"ledger.billing.{key}.{pool_id}", f"unknown pool {pool_id!r} (known: {listed})")


def _forecast_rules(settings: Settings) -> Iterator[ConfigProblem]:
    """The quantiles the forecasts publish (the planner's service levels are forecast besides, listed or not)."""
    yield from _repeated("forecast.quantiles", settings.forecast.quantiles, "quantile")


def _repeated(key: str, values: Iterable[object], what: str) -> Iterator[ConfigProblem]:
    for value, count in Counter(values).items():
        if count > 1:
            yield ConfigProblem(key, f"{what} {value!r} is listed {count} times; list it once")


def _previous_ids(settings: Settings) -> Iterator[ConfigProblem]:
    """A pool's previous ids name spend that counts as its own: each belongs to one pool, and is no pool's id now
    (the spend under a pool's id is that pool's). A remote pool's (``budgets[].remote_previous_ids``) may be listed
    again for the same pool in another budget that shares it."""
    current = {p.id for p in settings.pools} | {p for b in settings.budgets for p in b.remote_pools}
    owner: dict[str, str] = {}
    listed: list[tuple[str, str, tuple[str, ...]]] = [
        (f"pools[{i}].previous_ids", pool.id, pool.previous_ids) for i, pool in enumerate(settings.pools)
    ]
    for i, budget in enumerate(settings.budgets):
        for pool_id, olds in budget.remote_previous_ids.items():
            at = f"budgets[{i}].remote_previous_ids.{pool_id}"
            if pool_id not in budget.remote_pools:
                yield ConfigProblem(at, f"{pool_id!r} is not in this budget's remote_pools; list it there first")
                continue
            listed.append((at, pool_id, olds))
    for at, pool_id, olds in listed:
        seen: set[str] = set()
        for old in olds:
            if old in current:
                yield ConfigProblem(at, f"{old!r} is the id of a pool now; a previous id must be no pool's id")
            elif old in seen or owner.setdefault(old, pool_id) != pool_id:
                yield ConfigProblem(at, f"{old!r} is already a previous id of pool {owner[old]!r}; list it once")
            seen.add(old)


# Each rule with the top-level sections it reads.
_RULES: tuple[tuple[Callable[[Settings], Iterable[ConfigProblem]], frozenset[str]], ...] = (
    (_unique_names, frozenset({"demand_classes", "pools", "budgets"})),
    (budget_name_problems, frozenset({"budgets"})),
    (_shared_series, frozenset({"demand_classes"})),
    (_pool_rules, frozenset({"pools", "demand_classes"})),
    (_previous_ids, frozenset({"pools", "budgets"})),
    (_coverage, frozenset({"pools", "demand_classes"})),
    (_budget_rules, frozenset({"budgets", "pools"})),
    (_simulation_rules, frozenset({"simulation", "pools"})),
    (_cloud_rules, frozenset({"cloud", "pools", "aws"})),
    (_aws_rules, frozenset({"aws", "pools"})),
    (_prometheus_rules, frozenset({"prometheus", "demand_classes", "pools"})),
    (_energy_rules, frozenset({"energy", "pools"})),
    (_billing_rules, frozenset({"ledger", "pools", "budgets"})),
    (_forecast_rules, frozenset({"forecast"})),
    (forecast_interval_rules, frozenset({"forecast", "loop"})),
    (alert_rules, frozenset({"alerts", "loop"})),
    (readiness_rules, frozenset({"daemon", "loop"})),
    (liveness_rules, frozenset({"daemon", "loop"})),
    (read_deadline_rules, frozenset({"loop"})),
    (prometheus_staleness_rules, frozenset({"prometheus", "forecast"})),
)

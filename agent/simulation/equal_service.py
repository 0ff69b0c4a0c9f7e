"""What the same service costs: each policy tuned to leave a target fraction of demand unserved.

The reactive policy gets the smallest constant headroom (extra units per pool) that meets the target; the
forecast policy the lowest service level (forecast quantile) that meets it, one level for every demand class: a
trial's level takes the place of the classes' own levels (``demand_classes[].service_level``) and of those from
waiting costs, or a class with its own level would be planned the same in every trial. Costs are interpolated
linearly in the unserved fraction between the two nearest settings that bracket the target. Every trial replays
the session's outlooks, so a trial costs planning and the simulated cluster only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from multiprocessing.synchronize import Event as EventType
from typing import Any

from agent.outlook import Outlook
from agent.planning import resolve_service_levels
from agent.simulation.forecast_models import level_mix
from agent.simulation.runner import PolicyRun, Simulation, run_policy
from agent.simulation.window import SimulationWindow
from agent.sources.trace import Trace
from config.schema import Settings

TARGETS = (0.005, 0.001)
SERVICE_LEVELS = (0.5, 0.7, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995, 0.998, 0.999)
MAX_HEADROOM = 64
# Below this many steps a window's runs are done here, one after another: a second process takes about 2 s to start
# and to receive the outlooks, more than it saves (two days of five-minute steps: 4.5 s with it, 2.5 s without).
HELPED_MIN_STEPS = 2016


@dataclass(frozen=True)
class Trial:
    setting: float
    cost_usd: float
    unserved_fraction: float
    budget_held_steps: int = 0  # steps at which a budget cap held the trial's run back (``PolicyRun``)
    models: tuple[tuple[str, float], ...] = ()  # the forecast policy's: each model's share of the level read


Evaluate = Callable[[float], Trial]  # the forecast policy's trial at a service level
# Starts the forecast policy's trial at a service level in another process, or says it is busy (None).
Helper = Callable[[float], "Future[Trial] | None"]


def equal_service(
    session: Simulation,
    targets: Sequence[float] = TARGETS,
    known: Mapping[str, PolicyRun] | None = None,
    on_done: Callable[[str], object] | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """``equal_service[target][policy]`` with ``cost_usd``, ``unserved_fraction``, the bracketing settings and
    the ``trials`` (setting, cost, unserved share) the figure rests on.

    The session should have been created with ``extra_quantiles=SERVICE_LEVELS`` so that every service level
    tried has its forecast quantile.
    """
    known = known or {}
    trials = {
        "reactive": _search_headroom(session, tuple(targets), _seed(known, session.settings)),
        "forecast": search_levels(
            lambda level: _level_trial(level, session),
            tuple(targets),
            known=own_level(session.settings, known.get("forecast"), session.outlooks("forecast")),
        ),
    }
    if on_done is not None:
        for name in trials:
            on_done(name)
    return _compare(trials, targets, known)


def run_and_compare(
    session: Simulation,
    policies: Sequence[str],
    targets: Sequence[float] = (),
    on_done: Callable[[str], object] | None = None,
) -> tuple[dict[str, PolicyRun], dict[str, dict[str, dict[str, Any]]] | None]:
    """Every policy's run and, with ``targets`` and both the forecast and reactive policies, what the same service
    costs (``equal_service``). For a window of at least ``HELPED_MIN_STEPS``, on two cores: a second process holds
    a copy of the session's outlooks (which ``Simulation.prepare`` computed), runs every policy but the forecast
    one and the reactive headroom search, then helps the forecast policy's level search, which runs here. In both
    searches the policy's own run counts as the trial at its configured setting (``own_level``, ``_seed``).
    ``on_done`` hears each policy's name when its run is done and ``"equal service"`` when the searches are."""
    compare = bool(targets) and {"forecast", "reactive"} <= set(policies)
    here = [p for p in policies if p == "forecast"]
    there = [p for p in policies if p != "forecast"]
    done = on_done or (lambda _: None)
    if not here or not there or len(session.window.index) < HELPED_MIN_STEPS:
        runs = {}
        for policy in policies:
            runs[policy] = session.run(policy)
            done(policy)
        if not compare:
            return runs, None
        comparison = equal_service(session, targets, known=runs)
        done("equal service")
        return runs, comparison
    needed = {"forecast": compare, "reactive": "reactive" in there}  # the helper's level trials, the reactive runs
    copied = {policy: session.outlooks(policy) for policy, wanted in needed.items() if wanted}
    adopt = (session.settings, session.trace, session.window, session.extra_quantiles, copied)
    context = get_context("spawn")
    # Set by the other process once its share is computed, before its runs have been sent back here (which takes a
    # moment, and the search must not take that moment for a busy helper: on the demo a round of two levels then
    # ran one after the other here while the helper sat idle, 5 s).
    shared = context.Event()
    with ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=_hold, initargs=(shared,)) as pool:
        # a task, not the process's initializer: a task's arguments are sent by a thread of the pool, while the
        # initializer's would hold this process until the new one had read them all (7 s on the demo)
        pool.submit(_adopt, *adopt)
        side = pool.submit(_other_side, there, tuple(targets) if compare else ())
        runs = {p: session.run(p) for p in here}
        done("forecast")

        def helper(level: float) -> Future[Trial] | None:  # once its own share is done, the other process helps
            return pool.submit(_level_trial, level) if side.done() or shared.is_set() else None

        own = own_level(session.settings, runs.get("forecast"), session.outlooks("forecast"))
        levels = (
            search_levels(lambda level: _level_trial(level, session), tuple(targets), helper, own) if compare else []
        )
        others, headroom = side.result()
    for name in others:
        done(name)
    runs = {p: (runs | others)[p] for p in policies}
    if not compare:
        return runs, None
    done("equal service")
    return runs, _compare({"reactive": headroom, "forecast": levels}, targets, runs)


_HELD: dict[str, Simulation] = {}  # in run_and_compare's second process: the session copy it works on
_SHARED: list[EventType] = []  # there too: the event its share of the work sets when it is done


def _hold(shared: EventType) -> None:
    _SHARED.append(shared)


def _adopt(
    settings: Settings,
    trace: Trace,
    window: SimulationWindow,
    extra_quantiles: tuple[float, ...],
    outlooks: Mapping[str, list[Outlook]],
) -> None:
    _HELD["session"] = Simulation(settings, trace, window, extra_quantiles, outlooks=outlooks)


def _other_side(policies: Sequence[str], targets: tuple[float, ...]) -> tuple[dict[str, PolicyRun], list[Trial]]:
    """The runs of ``policies`` and, with ``targets``, the headroom search, on the held session copy."""
    session = _HELD["session"]
    runs = {p: session.run(p) for p in policies}
    found = _search_headroom(session, targets, _seed(runs, session.settings)) if targets else []
    for shared in _SHARED:
        shared.set()
    return runs, found


def _level_trial(level: float, session: Simulation | None = None) -> Trial:
    """The forecast policy at one service level, on ``session`` (by default the held session copy)."""
    session = session or _HELD["session"]
    trial = at_level(session.settings, level)
    outlooks = session.outlooks("forecast")
    run = run_policy(trial, session.trace, session.window, "forecast", outlooks=outlooks, bands=False)
    mix = tuple(level_mix(outlooks, level).items())
    return Trial(level, run.cost_usd, run.unserved_fraction, run.budget_held_steps, mix)


def at_level(settings: Settings, level: float) -> Settings:
    """The settings of the level search's trial at ``level``: every demand class planned at it, in place of the
    classes' own levels, the planner's and those from waiting costs."""
    classes = tuple(c.model_copy(update={"service_level": None}) for c in settings.demand_classes)
    planner = settings.planner.model_copy(update={"service_level": level})
    return settings.model_copy(update={"demand_classes": classes, "planner": planner})


def own_level(settings: Settings, run: PolicyRun | None, outlooks: Sequence[Outlook] | None = None) -> dict[int, Trial]:
    """The forecast policy's own ``run`` as the level search's trial at one of ``SERVICE_LEVELS`` (by index), when
    the configured planner plans every class at the levels that a search trial there would: the same run, which
    the search then need not repeat. Empty when none does (a planner level not among them, or classes planned at
    different levels, their own or from waiting costs)."""
    if run is None:
        return {}
    pools = settings.pool_specs()
    configured = resolve_service_levels(settings.demand_class_models(), pools, settings.planner)
    for index, level in enumerate(SERVICE_LEVELS):
        trial = at_level(settings, level)
        if resolve_service_levels(trial.demand_class_models(), pools, trial.planner) == configured:
            mix = tuple(level_mix(outlooks, level).items()) if outlooks is not None else ()
            return {index: Trial(level, run.cost_usd, run.unserved_fraction, run.budget_held_steps, mix)}
    return {}


def _compare(
    trials: Mapping[str, Sequence[Trial]], targets: Sequence[float], known: Mapping[str, PolicyRun]
) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for target in targets:
        key = f"{target:g}"
        out[key] = {name: interpolate(found, target, _SETTING_NAMES[name]) for name, found in trials.items()}
        if "oracle" in known:
            oracle = known["oracle"]
            out[key]["oracle"] = {"cost_usd": round(oracle.cost_usd, 2), "unserved_fraction": oracle.unserved_fraction}
    return out


_SETTING_NAMES = {"reactive": "headroom_units", "forecast": "service_level"}


def interpolate(trials: Sequence[Trial], target: float, setting_name: str) -> dict[str, Any]:
    """Cost at ``target`` from the nearest failing and passing trials; unbracketed cases say so. ``trials`` lists
    the runs the figure rests on (each with its setting, cost and unserved share): the two that bracket the
    target, the one passing setting when the cheapest already meets it, or the one that came closest when none
    did."""
    passing = sorted((t for t in trials if t.unserved_fraction <= target), key=lambda t: t.cost_usd)
    failing = [t for t in trials if t.unserved_fraction > target]
    if not passing:
        best = min(trials, key=lambda t: t.unserved_fraction)
        return {
            "cost_usd": None,
            "unserved_fraction": best.unserved_fraction,
            setting_name: None,
            "note": f"no {setting_name} tried reached the target",
            "trials": [_trial(best, setting_name)],
        }
    upper = passing[0]
    lower_candidates = [t for t in failing if t.cost_usd <= upper.cost_usd]
    if not lower_candidates:
        return {
            "cost_usd": round(upper.cost_usd, 2),
            "unserved_fraction": upper.unserved_fraction,
            setting_name: [upper.setting],
            "note": "the cheapest setting already meets the target",
            "trials": [_trial(upper, setting_name)],
        }
    lower = max(lower_candidates, key=lambda t: t.cost_usd)
    share = (lower.unserved_fraction - target) / (lower.unserved_fraction - upper.unserved_fraction)
    cost = lower.cost_usd + share * (upper.cost_usd - lower.cost_usd)
    return {
        "cost_usd": round(cost, 2),
        "unserved_fraction": target,
        setting_name: [lower.setting, upper.setting],
        "trials": [_trial(lower, setting_name), _trial(upper, setting_name)],
    }


def _trial(trial: Trial, setting_name: str) -> dict[str, Any]:
    """A run a figure rests on; with the steps a budget cap held it back, where it did (the headline's marks)."""
    held = {"budget_held_steps": trial.budget_held_steps} if trial.budget_held_steps else {}
    models = {"models": dict(trial.models)} if trial.models else {}
    return {
        setting_name: trial.setting,
        "cost_usd": round(trial.cost_usd, 2),
        "unserved_fraction": trial.unserved_fraction,
        **held,
        **models,
    }


def _seed(known: Mapping[str, PolicyRun], settings: Settings) -> Trial | None:
    """The reactive policy's own run as the headroom search's trial at the configured headroom."""
    run = known.get("reactive")
    headroom = int(settings.planner.headroom_units)  # whole units, as the search's own trials
    return None if run is None else Trial(headroom, run.cost_usd, run.unserved_fraction, run.budget_held_steps)


def _search_headroom(session: Simulation, targets: tuple[float, ...], seed: Trial | None) -> list[Trial]:
    def evaluate(headroom: float) -> Trial:
        planner = session.settings.planner.model_copy(update={"headroom_units": int(headroom)})
        run = session.run("reactive", planner, bands=False)
        return Trial(headroom, run.cost_usd, run.unserved_fraction, run.budget_held_steps)

    cache: dict[float, Trial] = {seed.setting: seed} if seed is not None else {}

    def trial(h: float) -> Trial:
        if h not in cache:
            cache[h] = evaluate(h)
        return cache[h]

    for target in sorted(targets, reverse=True):
        low, high = 0, 1
        if trial(0).unserved_fraction <= target:
            continue
        while trial(high).unserved_fraction > target and high < MAX_HEADROOM:
            low, high = high, high * 2
        _bisect(trial, target, low, high)
    return list(cache.values())


def search_levels(
    evaluate: Evaluate,
    targets: tuple[float, ...],
    helper: Helper | None = None,
    known: Mapping[int, Trial] | None = None,
) -> list[Trial]:
    """The forecast policy's trials: for every target at once, bisect the service levels between the highest
    failing and the lowest passing one tried (unserved demand falls as the level grows). Each round tries the
    middle of every open bracket; while a ``helper`` is free, two levels at a time, one in each process (a lone
    middle then gives way to a bracket's thirds): the same brackets in fewer rounds. ``known`` trials (by index
    into ``SERVICE_LEVELS``) count as tried."""
    cache: dict[int, Trial] = dict(known or {})

    def try_all(points: Sequence[int]) -> None:
        todo = [i for i in dict.fromkeys(points) if i not in cache]
        away = helper(SERVICE_LEVELS[todo[1]]) if helper is not None and len(todo) > 1 else None
        for i in todo[:1] + todo[2 if away is not None else 1 :]:
            cache[i] = evaluate(SERVICE_LEVELS[i])
        if away is not None:
            cache[todo[1]] = away.result()

    top = len(SERVICE_LEVELS) - 1
    try_all([top, top // 2] if helper is not None else [top])
    while brackets := _open_brackets(cache, targets):
        points = [(low + high) // 2 for low, high in brackets]
        low, high = brackets[0]
        if helper is not None and len(set(points)) == 1 and high - low > 2:
            points = [low + (high - low) // 3, low + 2 * (high - low) // 3]
        try_all(points)
    return list(cache.values())


def _open_brackets(cache: Mapping[int, Trial], targets: Sequence[float]) -> list[tuple[int, int]]:
    """Per target (the loosest first), the bracket still to search, when there is one."""
    found = [_bracket(cache, target) for target in sorted(targets, reverse=True)]
    return [(low, high) for low, high in found if high is not None and high - low > 1]


def _bracket(cache: Mapping[int, Trial], target: float) -> tuple[int, int | None]:
    """The lowest level index tried that meets ``target`` (None: none does) and the highest below it that does not
    (-1: none tried)."""
    passing = [i for i, t in cache.items() if t.unserved_fraction <= target]
    if not passing:
        return -1, None
    high = min(passing)
    return max((i for i, t in cache.items() if i < high and t.unserved_fraction > target), default=-1), high


def _bisect(trial: Callable[[int], Trial], target: float, low: int, high: int) -> int:
    """Smallest setting in (low, high] that meets the target, given that ``high`` does and ``low`` does not
    (unserved demand falls as the setting grows); every setting tried is remembered by the caller."""
    while high - low > 1:
        mid = (low + high) // 2
        if trial(mid).unserved_fraction <= target:
            high = mid
        else:
            low = mid
    return high

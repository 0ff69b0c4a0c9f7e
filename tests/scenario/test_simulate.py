"""``leadtime simulate`` end to end on the bundled real trace and on small synthetic traces."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from agent.cli import main
from agent.simulation import run_policy, select_window
from agent.simulation.equal_service import SERVICE_LEVELS, run_and_compare
from agent.simulation.runner import Simulation
from agent.sources.trace import read_trace
from config import load_settings, settings_from_mapping
from tests.background_runs import Background, ended, register
from tests.conftest import TraceWriter

# one worker computes the module's simulation once, for every test that reads it
pytestmark = pytest.mark.xdist_group("simulate-pooled")

# Half a day of the bundled trace: its 2-hour gap (14:00-16:00 +08:00) with data on both sides, and a refit
# (every 6 hours) inside it. Fitting the configured models before the window costs the same however long it is.
WINDOW = ["--start", "2020-05-12T12:00:00+08:00", "--end", "2020-05-13T00:00:00+08:00"]


ROOT = Path(__file__).resolve().parents[2]
# The command line, as the console script runs it (``leadtime = agent.cli:main``).
CLI = "import sys; from agent.cli import main; sys.exit(main(sys.argv[1:]))"
# Started in the background once the tests are collected (20 s of CPU, while the workers wait on other tests).
POOLED = register(
    Background(
        "simulate-pooled",
        lambda out: [
            sys.executable,
            "-c",
            CLI,
            "simulate",
            "--config",
            str(ROOT / "config/examples/helios-earth.yaml"),
            "--trace",
            str(ROOT / "data/helios-earth/demand_5min.csv.gz"),
            *WINDOW,
            "--out",
            str(out),
        ],
        fixture="pooled_results",
    )
)


@pytest.fixture(scope="module")
def pooled_results(request: pytest.FixtureRequest) -> tuple[dict[str, Any], Path]:
    run = ended(request.config, POOLED)
    assert run.returncode == 0, run.stderr
    (run.directory / "progress.txt").write_text(run.stderr)  # the progress bars, for the test that reads them
    return json.loads((run.directory / "results.json").read_text()), run.directory


def test_the_progress_bar_says_the_models_are_fitting_until_the_first_ticks(
    pooled_results: tuple[dict[str, Any], Path],
) -> None:
    frames = [f for f in (pooled_results[1] / "progress.txt").read_text().replace("\n", "\r").split("\r") if f]
    forecasting = [f for f in frames if f.startswith("forecasting:")]
    fitting = [i for i, f in enumerate(forecasting) if "fitting the models on the history" in f]
    counted = [i for i, f in enumerate(forecasting) if " 0/" not in f]
    assert fitting and counted, forecasting
    assert max(fitting) < min(counted)  # said while nothing is counted, gone once ticks are
    assert "100%" in forecasting[-1]


def test_results_document_has_the_promised_shape(pooled_results: tuple[dict[str, Any], Path]) -> None:
    document, out = pooled_results
    assert set(document["policies"]) == {"forecast", "reactive", "static", "oracle"}
    for row in document["policies"].values():
        assert {"cost_usd", "accelerator_hours", "unserved_fraction", "utilization", "scale_actions"} <= set(row)
    assert document["window"]["start"] == "2020-05-12T04:00:00+00:00"
    assert document["window"]["steps"] == 144  # 12 hours of 5-minute steps
    assert document["trace"]["path"].endswith("demand_5min.csv.gz")
    assert document["config"]["settings"]["pools"][0]["id"] == "a100-on-demand"
    page = (out / "report.html").read_text()
    assert page.count("<img") >= 3 and "<table>" in page and "Hu et al." in page
    assert document["leadtime_version"]
    decisions = document["forecast_decisions"]
    assert set(decisions) <= set(document["trace"]["series"]) | {n for n in decisions if n.startswith("pool-group:")}
    # ticks compared: the steps with data, and into the window's one gap (2h) the 3 steps within max_staleness
    # (15m) of the last value seen: more than the steps with data, which the table says
    observed = document["window"]["observed_steps"]
    for row in decisions.values():
        assert row["up"] + row["down"] <= row["ticks"] == observed + 3
    assert "Where the forecast changed the decision" in page and "ticks compared" in page
    # the bands are the forecasts each step's capacity was bought on: one lead time (10 minutes) ahead
    caption = re.search(r"Band: the forecast median up to its ([0-9.]+) quantile.*? issued 10m before each step", page)
    assert caption is not None and float(caption.group(1)) in set(document["forecast_service_levels"].values())
    within = re.search(r"Demand stayed at or below the band's top in ([0-9.]+)% of the class-steps", page)
    assert within is not None and 50.0 < float(within.group(1)) <= 100.0
    for row in document["equal_service"].values():  # headroom in whole units, the configured one too
        assert all(isinstance(h, int) for h in row["reactive"]["headroom_units"] or [])


def test_the_report_says_which_model_forecast_each_class_and_why(pooled_results: tuple[dict[str, Any], Path]) -> None:
    document, out = pooled_results
    models, levels = document["forecast_models"], document["forecast_service_levels"]
    assert set(models) == set(levels)
    for name, use in models.items():
        assert use["service_level"] == levels[name]
        assert use["ticks"] > 0 and sum(use["models"].values()) == pytest.approx(1.0), name
        assert set(use["models"]) <= {"naive", "ets", "ets+naive", "lightgbm", "persistence"}, use["models"]
        assert use["note"].startswith("auto: selected "), use["note"]
    page = (out / "report.html").read_text()
    assert "Which model forecast each class" in page and "model at that level (share of ticks)" in page


def test_served_plus_unserved_is_the_demand(pooled_results: tuple[dict[str, Any], Path], bundled_trace: Path) -> None:
    document, _ = pooled_results
    trace = read_trace(bundled_trace)
    settings = load_settings(Path(document["config"]["path"]))
    window = select_window(
        trace, settings.demand_class_models(), datetime.fromisoformat(WINDOW[1]), datetime.fromisoformat(WINDOW[3])
    )
    observed = window.demand[window.observed]
    demand_hours = float(observed.sum()) * window.step.total_seconds() / 3600
    assert document["window"]["gap_steps"] == 24  # 2020-05-12 14:00-16:00 +08:00 is missing in the trace
    for name, row in document["policies"].items():
        assert row["demanded_accelerator_hours"] == pytest.approx(demand_hours, rel=1e-6), name
        total = row["served_accelerator_hours"] + row["unserved_accelerator_hours"]
        assert total == pytest.approx(demand_hours, rel=1e-6), name


def test_oracle_serves_everything_at_the_lowest_cost_of_full_service(
    pooled_results: tuple[dict[str, Any], Path],
) -> None:
    policies = pooled_results[0]["policies"]
    assert policies["oracle"]["unserved_fraction"] == 0.0
    for name, row in policies.items():
        if row["unserved_fraction"] == 0.0:
            assert policies["oracle"]["cost_usd"] <= row["cost_usd"] + 1e-6, name
    assert policies["reactive"]["unserved_fraction"] > 0.0


def two_class_config(lead: str = "15m") -> dict[str, Any]:
    return {
        "demand_classes": [{"name": "a"}, {"name": "b"}],
        "pools": [
            {
                "id": "gpu",
                "kind": "gpu-node-pool",
                "chips_per_unit": 4,
                "max_units": 50,
                "price_per_chip_hour_usd": 2.0,
                "lead_time": lead,
                "serves": ["a", "b"],
            }
        ],
        "forecast": {"history": "1d"},
    }


def test_reactive_leaves_rising_demand_unserved_when_lead_time_is_positive(write_trace: TraceWriter) -> None:
    rise = [4.0] * 300 + [4.0 + 2 * i for i in range(40)] + [84.0] * 60
    trace = read_trace(write_trace({"a": rise, "b": [4.0] * len(rise)}))
    settings = settings_from_mapping(two_class_config())
    window = select_window(trace, settings.demand_class_models(), trace.index[288].to_pydatetime(), None)
    reactive = run_policy(settings, trace, window, "reactive")
    oracle = run_policy(settings, trace, window, "oracle")
    assert reactive.unserved_accelerator_hours > 0
    assert oracle.unserved_accelerator_hours == 0
    # With no lead time only the one-step delay of seeing the queue remains; the lead time is what hurts.
    instant = settings_from_mapping(two_class_config(lead="0s"))
    assert run_policy(instant, trace, window, "reactive").unserved_accelerator_hours < (
        reactive.unserved_accelerator_hours / 2
    )


def test_the_headroom_search_starts_from_the_configured_headroom(write_trace: TraceWriter) -> None:
    # The reactive policy's own run is the search's trial at the configured headroom, not at zero: here headroom 3
    # meets the target while none leaves more than the target waiting, so the search must try zero itself.
    rise = [4.0] * 300 + [4.0 + 2 * i for i in range(40)] + [84.0] * 60
    trace = read_trace(write_trace({"a": rise, "b": [4.0] * len(rise)}))
    raw = two_class_config()
    raw["planner"] = {"headroom_units": 3}
    settings = settings_from_mapping(raw)
    window = select_window(trace, settings.demand_class_models(), trace.index[288].to_pydatetime(), None)
    session = Simulation(settings, trace, window, SERVICE_LEVELS)
    runs, comparison = run_and_compare(session, ["forecast", "reactive"], (0.005,))
    assert comparison is not None
    assert runs["reactive"].unserved_fraction <= 0.005
    bare = session.run("reactive", settings.planner.model_copy(update={"headroom_units": 0}))
    assert bare.unserved_fraction > 0.005
    row = comparison["0.005"]["reactive"]
    assert "note" not in row and len(row["headroom_units"]) == 2, row  # bracketed, not "already met at 0"
    assert max(row["headroom_units"]) < 3
    assert row["cost_usd"] < runs["reactive"].cost_usd


def test_gaps_count_neither_cost_nor_service_and_the_agent_holds(write_trace: TraceWriter) -> None:
    values = [40.0] * 400
    values[320:350] = [math.nan] * 30
    trace = read_trace(write_trace({"a": values, "b": [0.0] * 400}))
    settings = settings_from_mapping(two_class_config())
    window = select_window(trace, settings.demand_class_models(), trace.index[300].to_pydatetime(), None)
    run = run_policy(settings, trace, window, "forecast")
    assert run.demanded_accelerator_hours == pytest.approx(40.0 * (100 - 30) / 12)
    held = run.paid_units["gpu"][20:50]
    assert (held == 10).all(), "no unit may be released while demand is unknown"
    assert any(a.kind == "missing-data" for a in run.alerts)


def write_yaml(path: Path, raw: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing-config", "no such file"),
        ("unknown-key", "pools[0].colour: unknown key"),
        ("negative-lead", "pools[0].lead_time: duration must not be negative"),
        ("misspelt-column", "column(s) 'runing' (meant 'running'?)"),
        ("empty-window", "empty window"),
        ("all-nan-window", "no observed demand in the window"),
        ("non-monotonic", "must increase strictly"),
        ("bad-timestamp", "is not an ISO-8601 timestamp"),
        # before the run, which takes minutes, and before the trace is read: the trace here does not exist
        ("out-is-a-file", "cannot create output directory"),
    ],
)
def test_bad_input_gets_a_clear_error_and_exit_code_2(
    case: str, message: str, tmp_path: Path, write_trace: TraceWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = two_class_config()
    config = write_yaml(tmp_path / "c.yaml", raw)
    trace = write_trace({"a": [1.0] * 400, "b": [1.0] * 400})
    extra: list[str] = []
    if case == "missing-config":
        config = tmp_path / "absent.yaml"
    elif case == "unknown-key":
        raw["pools"][0]["colour"] = "red"
        write_yaml(config, raw)
    elif case == "negative-lead":
        raw["pools"][0]["lead_time"] = -60
        write_yaml(config, raw)
    elif case == "misspelt-column":
        trace.write_text("unique_id,ds,y,runing\na,2024-01-01T00:00:00,1,1\n")
    elif case == "empty-window":
        extra = ["--start", "2024-01-02T00:00:00+00:00", "--end", "2024-01-02T00:00:00+00:00"]
    elif case == "all-nan-window":
        trace = write_trace({"a": [1.0] * 300 + [math.nan] * 100, "b": [1.0] * 300 + [math.nan] * 100})
        extra = ["--start", "2024-01-02T02:00:00+00:00"]
    elif case == "non-monotonic":
        trace.write_text("unique_id,ds,y\na,2024-01-01T00:10:00,1\na,2024-01-01T00:05:00,1\n")
    elif case == "bad-timestamp":
        extra = ["--start", "next tuesday"]
    elif case == "out-is-a-file":
        (tmp_path / "o").write_text("not a directory\n")
        trace = tmp_path / "absent.csv"
    argv = ["simulate", "--config", str(config), "--trace", str(trace), "--out", str(tmp_path / "o")]
    assert run_cli([*argv, "--no-progress", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "o" / "results.json").exists()


def run_cli(argv: list[str]) -> int:
    """Exit code of the CLI, whether it returns one or argparse exits with it."""
    try:
        return main(argv)
    except SystemExit as exited:
        return int(exited.code or 0)


def test_console_script_reports_bad_input_without_a_traceback(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "leadtime"
    result = subprocess.run(
        [str(script), "validate-config", str(tmp_path / "missing.yaml")],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 2
    assert "no such file" in result.stderr and "Traceback" not in result.stderr


def test_static_policy_is_sized_to_the_peak_before_the_window(write_trace: TraceWriter) -> None:
    history = [10.0] * 200 + [30.0] + [10.0] * 200
    trace = read_trace(write_trace({"a": history, "b": [0.0] * len(history)}))
    settings = settings_from_mapping(two_class_config())
    window = select_window(trace, settings.demand_class_models(), trace.index[300].to_pydatetime(), None)
    run = run_policy(settings, trace, window, "static")
    assert np.unique(run.paid_units["gpu"]).tolist() == [8]  # ceil(30 / 4)
    assert run.scale_actions == 0


def test_static_policy_replaces_interrupted_spot_units_as_a_fixed_node_pool_does(write_trace: TraceWriter) -> None:
    # A fixed 12-node spot pool (the history's peak: 48 chips of 4-chip nodes) for a day of demand that 5 nodes
    # meet; a quarter of its nodes are interrupted per hour. A fixed-size node pool (a managed instance group, an
    # Auto Scaling group) recreates each, so the pool keeps its 12 nodes, pays for them and serves the demand.
    history = [20.0] * 200 + [48.0] + [20.0] * 387
    trace = read_trace(write_trace({"a": history}))
    raw: dict[str, Any] = {
        "demand_classes": [{"name": "a"}],
        "pools": [
            {
                "id": "spot",
                "kind": "gpu-node-pool",
                "tier": "spot",
                "chips_per_unit": 4,
                "max_units": 50,
                "price_per_chip_hour_usd": 2.0,
                "spot_interruption_per_hour": 0.25,
                "lead_time": "15m",
                "serves": ["a"],
            }
        ],
        "forecast": {"history": "1d"},
    }
    settings = settings_from_mapping(raw)
    window = select_window(trace, settings.demand_class_models(), trace.index[300].to_pydatetime(), None)
    run = run_policy(settings, trace, window, "static")
    paid, ready = run.paid_units["spot"], run.ready_units["spot"]
    hours = window.step.total_seconds() / 3600.0
    assert len(paid) == 288 and ready.min() < 12  # a day, with nodes interrupted
    assert paid.max() == 12  # never more than the fixed size
    assert paid.mean() > 11.0 and paid[-12:].mean() > 11.0  # still 12 nodes in the window's last hour
    assert run.scale_actions > 0  # each replacement is asked for
    assert run.cost_usd == pytest.approx(float(paid.sum()) * 4 * 2.0 * hours)
    assert run.cost_usd > 0.9 * 12 * 4 * 2.0 * 24  # about what 12 nodes cost for the day
    assert run.unserved_accelerator_hours == 0.0  # the 12-node pool serves the 5 nodes' demand throughout

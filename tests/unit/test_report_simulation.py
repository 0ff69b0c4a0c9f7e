"""The simulation report's words around its figures: the credit of the trace actually replayed, what produced the
report (version, time, config, prices, service level), the runs behind each equal-service figure, and a target
already met at the cheapest setting said as such."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent.report.equal_service import ALREADY_MET, equal_service_section
from agent.report.headline import headline_section
from agent.report.provenance import accelerator_hours_note, pools_table, provenance_section, unit_name
from agent.simulation.headline import headline
from agent.simulation.results import trace_attribution
from models import AcceleratorFamily, CapacityTier, PoolKind, PoolSpec


@pytest.mark.parametrize(
    ("path", "credited"),
    [
        ("data/helios-earth/demand_5min.csv.gz", "Hu et al."),
        ("/work/checkout/data/helios-earth/demand_5min.csv.gz", "Hu et al."),
        ("data/philly/busy_nodes_5min.csv.gz", "Jeon et al."),
        ("data/servegen/demand_10min.csv.gz", "Xiang et al."),
        ("/srv/leadtime/data/servegen/demand_10min.csv.gz", "Xiang et al."),
    ],
)
def test_a_bundled_trace_is_credited_as_data_readme_requires(path: str, credited: str) -> None:
    credit = trace_attribution(path)
    assert credit is not None and credited in credit
    others = {"Hu et al.", "Jeon et al.", "Xiang et al."} - {credited}
    assert not any(name in credit for name in others)


def test_the_servegen_credit_names_its_paper_and_licence() -> None:
    credit = trace_attribution("data/servegen/demand_10min.csv.gz")
    assert credit is not None
    assert "ServeGen: Workload Characterization and Generation of Large Language Model Serving" in credit
    assert "arXiv:2505.09999" in credit and "Apache-2.0" in credit


@pytest.mark.parametrize(
    "path",
    [
        "my-cluster.csv",
        "/tmp/exports/demand_5min.csv.gz",  # a bundled file's name alone is not the bundled trace
        "data/helios-earth/other.csv",
        "prometheus https://prometheus.example/",
        "prometheus http://host/data/servegen/demand_10min.csv.gz",
    ],
)
def test_a_users_own_trace_or_a_prometheus_replay_gets_no_bundled_credit(path: str) -> None:
    assert trace_attribution(path) is None


def _pool(pool_id: str, family: AcceleratorFamily, chips: int, per_chip: float) -> PoolSpec:
    return PoolSpec(
        pool_id=pool_id,
        kind=PoolKind.GPU_NODE_POOL if family is AcceleratorFamily.GPU else PoolKind.TPU_SLICE_GROUP,
        tier=CapacityTier.ON_DEMAND,
        family=family,
        chips_per_unit=chips,
        min_units=0,
        max_units=10,
        price_per_unit_hour_usd=per_chip * chips,
        lead_time=timedelta(minutes=10),
        serves=("a",),
    )


def _document(**extra: Any) -> dict[str, Any]:
    return {
        "leadtime_version": "9.8.7",
        "trace": {"path": "mine.csv", "series": ["a"], "step_s": 300, "attribution": None},
        "window": {
            "start": "2024-01-01T00:00:00+00:00",
            "end": "2024-01-02T00:00:00+00:00",
            "steps": 288,
            "gap_steps": 0,
        },
        "config": {"path": "cfg/leadtime.yaml", "settings": {"planner": {"headroom_units": 0}}},
        "policies": {"forecast": {}, "reactive": {}},
        "forecast_service_levels": {"a": 0.9, "b": 0.9},
        **extra,
    }


def test_the_report_says_what_produced_it_and_at_what_prices_and_service_level() -> None:
    pools = [
        _pool("a100", AcceleratorFamily.GPU, 8, 3.67),
        _pool("v5e-1", AcceleratorFamily.TPU, 32, 1.2),
        _pool("v5e-2", AcceleratorFamily.TPU, 32, 1.2),
    ]
    page = provenance_section(_document(), pools, datetime(2025, 1, 2, 3, 4, tzinfo=UTC))
    assert "leadtime 9.8.7" in page
    assert "report generated 2025-01-02 03:04 UTC" in page
    assert "config cfg/leadtime.yaml" in page
    assert "forecast policy at service level 0.9 (every demand class)" in page
    assert "reactive with headroom 0 units per pool" in page
    assert "3.67 per GPU-hour" in page and "29.36" in page  # per unit-hour of an 8-GPU node
    assert "1.20 per chip-hour" in page and "38.40" in page
    assert "v5e-1, v5e-2" in page  # alike pools share a row
    assert "8 GPUs" in page and "32 chips" in page


def test_service_levels_that_differ_by_class_are_given_as_a_range() -> None:
    document = _document(forecast_service_levels={"a": 0.8, "b": 0.95})
    page = provenance_section(document, [_pool("a100", AcceleratorFamily.GPU, 8, 3.67)], datetime.now(UTC))
    assert "service levels 0.8 to 0.95 (by demand class" in page


def test_units_are_gpus_for_a_gpu_pool_and_chips_for_a_tpu_pool() -> None:
    assert unit_name(AcceleratorFamily.GPU) == "GPUs" and unit_name(AcceleratorFamily.TPU) == "chips"
    gpu, tpu = _pool("g", AcceleratorFamily.GPU, 8, 1.0), _pool("t", AcceleratorFamily.TPU, 4, 1.0)
    assert "a GPU-hour." in accelerator_hours_note([gpu])
    assert "a chip-hour." in accelerator_hours_note([tpu])
    assert "GPU-hour or chip-hour" in accelerator_hours_note([gpu, tpu])
    assert pools_table([gpu]).count("<tr>") == 2


BRACKETED: dict[str, Any] = {
    "cost_usd": 61505.53,
    "unserved_fraction": 0.005,
    "service_level": [0.8, 0.9],
    "trials": [
        {"service_level": 0.8, "cost_usd": 59036.8, "unserved_fraction": 0.0061},
        {"service_level": 0.9, "cost_usd": 66528.0, "unserved_fraction": 0.0027},
    ],
}
HEADROOM: dict[str, Any] = {
    "cost_usd": 73525.84,
    "unserved_fraction": 0.005,
    "headroom_units": [0, 1],
    "trials": [
        {"headroom_units": 0, "cost_usd": 55392.0, "unserved_fraction": 0.0113},
        {"headroom_units": 1, "cost_usd": 84444.8, "unserved_fraction": 0.0012},
    ],
}
MET: dict[str, Any] = {
    "cost_usd": 798875.81,
    "unserved_fraction": 0.0039371,
    "service_level": [0.5],
    "note": ALREADY_MET,
    "trials": [{"service_level": 0.5, "cost_usd": 798875.81, "unserved_fraction": 0.0039371}],
}


def test_each_equal_service_figure_shows_the_runs_it_was_interpolated_between() -> None:
    page = equal_service_section({"0.005": {"forecast": BRACKETED, "reactive": HEADROOM}})
    assert "61,506" in page and "73,526" in page
    assert "service level 0.8: 59,037 USD, 0.61% unserved" in page
    assert "service level 0.9: 66,528 USD, 0.27% unserved" in page
    assert "headroom 0 units per pool: 55,392 USD, 1.13% unserved" in page
    assert "headroom 1 unit per pool: 84,445 USD, 0.12% unserved" in page
    assert page.count("interpolated between") == 2


def test_a_target_met_at_the_cheapest_setting_says_so_instead_of_the_target() -> None:
    comparison: dict[str, dict[str, Any]] = {
        "0.005": {"forecast": MET, "reactive": HEADROOM, "oracle": {"cost_usd": 795127.52, "unserved_fraction": 0.0}}
    }
    page = equal_service_section(comparison)
    assert "0.39% unserved: below the 0.5% target" in page
    assert "already at the cheapest setting tried" in page and "service level 0.5: 798,876 USD" in page
    policies = {name: {"cost_usd": 1.0, "unserved_fraction": 0.01} for name in ("forecast", "reactive", "oracle")}
    document: dict[str, Any] = {"policies": policies, "equal_service": comparison}
    document["headline"] = headline(document)
    assert document["headline"]["forecast"]["note"] == ALREADY_MET  # carried into results.json
    first = headline_section(document)
    lead = first[: first.index("</p>")]
    assert "0.39% unserved: its cheapest setting tried already beats the 0.5% target" in lead
    assert "equal service at 0.5% unserved" not in lead
    assert "target already met at the cheapest setting tried" in first


def test_a_policy_left_out_of_the_run_is_said_not_run_not_not_reached() -> None:
    page = equal_service_section({"0.005": {"forecast": BRACKETED, "reactive": HEADROOM}})
    oracle = re.search(r"<td data-policy='oracle'>(.*?)</td>", page)
    assert oracle is not None and oracle.group(1) == "not run"
    unreached = dict(BRACKETED, cost_usd=None)
    page = equal_service_section({"0.005": {"forecast": unreached, "reactive": HEADROOM}})
    forecast = re.search(r"<td data-policy='forecast'>(.*?)<", page)
    assert forecast is not None and forecast.group(1) == "not reached"


def test_the_lead_sentence_of_a_forecast_only_run_ends_without_a_stray_full_stop() -> None:
    document: dict[str, Any] = {"policies": {"forecast": {"cost_usd": 1234.0, "unserved_fraction": 0.0023}}}
    document["headline"] = headline(document)
    first = headline_section(document)
    lead = first[first.index("<p class='lead'>") + len("<p class='lead'>") : first.index("</p>")]
    assert lead == "leadtime: 1,234 USD (as run, 0.23% unserved)."

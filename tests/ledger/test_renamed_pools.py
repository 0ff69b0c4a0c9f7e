"""A pool renamed in the configuration, with a SQLite ledger file: the spend recorded under its old id counts in
its budgets once the pool lists that id in ``previous_ids`` (in the daemon's budgets and in ``leadtime ledger
budgets``), and spend under an id no configured pool has is named with its amount, at start and in the report;
previous ids are validated."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.budget_watch import BudgetWatch
from agent.cli import main
from agent.ledger.sqlite import SqliteLedger
from config import settings_from_mapping
from config.schema import Settings
from models import ConfigError, PoolState

START = datetime(2026, 3, 1, tzinfo=UTC)
RENAMED_AT = datetime(2026, 3, 3, tzinfo=UTC)
TICK = timedelta(hours=1)
POOL = {"kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 16, "price_per_unit_hour_usd": 29.36,
        "lead_time": "10m", "serves": ["train"]}  # fmt: skip


def _body(path: Path, pool: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "demand_classes": [{"name": "train"}],
        "pools": [{**POOL, **pool}, *extra.get("others", [])],
        "budgets": [{"name": "team", "pools": [pool["id"]], "monthly_cap_usd": 150_000}],
        "ledger": {"path": str(path)},
    }


def _watch(settings: Settings, ledger: SqliteLedger) -> BudgetWatch:
    return BudgetWatch(settings, {p.pool_id: p for p in settings.pool_specs()}, ledger, tick=TICK)


def _spent_before_the_rename(path: Path) -> float:
    """Two days of 10 nodes in pool ``a100-spot`` from the start of the month, as the daemon records them."""
    settings = settings_from_mapping(_body(path, {"id": "a100-spot"}))
    with SqliteLedger(path, fresh_if_empty=True) as ledger:
        watch = _watch(settings, ledger)
        at = START
        while at <= RENAMED_AT:
            spends = watch.observe(at, {"a100-spot": PoolState("a100-spot", at, 10, 10)})
            at += TICK
    assert spends[0].spent_period_usd == pytest.approx(48 * 10 * 29.36)
    return spends[0].spent_period_usd


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_renamed_pool_keeps_its_spend_with_its_previous_id(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "ledger.sqlite"
    before = _spent_before_the_rename(path)
    settings = settings_from_mapping(_body(path, {"id": "a100-spot-us", "previous_ids": ["a100-spot"]}))
    caplog.set_level(logging.WARNING, logger="agent.ledger.meter")
    with SqliteLedger(path) as ledger:
        watch = _watch(settings, ledger)  # the restarted daemon, its pool renamed
        at = RENAMED_AT + TICK
        (spend,) = watch.observe(at, {"a100-spot-us": PoolState("a100-spot-us", at, 10, 10)})
        assert spend.spent_period_usd == pytest.approx(before)
        (coverage,) = watch.coverage
        assert coverage.complete  # its old id's records go back to the start of the period
    assert _warnings(caplog) == []


def test_spend_under_an_id_no_pool_has_is_named_at_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "ledger.sqlite"
    before = _spent_before_the_rename(path)
    settings = settings_from_mapping(_body(path, {"id": "a100-spot-us"}))  # renamed, the old id not declared
    caplog.set_level(logging.WARNING, logger="agent.ledger.meter")
    with SqliteLedger(path) as ledger:
        watch = _watch(settings, ledger)
        at = RENAMED_AT + TICK
        (spend,) = watch.observe(at, {"a100-spot-us": PoolState("a100-spot-us", at, 10, 10)})
        assert spend.spent_period_usd == 0.0
        at += TICK
        watch.observe(at, {"a100-spot-us": PoolState("a100-spot-us", at, 10, 10)})  # told once, at start
    unclaimed = [w for w in _warnings(caplog) if "no configured pool has" in w]
    assert len(unclaimed) == 1
    assert f"a100-spot ({before:,.2f} USD)" in unclaimed[0]
    assert "since 2026-03-01T00:00:00+00:00" in unclaimed[0] and "previous_ids" in unclaimed[0]
    assert "a100-spot-us (" not in unclaimed[0]


def test_the_budget_report_counts_previous_ids_and_names_unclaimed_spend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ledger.sqlite"
    before = _spent_before_the_rename(path)
    at = (RENAMED_AT + TICK).isoformat()
    config = tmp_path / "leadtime.yaml"

    config.write_text(yaml.safe_dump(_body(path, {"id": "a100-spot-us"})), encoding="utf-8")
    assert main(["ledger", "budgets", "--config", str(config), "--at", at]) == 0
    out = capsys.readouterr().out
    (team,) = [line.split() for line in out.splitlines() if line.startswith("team ")]
    assert team[-2:] == ["0.00", "0.0%"]
    (unclaimed,) = [line for line in out.splitlines() if line.startswith("not counted:")]
    assert f"a100-spot ({before:,.2f} USD)" in unclaimed and "2026-03-01 00:00 UTC" in unclaimed

    body = _body(path, {"id": "a100-spot-us", "previous_ids": ["a100-spot"]})
    config.write_text(yaml.safe_dump(body), encoding="utf-8")
    assert main(["ledger", "budgets", "--config", str(config), "--at", at]) == 0
    out = capsys.readouterr().out
    (team,) = [line.split() for line in out.splitlines() if line.startswith("team ")]
    assert float(team[-2]) == pytest.approx(before, abs=0.005)
    assert not [line for line in out.splitlines() if line.startswith(("not counted:", "incomplete:"))]


@pytest.mark.parametrize(
    ("pools", "problem"),
    [
        ([{"id": "a", "previous_ids": ["b"]}, {"id": "b"}], "'b' is the id of a pool now"),
        ([{"id": "a", "previous_ids": ["a"]}], "'a' is the id of a pool now"),
        ([{"id": "a", "previous_ids": ["old"]}, {"id": "b", "previous_ids": ["old"]}], "already a previous id"),
        ([{"id": "a", "previous_ids": ["old", "old"]}], "already a previous id of pool 'a'"),
        ([{"id": "a", "previous_ids": ["Old_Id"]}], "previous_ids"),
    ],
)
def test_previous_ids_are_unique_and_no_pool_s_id(pools: list[dict[str, Any]], problem: str) -> None:
    body = {"demand_classes": [{"name": "train"}], "pools": [{**POOL, **p} for p in pools]}
    with pytest.raises(ConfigError, match=problem):
        settings_from_mapping(body)


def test_previous_ids_load() -> None:
    body = {"demand_classes": [{"name": "train"}], "pools": [{**POOL, "id": "a", "previous_ids": ["old", "older"]}]}
    assert settings_from_mapping(body).pools[0].previous_ids == ("old", "older")

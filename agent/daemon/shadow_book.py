"""Keeping the shadow account of a dry-run daemon: saved after every tick, published as metrics and HTML.

The account (``agent.daemon.shadow``) is written to a JSON file next to the ledger's (``<ledger.path>.shadow.json``),
replaced atomically, so a restarted daemon continues it; without a file (an in-memory ledger) it lives as long as
the process. A file that cannot be read is refused with its name and the problem, never silently restarted at
zero. Each daily report also writes ``shadow-<date>.html`` next to the file.
"""

from __future__ import annotations

import html
import json
import logging
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from agent.daemon.shadow import RUNS, Period, ShadowAccount
from models import LedgerUnavailable, PoolSpec, PoolState

log = logging.getLogger(__name__)


class ShadowBook:
    def __init__(
        self,
        pools: Sequence[PoolSpec],
        classes: Sequence[str],
        max_interval: timedelta,
        path: Path | None = None,
    ) -> None:
        self.account = ShadowAccount(pools, classes, max_interval)
        self.path = path
        self._lock = threading.Lock()
        if path is not None and path.exists():
            try:
                self.account.load(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, UnicodeDecodeError, ValueError) as exc:
                raise LedgerUnavailable(
                    f"cannot continue the shadow account in {path}: {exc}; move the file away to start a new one"
                ) from None

    def record(
        self, now: datetime, demand: Mapping[str, float], pools: Sequence[PoolState], targets: Mapping[str, int]
    ) -> None:
        """Account one tick and save; raises ``LedgerUnavailable`` when the file cannot be written."""
        with self._lock:
            self.account.record(now, demand, pools, targets)
            if self.path is not None:
                self._save()

    def snapshot(self) -> Period:
        with self._lock:
            return _copy(self.account.total)

    def html(self, now: datetime) -> str:
        with self._lock:
            return render_html(self.account, now)

    def write_daily(self, now: datetime) -> Path | None:
        """The report as ``shadow-<date>.html`` next to the account's file (none without a file)."""
        if self.path is None:
            return None
        target = self.path.parent / f"shadow-{now.date().isoformat()}.html"
        _write_atomically(target, self.html(now))
        return target

    def _save(self) -> None:
        assert self.path is not None
        try:
            _write_atomically(self.path, json.dumps(self.account.to_dict(), sort_keys=True))
        except OSError as exc:
            raise LedgerUnavailable(f"cannot save the shadow account to {self.path}: {exc}") from None


class ShadowCollector(Collector):
    """``leadtime_shadow_*``: the account's totals since it began, read at every scrape."""

    def __init__(self, book: ShadowBook) -> None:
        self._book = book

    def collect(self) -> Iterator[GaugeMetricFamily]:
        total = self._book.snapshot()
        savings = GaugeMetricFamily(
            "leadtime_shadow_savings_usd_total",
            "Dry-run shadow account: cost of what ran minus cost of what was recommended, USD (negative: the "
            "recommendations cost more)",
        )
        savings.add_metric([], total.savings_usd)
        cost = GaugeMetricFamily(
            "leadtime_shadow_cost_usd_total", "Dry-run shadow account: cost per run, USD", labels=["run"]
        )
        unserved = GaugeMetricFamily(
            "leadtime_shadow_unserved_chip_hours_total",
            "Dry-run shadow account: demand left unserved per run, accelerator chip-hours",
            labels=["run"],
        )
        for run in RUNS:
            cost.add_metric([run], total.runs[run].cost_usd)
            unserved.add_metric([run], total.runs[run].unserved_chip_hours)
        demanded = GaugeMetricFamily(
            "leadtime_shadow_demand_chip_hours_total", "Dry-run shadow account: demand observed, chip-hours"
        )
        demanded.add_metric([], total.runs["actual"].demanded_chip_hours)
        intervals = GaugeMetricFamily(
            "leadtime_shadow_intervals", "Dry-run shadow account: tick intervals per outcome", labels=["outcome"]
        )
        intervals.add_metric(["charged"], total.intervals)
        intervals.add_metric(["skipped"], total.skipped)
        yield from (savings, cost, unserved, demanded, intervals)


def shadow_file(ledger_backend: str, ledger_path: str) -> Path | None:
    """Where the account is kept: next to a SQLite ledger's file; nowhere for the other backends."""
    return Path(f"{ledger_path}.shadow.json") if ledger_backend == "sqlite" else None


def render_html(account: ShadowAccount, now: datetime) -> str:
    rows = [("since start", account.total)] + [(d.isoformat(), p) for d, p in sorted(account.days.items())]
    body = "".join(_row(label, period) for label, period in rows)
    total = account.total
    head = (
        f"<p>Following the recommendations would have saved <b>{total.savings_usd:,.2f} USD</b> over "
        f"{total.hours:,.1f} h ({total.intervals} intervals charged, {total.skipped} skipped for missing data or "
        f"gaps). Unserved demand: recommended {total.runs['recommended'].unserved_chip_hours:,.2f}, actual "
        f"{total.runs['actual'].unserved_chip_hours:,.2f} chip-hours.</p>"
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>leadtime shadow account</title>"
        "<style>body{font:16px sans-serif;margin:2em}td,th{padding:4px 12px;text-align:right}"
        "th:first-child,td:first-child{text-align:left}</style></head><body>"
        f"<h1>Shadow account (dry-run)</h1><p>As of {html.escape(now.isoformat())}.</p>{head}"
        "<table><tr><th>period</th><th>hours</th><th>recommended USD</th><th>actual USD</th><th>savings USD</th>"
        "<th>recommended unserved chip-h</th><th>actual unserved chip-h</th><th>demand chip-h</th></tr>"
        f"{body}</table></body></html>\n"
    )


def _row(label: str, period: Period) -> str:
    rec, act = period.runs["recommended"], period.runs["actual"]
    cells = [
        f"{period.hours:,.2f}",
        f"{rec.cost_usd:,.2f}",
        f"{act.cost_usd:,.2f}",
        f"{period.savings_usd:,.2f}",
        f"{rec.unserved_chip_hours:,.2f}",
        f"{act.unserved_chip_hours:,.2f}",
        f"{act.demanded_chip_hours:,.2f}",
    ]
    return f"<tr><td>{html.escape(label)}</td>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def _copy(period: Period) -> Period:
    return Period({r: replace(t) for r, t in period.runs.items()}, period.hours, period.intervals, period.skipped)


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)

"""Keeping the shadow account of a dry-run daemon: saved after every tick, published as metrics and HTML.

The account (``agent.daemon.shadow``) is kept where the ledger keeps spend, so a restarted daemon continues it:
beside a SQLite ledger in ``<ledger.path>.shadow.json`` (replaced atomically), in a PostgreSQL ledger's
``leadtime_shadow_accounts`` table (one row per set of pools); with an in-memory ledger it lives as long as the
process. A saved account that cannot be read is refused with where it is and the problem, never silently
restarted at zero. In PostgreSQL a change of the pool set (a pool added, removed or renamed) starts a new account,
named by the new set: its what-if capacity and per-pool holdings are the old set's and cannot be carried over. The
account that starts afresh while another account of the ledger shares one of its pools is logged as a warning,
naming that account (the earlier pool set's, left as it was); accounts that share none are other deployments'.
Each daily report also writes ``shadow-<date>.html`` beside a SQLite ledger's file.
"""

from __future__ import annotations

import html
import json
import logging
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from agent.daemon.shadow import RUNS, Period, ShadowAccount
from agent.ledger import Ledger
from config.ledger import LedgerSettings
from models import LedgerUnavailable, PoolSpec, PoolState

if TYPE_CHECKING:
    from agent.ledger.postgres import PostgresLedger

log = logging.getLogger(__name__)


class ShadowStore(Protocol):
    """Where the account is saved. Both raise ``LedgerUnavailable`` naming the place when they fail."""

    where: str

    def load(self) -> str | None: ...

    def save(self, body: str, now: datetime) -> None: ...

    def others(self) -> dict[str, datetime]:
        """The other accounts kept where this one is, with when each was last saved."""
        ...


class FileShadowStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)

    def load(self) -> str | None:
        try:
            return self.path.read_text(encoding="utf-8") if self.path.exists() else None
        except (OSError, UnicodeDecodeError) as exc:
            raise LedgerUnavailable(f"cannot read the shadow account {self.path}: {exc}") from None

    def save(self, body: str, now: datetime) -> None:
        try:
            _write_atomically(self.path, body)
        except OSError as exc:
            raise LedgerUnavailable(f"cannot save the shadow account to {self.path}: {exc}") from None

    def others(self) -> dict[str, datetime]:
        return {}  # the file beside the ledger holds one account


class PostgresShadowStore:
    def __init__(self, ledger: PostgresLedger, name: str) -> None:
        self._ledger = ledger
        self._name = name
        self.where = f"the PostgreSQL ledger at {ledger.where} (leadtime_shadow_accounts, name {name!r})"

    def load(self) -> str | None:
        return self._ledger.load_shadow(self._name)

    def save(self, body: str, now: datetime) -> None:
        self._ledger.save_shadow(self._name, body, now)

    def others(self) -> dict[str, datetime]:
        rows = self._ledger._query(
            "SELECT name, saved_us FROM leadtime_shadow_accounts WHERE name <> %s ORDER BY name", (self._name,)
        )
        return {str(name): datetime.fromtimestamp(int(saved) / 1e6, UTC) for name, saved in rows}


def shadow_store(settings: LedgerSettings, ledger: Ledger, pools: Sequence[PoolSpec]) -> ShadowStore | None:
    """The store beside the configured ledger (``None``: in-memory ledger). In a shared PostgreSQL ledger the
    account is named by its pools, which no other deployment plans."""
    if settings.backend == "postgresql":
        from agent.ledger.postgres import PostgresLedger  # the driver only where a PostgreSQL ledger is used

        if isinstance(ledger, PostgresLedger):
            return PostgresShadowStore(ledger, ",".join(sorted(p.pool_id for p in pools)))
    if settings.backend == "sqlite":
        return FileShadowStore(Path(f"{settings.path}.shadow.json"))
    return None


class ShadowBook:
    def __init__(
        self,
        pools: Sequence[PoolSpec],
        classes: Sequence[str],
        max_interval: timedelta,
        store: ShadowStore | None = None,
        reports: Path | None = None,
    ) -> None:
        """``reports``: the directory the daily ``shadow-<date>.html`` goes to (``None``: not written)."""
        self.account = ShadowAccount(pools, classes, max_interval)
        self.store = store
        self.reports = reports
        self._lock = threading.Lock()
        self.reload()

    def reload(self) -> None:
        """Continue from the saved account, if there is one: at start, and when this replica becomes the leader
        (another replica sharing the PostgreSQL ledger may have kept it meanwhile)."""
        store = self.store
        saved = store.load() if store is not None else None
        if store is None:
            return
        if saved is None:
            self._starting_afresh(store)
            return
        try:
            with self._lock:
                self.account.load(json.loads(saved))
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            raise LedgerUnavailable(
                f"cannot continue the shadow account in {store.where}: {exc}; move it away to start a new one"
            ) from None

    def _starting_afresh(self, store: ShadowStore) -> None:
        """Say so when no account is saved under this pool set while one under another set shares a pool with it:
        the pool set changed, and the account starts again from zero."""
        mine = {spec.pool_id for spec in self.account.pools}
        earlier = {name: at for name, at in store.others().items() if mine & set(name.split(","))}
        if earlier and self.account.total.intervals == 0:
            log.warning(
                "the shadow account starts afresh in %s: the pools changed and %s %s kept for a pool set sharing "
                "pools with this one (left as it was); a change of the pool set starts a new account",
                store.where,
                ", ".join(f"{name!r} (last saved {at.isoformat()})" for name, at in earlier.items()),
                "was" if len(earlier) == 1 else "were",
                extra={"earlier_accounts": sorted(earlier)},
            )

    def record(
        self, now: datetime, demand: Mapping[str, float], pools: Sequence[PoolState], targets: Mapping[str, int]
    ) -> None:
        """Account one tick and save; raises ``LedgerUnavailable`` when it cannot be saved."""
        with self._lock:
            self.account.record(now, demand, pools, targets)
            if self.store is not None:
                self.store.save(json.dumps(self.account.to_dict(), sort_keys=True), now)

    def snapshot(self) -> Period:
        with self._lock:
            return _copy(self.account.total)

    def html(self, now: datetime) -> str:
        with self._lock:
            return render_html(self.account, now)

    def write_daily(self, now: datetime) -> Path | None:
        """The report as ``shadow-<date>.html`` in ``reports`` (none without it)."""
        if self.reports is None:
            return None
        target = self.reports / f"shadow-{now.date().isoformat()}.html"
        _write_atomically(target, self.html(now))
        return target


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


def render_html(account: ShadowAccount, now: datetime) -> str:
    rows = [("since start", account.total)] + [(d.isoformat(), p) for d, p in sorted(account.days.items())]
    body = "".join(_row(label, period) for label, period in rows)
    total = account.total
    head = (
        f"<p>Following the recommendations would have saved <b>{total.savings_usd:,.2f} USD</b> over "
        f"{total.hours:,.2f} h ({total.intervals} intervals charged, {total.skipped} skipped for missing data or "
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
        f"{body}</table>{_pools(account)}</body></html>\n"
    )


def _pools(account: ShadowAccount) -> str:
    """What the recommendations would run now, beside what runs, per pool."""
    last = account.last
    if last is None:
        return ""
    rows = "".join(
        f"<tr><td>{html.escape(p.pool_id)}</td><td>{last.paid['recommended'].get(p.pool_id, 0)}</td>"
        f"<td>{last.ready['recommended'].get(p.pool_id, 0)}</td><td>{last.paid['actual'].get(p.pool_id, 0)}</td>"
        f"<td>{last.ready['actual'].get(p.pool_id, 0)}</td></tr>"
        for p in account.pools
    )
    return (
        f"<h2>Pools at {html.escape(last.at.isoformat())}</h2><table><tr><th>pool</th><th>recommended units</th>"
        "<th>of which ready</th><th>running units</th><th>of which ready</th></tr>"
        f"{rows}</table>"
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

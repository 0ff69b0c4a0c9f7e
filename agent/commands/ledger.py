"""``leadtime ledger``: manage the spend ledger.

``import-billing FILE --config FILE`` stores what a Cloud Billing export says each pool was billed
(``agent.ledger.billing_export``) beside the estimated spend, and prints the difference per pool; intervals not
over at the import are left out, named on stderr, as their bill is partial; ``budgets
--config FILE`` reports each budget's spend so far, estimated and billed.

``import-sqlite --config FILE SQLITE`` moves an existing SQLite ledger into the PostgreSQL ledger
that the configuration names (``ledger.backend: postgresql``), once, when a daemon moves from a file to a database.

The SQLite file is opened as its writer (so the import refuses to run while a daemon still writes it: stop the
daemon first) and its entries, then its billed costs (``agent.ledger.billed``), are copied in batches, each one
transaction. Importing follows the ledger's own rules for a repeated (pool, start) and an overlapping billed
interval, so running the import again changes nothing. It prints what it read and what the database then holds
for the same pools and span, estimated, billed and spent as budgets count it; a difference means the database
already had other spend or bills for those pools.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from config import load_settings
from config.schema import Settings
from models import ConfigError, ConfigProblem, LedgerEntry, LedgerUnavailable
from models.clock import Clock, SystemClock

if TYPE_CHECKING:
    from agent.ledger.billed import BilledCost, BilledCosts, Reconciliation
    from agent.ledger.billing_export import NotOver

BATCH = 5000
SHOWN = 5  # intervals named in the line about those left out


def register(sub: Any) -> None:
    parser = sub.add_parser("ledger", help="manage the spend ledger")
    what = parser.add_subparsers(dest="what", required=True)
    move = what.add_parser("import-sqlite", help="copy a SQLite ledger into the configured PostgreSQL ledger")
    move.add_argument("--config", required=True, help="YAML configuration whose ledger is PostgreSQL")
    move.add_argument("sqlite", help="the SQLite ledger file to import")
    move.set_defaults(handler=import_sqlite)
    billing = what.add_parser(
        "import-billing", help="store the billed cost of a Cloud Billing export beside the estimated spend"
    )
    billing.add_argument("file", help="the export: CSV, or JSON rows (newline-delimited, as BigQuery exports them)")
    billing.add_argument("--config", required=True, help="YAML configuration naming the ledger and its pools")
    billing.set_defaults(handler=import_billing)
    budgets = what.add_parser("budgets", help="each budget's spend so far: estimated, billed, and counted")
    budgets.add_argument("--config", required=True, help="YAML configuration naming the ledger and its budgets")
    budgets.add_argument("--at", help="the time to report at (ISO 8601 with a zone; default: now)")
    budgets.set_defaults(handler=report_budgets)


def import_billing(args: argparse.Namespace, clock: Clock | None = None) -> int:
    """``clock`` tells the time of the import (the system clock unless a test gives one): intervals not over then
    are left out."""
    from agent.ledger.billing_export import how_matched, match_pools, not_over, read_export

    settings = load_settings(args.config)
    pools = sorted({p.id for p in settings.pools} | {p for b in settings.budgets for p in b.remote_pools})
    rows = read_export(Path(args.file))
    cluster = None if settings.cloud is None else settings.cloud.cluster  # unless ledger.billing.cluster is set
    every = match_pools(rows, settings.ledger.billing, pools, args.file, default_cluster=cluster)
    split = not_over(every, (clock or SystemClock()).now())
    matched = split.kept
    billed = sorted({c.pool_id for c in every.costs})  # a pool whose rows were all left out is matched all the same
    ledger = _billed_ledger(settings, args.config)
    try:
        ledger.record_billed(matched.costs)
        found = sorted({c.pool_id for c in matched.costs})
        report: list[Reconciliation] = []
        if matched.costs:
            start, end = min(c.start for c in matched.costs), max(c.end for c in matched.costs)
            report = ledger.reconcile(found, start, end)
    finally:
        _close(ledger)
    span = "" if not matched.costs else f" from {_when(start)} to {_when(end)}"
    within = "" if matched.cluster is None else f" in cluster {matched.cluster}"
    print(
        f"{args.file}: {len(rows)} rows, {matched.rows} of them for {len(billed)} pool(s){within}, {matched.unmatched} "
        f"for other resources; stored {len(matched.costs)} billed interval(s){span}"
        + (f", left out {len(split.left_out)} not over yet" if split.left_out else "")
    )
    if split.left_out:
        print(f"leadtime: {args.file}: {_not_over_message(split)}", file=sys.stderr)
    if report:
        print(_reconciliation_table(report))
    budgets_of: dict[str, list[str]] = {}  # a budget pool no row matched -> its budgets
    for budget in settings.budgets:
        for pool in sorted({*budget.pools, *budget.remote_pools} - set(billed)):
            budgets_of.setdefault(pool, []).append(budget.name)
    if budgets_of:
        print(
            "budget pools no row of the export billed (their spend stays the estimate, and a budget period that "
            "started before their first record in the ledger stays incomplete):"
        )
        for pool, names in sorted(budgets_of.items()):
            print(f"  {pool} (budget {', '.join(names)}): matched by {how_matched(pool, settings.ledger.billing)}")
    return 0


def _not_over_message(split: NotOver) -> str:
    shown = [
        f"{c.pool_id} {_when(c.start)}..{_when(c.end)} (line {line})"
        for c, line in zip(split.left_out[:SHOWN], split.lines[:SHOWN], strict=True)
    ]
    more = len(split.left_out) - len(shown)
    return (
        f"left out {split.rows} row(s) billing {len(split.left_out)} interval(s) not over at {_when(split.at)}: "
        f"{', '.join(shown)}{f' and {more} more' if more else ''}. Their bill is partial: stored, it would replace "
        "the estimate of all the interval's spend, later spend included, and that spend would go uncounted. "
        "The rest was imported; import an export holding these intervals again once they are over"
    )


def report_budgets(args: argparse.Namespace) -> int:
    from agent.ledger.base import RecordedSince
    from agent.ledger.coverage import NEW_OR_LOST, ledger_coverage
    from agent.ledger.pool_ids import (
        counted_pools,
        own_pools,
        pool_previous_ids,
        unclaimed_message,
        unclaimed_spend,
    )
    from agent.planning.budget import Budget

    settings = load_settings(args.config)
    now = _at(args.at) if args.at else datetime.now(UTC)
    if not settings.budgets:
        print(f"{args.config} names no budgets")
        return 0
    ledger = _billed_ledger(settings, args.config, read_only=True)
    lines = [
        f"{'budget':<20} {'period':<23} {'cap USD':>12} {'estimated USD':>14} {'billed USD':>12} "
        f"{'billed covers est.':>18} {'spent USD':>12} {'used':>7}"
    ]
    late: list[str] = []  # budgets whose period started before the ledger's first record of one of their pools
    budgets = [Budget.from_settings(b) for b in settings.budgets]
    # a renamed pool's spend under its old ids is its own, a remote pool's too (every budget's old ids of it)
    previous = pool_previous_ids({p.id: p.previous_ids for p in settings.pools}, budgets)
    try:
        for budget in budgets:
            period, pools = budget.period(now), counted_pools(budget.pools, previous)
            if isinstance(ledger, RecordedSince) and budget.monthly_cap_usd is not None:  # as the daemon judges
                recorded = ledger.recorded_since(counted_pools(own_pools(budget), previous))
                coverage = ledger_coverage(budget, now, recorded, ledger.where, previous)
                if not coverage.complete:
                    late.append(
                        f"incomplete: budget {budget.name}'s ledger holds these of its pools only from after its "
                        f"period started at {_when(period.start)}: {coverage.late_pools(_when)}; their spend before "
                        "is not counted (import the period's bill of each with leadtime ledger import-billing; "
                        f"{NEW_OR_LOST})"
                    )
            estimated = ledger.estimated(pools, period.start, now)
            billed = ledger.billed(pools, period.start, now)
            covered = sum(r.estimated_usd for r in ledger.reconcile(pools, period.start, now))
            spent = ledger.spent(pools, period.start, now)
            cap = budget.monthly_cap_usd
            used = "-" if cap is None else f"{100.0 * spent / cap:.1f}%"
            first, last = period.start.astimezone(budget.tz), period.end.astimezone(budget.tz)  # the budget's dates
            lines.append(
                f"{budget.name:<20} {first:%Y-%m-%d}..{last:%Y-%m-%d}  "
                f"{'-' if cap is None else f'{cap:.2f}':>12} {estimated:>14.2f} {billed:>12.2f} {covered:>18.2f} "
                f"{spent:>12.2f} {used:>7}"
            )
        unclaimed = unclaimed_spend(ledger, budgets, previous, now)
        if unclaimed is not None and unclaimed[1]:
            where = f"at {ledger.where}" if isinstance(ledger, RecordedSince) else "configured"
            late.append("not counted: " + unclaimed_message(*unclaimed, where, _when, budgets))
    finally:
        _close(ledger)
    print("\n".join(lines + late))
    print(
        "spent is what the budget counts: billed cost where a billing export was imported, the estimate elsewhere "
        "(estimated - billed covers est. + billed)"
    )
    return 0


def _billed_ledger(settings: Settings, source: str, read_only: bool = False) -> BilledCosts:
    """The configured database ledger; opened ``read_only``, a SQLite file can be read while a daemon writes it and
    a PostgreSQL database is read in read-only sessions, its schema checked but never created or migrated."""
    from agent.ledger.billed import BilledCosts
    from agent.ledger.factory import open_ledger

    if settings.ledger.backend == "memory":
        problem = ConfigProblem("ledger.backend", "billed costs are kept in a SQLite or PostgreSQL ledger, not memory")
        raise ConfigError(source, [problem])
    if settings.ledger.backend == "sqlite" and not read_only:
        _refuse_missing_file(Path(settings.ledger.path), source)
    ledger = open_ledger(settings.ledger, read_only=read_only)
    assert isinstance(ledger, BilledCosts)  # both database ledgers keep billed costs
    return ledger


def _refuse_missing_file(path: Path, source: str) -> None:
    """Opening a missing file as its writer would create a new, empty ledger: the import would land there, beside
    the daemon's ledger, and report success (a relative path is the working directory's, not the daemon's)."""
    if path.is_file():
        return
    where = f"{path} ({path.absolute()})" if not path.is_absolute() else str(path)
    problem = ConfigProblem(
        "ledger.path",
        f"there is no ledger file at {where}: set ledger.path to the file the daemon writes "
        "(nothing was imported, and no new ledger was created)",
    )
    raise ConfigError(source, [problem])


def _close(ledger: object) -> None:
    close = getattr(ledger, "close", None)
    if callable(close):
        close()


def _reconciliation_table(report: list[Reconciliation]) -> str:
    lines = [f"{'pool':<24} {'hours':>9} {'estimated USD':>14} {'billed USD':>12} {'diff USD':>11} {'diff %':>8}"]
    for r in report:
        pct = r.difference_pct
        lines.append(
            f"{r.pool_id:<24} {r.hours:>9.2f} {r.estimated_usd:>14.2f} {r.billed_usd:>12.2f} "
            f"{r.difference_usd:>+11.2f} {'n/a' if pct is None else f'{pct:+.2f}%':>8}"
        )
    return "\n".join(lines)


def _when(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _at(text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError("--at", [ConfigProblem("--at", f"{text!r} is not an ISO 8601 time")]) from None
    if when.tzinfo is None:
        raise ConfigError("--at", [ConfigProblem("--at", f"{text!r} needs a time zone (e.g. +00:00)")])
    return when.astimezone(UTC)


def import_sqlite(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    if settings.ledger.backend != "postgresql":
        problem = ConfigProblem("ledger.backend", "import-sqlite copies into a PostgreSQL ledger: set postgresql")
        raise ConfigError(args.config, [problem])
    from agent.ledger.factory import open_ledger
    from agent.ledger.postgres import PostgresLedger  # the driver: asked for once the target is PostgreSQL
    from agent.ledger.sqlite import SqliteLedger

    source = Path(args.sqlite)
    if not source.is_file():
        raise LedgerUnavailable(f"there is no SQLite ledger file at {source}")
    with SqliteLedger(source) as sqlite:  # the writer: no daemon adds spend while it is read
        entries = sqlite.entries()
        bills = _sqlite_billed(source)
        pools = sorted({e.pool_id for e in entries} | {b.pool_id for b in bills})
        span = _span(entries, bills)
        read = _Spend.of(sqlite, pools, span)
    target = open_ledger(settings.ledger)
    assert isinstance(target, PostgresLedger)
    try:
        for at in range(0, len(entries), BATCH):
            target.record_many(entries[at : at + BATCH])
        for at in range(0, len(bills), BATCH):
            target.record_billed(bills[at : at + BATCH])
        held = _Spend.of(target, pools, span)
    finally:
        target.close()
    print(
        f"read {len(entries)} entries of {len(pools)} pools and {len(bills)} billed intervals from {source} "
        f"({read}); the PostgreSQL ledger at {target.where} now holds {held} for those pools over the same span "
        "(spent: the bill where one was imported, the estimate elsewhere)",
        file=sys.stdout,
    )
    if abs(held.spent - read.spent) > 0.005 or abs(held.billed - read.billed) > 0.005:
        print(
            "leadtime: the PostgreSQL ledger held other spend or bills for these pools before the import; check "
            "for another agent, an earlier import or a billing export imported there charging the same pools",
            file=sys.stderr,
        )
    return 0


@dataclass(frozen=True)
class _Spend:
    estimated: float
    billed: float
    spent: float

    @classmethod
    def of(cls, ledger: BilledCosts, pools: list[str], span: tuple[datetime, datetime] | None) -> _Spend:
        if span is None:
            return cls(0.0, 0.0, 0.0)
        return cls(ledger.estimated(pools, *span), ledger.billed(pools, *span), ledger.spent(pools, *span))

    def __str__(self) -> str:
        return f"estimated {self.estimated:.2f} USD, billed {self.billed:.2f} USD, spent {self.spent:.2f} USD"


def _span(entries: list[LedgerEntry], bills: list[BilledCost]) -> tuple[datetime, datetime] | None:
    """From the first start to the last end of the entries and bills: every one of them starts in it."""
    if not entries and not bills:
        return None
    starts = [e.start for e in entries] + [b.start for b in bills]
    ends = [e.end for e in entries] + [b.end for b in bills]
    return min(starts), max(ends)


def _sqlite_billed(path: Path) -> list[BilledCost]:
    """The billed costs the SQLite ledger at ``path`` stores (``agent.ledger.billed``), as stored: read through a
    read-only connection (the caller holds the file's writer lock, so nothing changes them meanwhile)."""
    from agent.ledger.billed import BilledCost
    from agent.ledger.rows import from_us

    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            rows = db.execute("SELECT pool_id, start_us, end_us, cost_usd FROM billed ORDER BY pool_id, start_us")
            return [BilledCost(str(p), from_us(int(s)), from_us(int(e)), float(c)) for p, s, e, c in rows]
    except sqlite3.Error as exc:
        raise LedgerUnavailable(f"cannot read the billed costs of the ledger {path}: {exc}") from None

"""``leadtime ledger import-sqlite --config FILE SQLITE``: move an existing SQLite ledger into the PostgreSQL ledger
that the configuration names (``ledger.backend: postgresql``), once, when a daemon moves from a file to a database.

The SQLite file is opened as its writer (so the import refuses to run while a daemon still writes it: stop the
daemon first) and copied in batches, each one transaction. Importing follows the ledger's own rule for a repeated
(pool, start), so running the import again changes nothing. It prints what it read and what the database then
holds for the same pools and span; a difference means the database already had other spend for those pools.
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from config import load_settings
from models import ConfigError, ConfigProblem, LedgerUnavailable

BATCH = 5000


def register(sub: Any) -> None:
    parser = sub.add_parser("ledger", help="manage the spend ledger")
    what = parser.add_subparsers(dest="what", required=True)
    move = what.add_parser("import-sqlite", help="copy a SQLite ledger into the configured PostgreSQL ledger")
    move.add_argument("--config", required=True, help="YAML configuration whose ledger is PostgreSQL")
    move.add_argument("sqlite", help="the SQLite ledger file to import")
    move.set_defaults(handler=import_sqlite)


def import_sqlite(args: argparse.Namespace) -> int:
    from agent.ledger.factory import open_ledger  # the PostgreSQL driver: only when a ledger is opened
    from agent.ledger.postgres import PostgresLedger
    from agent.ledger.sqlite import SqliteLedger

    settings = load_settings(args.config)
    if settings.ledger.backend != "postgresql":
        problem = ConfigProblem("ledger.backend", "import-sqlite copies into a PostgreSQL ledger: set postgresql")
        raise ConfigError(args.config, [problem])
    source = Path(args.sqlite)
    if not source.is_file():
        raise LedgerUnavailable(f"there is no SQLite ledger file at {source}")
    with SqliteLedger(source) as sqlite:
        entries = sqlite.entries()
    target = open_ledger(settings.ledger)
    assert isinstance(target, PostgresLedger)
    try:
        for at in range(0, len(entries), BATCH):
            target.record_many(entries[at : at + BATCH])
        pools = sorted({e.pool_id for e in entries})
        read = sum(e.cost_usd for e in entries)
        held = 0.0
        if entries:
            start = min(e.start for e in entries)
            end = max(e.start for e in entries) + timedelta(microseconds=1)
            held = target.spent(pools, start, end)
    finally:
        target.close()
    print(
        f"read {len(entries)} entries of {len(pools)} pools from {source} ({read:.2f} USD); "
        f"the PostgreSQL ledger at {target.where} now holds {held:.2f} USD for those pools over the same span",
        file=sys.stdout,
    )
    if abs(held - read) > 0.005:
        print(
            "leadtime: the PostgreSQL ledger held other spend for these pools before the import; check for "
            "another agent or an earlier import charging the same pools",
            file=sys.stderr,
        )
    return 0

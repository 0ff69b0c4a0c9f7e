"""The SQLite ledger file's schema: its tables, the marks that make a file a leadtime ledger, and their check.

A file is a leadtime ledger when its ``application_id`` is ``APPLICATION_ID``; its ``user_version`` is the schema
version it was last written with. ``create`` makes what is missing (every statement is ``IF NOT EXISTS``, so an
older file is upgraded in place); ``check`` refuses another application's database and a schema newer than this
release knows.
"""

from __future__ import annotations

import sqlite3

from agent.ledger import sqlite_totals as totals

SCHEMA_VERSION = 3  # 2: billed costs beside the entries (agent.ledger.billed); 3: running spend totals
APPLICATION_ID = 0x4C44_5447  # "LDTG": marks the file as a leadtime ledger
_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    pool_id  TEXT    NOT NULL,
    start_us INTEGER NOT NULL,
    end_us   INTEGER NOT NULL,
    units    INTEGER NOT NULL,
    cost_usd REAL    NOT NULL,
    PRIMARY KEY (pool_id, start_us)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS entries_by_end ON entries (pool_id, end_us);
CREATE TABLE IF NOT EXISTS billed (
    pool_id  TEXT    NOT NULL,
    start_us INTEGER NOT NULL,
    end_us   INTEGER NOT NULL,
    cost_usd REAL    NOT NULL,
    PRIMARY KEY (pool_id, start_us)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS billed_by_end ON billed (pool_id, end_us);
"""


def check(db: sqlite3.Connection) -> None:
    """Refuse (``sqlite3.DatabaseError``) another application's database, or a schema newer than this release's."""
    application_id = db.execute("PRAGMA application_id").fetchone()[0]
    version = db.execute("PRAGMA user_version").fetchone()[0]
    tables = db.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
    if tables and application_id != APPLICATION_ID:
        raise sqlite3.DatabaseError("the file holds another application's database")
    if version > SCHEMA_VERSION:
        raise sqlite3.DatabaseError(f"ledger schema {version} is newer than this release knows ({SCHEMA_VERSION})")


def create(db: sqlite3.Connection) -> None:
    """Create what the file lacks of the schema and mark it (inside the caller's transaction)."""
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
    for statement in totals.SCHEMA:
        db.execute(statement)
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

"""The SQLite ledger file's size: the space retention frees (``agent.ledger.retention``) is given back to the file
system, so the file of a long-running agent shrinks once old history is removed instead of keeping its largest size.

SQLite keeps the pages of deleted rows in the file, on its free list, for later rows. A ledger file is created with
incremental auto-vacuum, which lets a write give free pages back in bounded steps: after each pruning (at most
``retention.BATCH`` rows of each table, a few hundred pages), the ledger gives back up to ``STEP_PAGES`` free pages
(``PRAGMA incremental_vacuum``) and checkpoints the write-ahead log into the file, truncating the log, so that what
the volume holds shrinks (about 0.03 s a pruning on a 2-core machine).

``PRAGMA auto_vacuum`` only takes effect on a database without tables, or through a ``VACUUM``, which rebuilds the
whole file. A file created before has none: it is switched by one ``VACUUM`` once a pruning leaves at least
``SHARE`` of its pages free, when the rebuild pays for itself (a 12 MB file of 94 days of 15-minute entries of 20
pools, a quarter of it free, is rebuilt in about 0.2 s); a smaller free list is reused by the rows that follow.
From then on space is given back in steps, as in a new file. The rebuild needs free space about as large as the
file; a failure is logged and tried again after the next pruning, the spend being recorded already.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

log = logging.getLogger(__name__)

INCREMENTAL = 2  # PRAGMA auto_vacuum: 0 none, 1 full, 2 incremental
SHARE = 0.25
STEP_PAGES = 4_096  # 16 MiB at SQLite's default 4 KiB pages: a pruning batch frees far fewer


def create_incremental(db: sqlite3.Connection) -> None:
    """Make a new (table-less) database give free pages back on request; on a database with tables, no effect."""
    db.execute(f"PRAGMA auto_vacuum = {INCREMENTAL}")


def give_back(db: sqlite3.Connection, path: Path) -> None:
    """Give the file's free pages back after a pruning (outside any transaction). A failure is logged, not raised:
    the spend is recorded already, and the next pruning tries again."""
    started = time.monotonic()
    try:
        mode = int(db.execute("PRAGMA auto_vacuum").fetchone()[0])
        pages, free = _pages(db)
        rebuilt = mode != INCREMENTAL
        if free == 0 or (rebuilt and free < SHARE * pages):
            return
        if rebuilt:
            db.execute(f"PRAGMA auto_vacuum = {INCREMENTAL}")
            db.execute("VACUUM")
        else:
            # stepped to the end, as a script: execute() steps once, which gives back a single page
            db.executescript(f"PRAGMA incremental_vacuum({STEP_PAGES});")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()  # the file shrinks when the log is copied back
        after, _ = _pages(db)
    except sqlite3.Error as exc:
        log.warning(
            "could not give the free space of the ledger file %s back (%s); it is tried again after the next pruning",
            path,
            exc,
            extra={"ledger": str(path)},
        )
        return
    log.log(
        logging.INFO if rebuilt else logging.DEBUG,
        "ledger file %s: %d of %d pages given back after removing old history%s (%.2f s)",
        path,
        pages - after,
        pages,
        ", the file rebuilt once to give space back from now on" if rebuilt else "",
        time.monotonic() - started,
        extra={"ledger": str(path), "pages_before": pages, "pages_after": after, "rebuilt": rebuilt},
    )


def _pages(db: sqlite3.Connection) -> tuple[int, int]:
    return int(db.execute("PRAGMA page_count").fetchone()[0]), int(db.execute("PRAGMA freelist_count").fetchone()[0])

"""Opening the configured ledger, with the PostgreSQL password read from a mounted file or the environment.

The PostgreSQL ledger (and so its driver, part of the ``daemon`` extra) is imported only when that backend is
opened: the commands that read or bill the default SQLite file run on a light install."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from agent.ledger.base import Ledger
from agent.ledger.memory import InMemoryLedger
from agent.ledger.shared_file import LeaderWrittenLedger
from agent.ledger.sqlite import SqliteLedger
from config.ledger import LedgerSettings
from models import ConfigError, ConfigProblem


def open_ledger(
    settings: LedgerSettings, environ: Mapping[str, str] | None = None, *, read_only: bool = False
) -> Ledger:
    """The SQLite ledger at ``settings.path`` (the default), the PostgreSQL one at ``settings.url``, or an
    in-memory one for simulations; ``read_only``, a database ledger as a command that only reads it opens it: never
    created, migrated or written."""
    if settings.backend == "memory":
        return InMemoryLedger()
    if settings.backend == "postgresql":
        from agent.ledger.postgres import PostgresLedger  # the driver: only for this backend

        assert settings.url is not None  # checked by the settings
        options: dict[str, str] = {"sslmode": settings.sslmode}
        if settings.sslrootcert is not None:
            options["sslrootcert"] = settings.sslrootcert
        return PostgresLedger(
            settings.url,
            ledger_password(settings, os.environ if environ is None else environ),
            connect_timeout=settings.connect_timeout,
            options=options,
            read_only=read_only,
            retention=settings.retention,
        )
    if read_only:
        return SqliteLedger(settings.path, read_only=True)
    return SqliteLedger(settings.path, fresh_if_empty=settings.fresh_if_empty, retention=settings.retention)


def open_daemon_ledger(settings: LedgerSettings) -> Ledger:
    """The daemon's ledger: as ``open_ledger``, except that a SQLite file the replicas share is opened for the
    leader alone to write (``agent.ledger.shared_file``; the daemon tells it who leads)."""
    if settings.backend == "sqlite" and settings.shared_file:
        return LeaderWrittenLedger(settings.path, fresh_if_empty=settings.fresh_if_empty, retention=settings.retention)
    return open_ledger(settings)


def ledger_password(settings: LedgerSettings, environ: Mapping[str, str]) -> str | None:
    """The password from the file named by ``password_file``, else from the variable named by ``password_env``;
    ``None`` when neither holds one (the server may not ask: a client certificate or a trusted network).
    Errors name the file or the variable, never the password."""
    if settings.password_file is not None:
        try:
            password = Path(settings.password_file).read_text(encoding="utf-8").rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as exc:
            problem = ConfigProblem(
                "ledger.password_file", f"cannot read the password file: {type(exc).__name__}: {exc.args[-1]}"
            )
            raise ConfigError("ledger", [problem]) from None
        if not password:
            problem = ConfigProblem("ledger.password_file", f"the file {settings.password_file} is empty")
            raise ConfigError("ledger", [problem])
        return password
    return environ.get(settings.password_env) or None

"""Fixtures (a pytest plugin): one real PostgreSQL server per test session, a new empty database per test.

Tests that use them carry ``pytest.mark.xdist_group("postgres")`` so that they share one worker and one server.
Missing server binaries fail the test with the way to install them: nothing is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.postgres.server import PostgresServer, find_bindir

POSTGRES = pytest.mark.xdist_group("postgres")


@dataclass(frozen=True)
class Database:
    url: str  # without the password, as the configuration holds it
    password: str


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    bindir = find_bindir()
    if bindir is None:
        pytest.fail(
            "the PostgreSQL server binaries (initdb, postgres) are not under /usr/lib/postgresql/*/bin: "
            "install the Debian package `postgresql` (`make postgresql`)"
        )
    server = PostgresServer(bindir)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_database(postgres_server: PostgresServer) -> Database:
    return Database(postgres_server.new_database(), postgres_server.password)

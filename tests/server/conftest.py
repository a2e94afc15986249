"""A real PostgreSQL (with pgvector) on 127.0.0.1 for the server-tier tests, started and stopped here
by `ragspine.testing.postgres.LocalPostgres` (the `pgserver` wheel's binaries, a throw-away data
folder, a free port; as `nobody` under root).

One server per test session; each test gets its own schema (`pg_url`), dropped afterwards.
Set RAGSPINE_TEST_POSTGRES_URL to use a server you run instead (it must have the `vector`
extension available); set RAGSPINE_SKIP_SERVER_TESTS=1 to skip these tests explicitly. Anything
else that stops the server from starting fails the tests loudly; nothing is skipped silently.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from ragspine.testing.postgres import LocalPostgres

SKIP_ENV = "RAGSPINE_SKIP_SERVER_TESTS"
URL_ENV = "RAGSPINE_TEST_POSTGRES_URL"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of a PostgreSQL superuser connection to a server with `vector` available."""
    if os.environ.get(SKIP_ENV, "").strip().lower() in ("1", "true", "yes"):
        pytest.skip(f"server tests disabled by {SKIP_ENV}")
    import psycopg

    external = os.environ.get(URL_ENV, "").strip()
    server = None
    if external:
        url = external
    else:
        server = LocalPostgres()
        try:
            url = server.start()
        except BaseException:
            server.stop()
            server.remove()
            raise
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        yield url
    finally:
        if server is not None:
            server.stop()
            server.remove()


@pytest.fixture
def pg_url(postgres_server: str) -> Iterator[str]:
    """A URL whose connections work in a fresh schema of their own (dropped after the test)."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in postgres_server else "?"
    yield f"{postgres_server}{sep}options={quote(f'-c search_path={schema},public')}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")

"""Open a chunk store from a target string: a PostgreSQL URL or a SQLite path.

Invariant: `postgresql://` / `postgres://` URLs open a `PostgresChunkStore` (psycopg imported
only then); anything else is a path (or ":memory:") for the SQLite `ChunkStore`. Both honour
one contract (tests/server/chunk_store_suite.py); neither creates its schema here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Union

from ragspine.retrieval.store.sqlite import ChunkStore

if TYPE_CHECKING:
    from ragspine.retrieval.store.postgres import PostgresChunkStore

AnyChunkStore = Union[ChunkStore, "PostgresChunkStore"]
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(target: str | Path) -> bool:
    """Whether `target` names a PostgreSQL database rather than a SQLite file."""
    return isinstance(target, str) and target.lower().startswith(POSTGRES_SCHEMES)


def open_chunk_store(target: str | Path) -> AnyChunkStore:
    """A `PostgresChunkStore` for a `postgresql://…` URL, else a SQLite `ChunkStore`.

    >>> store = open_chunk_store(":memory:"); type(store).__name__
    'ChunkStore'
    >>> store.close()
    """
    if is_postgres_url(target):
        from ragspine.retrieval.store.postgres import PostgresChunkStore

        return PostgresChunkStore(str(target))
    return ChunkStore(target)

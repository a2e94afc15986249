"""The one way to open a chunk store: `open_chunk_store(target, store=None)`.

    open_chunk_store("data/chunks.db")                          # SQLite (a path, or sqlite:///path)
    open_chunk_store("postgresql://user@host/db")               # PostgreSQL (psycopg imported then)
    open_chunk_store("mem://x", store="my_pkg.stores:MyStore")  # a class of yours: MyStore(target)

Invariants: the target's URL scheme picks the class from the CHUNK_STORES registry (a target
without a scheme is a SQLite path); an unknown scheme is a ValueError whose list of valid names
comes from the registry, so it can never drift; `store` (a registry name or a dotted path)
overrides the scheme; whatever is opened is checked against `ChunkStoreProtocol`. A backend's
driver is imported only when that backend is opened. No schema is created here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ragspine.registry import Entry, Registry
from ragspine.retrieval.store.protocol import ChunkStoreProtocol

_POSTGRES = "ragspine.retrieval.store.postgres:PostgresChunkStore"
CHUNK_STORES: Registry[ChunkStoreProtocol] = Registry(
    "chunk store",
    {
        "sqlite": Entry("ragspine.retrieval.store.sqlite:ChunkStore", "a SQLite file: a path, or sqlite:///path"),
        "postgresql": Entry(_POSTGRES, "a PostgreSQL database: postgresql://… [postgres]"),
        "postgres": Entry(_POSTGRES, "the same, postgres://…"),
    },
    protocol=ChunkStoreProtocol,
)
DEFAULT_STORE = "sqlite"  # what a target without a URL scheme names
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def store_kind(target: str | Path) -> str:
    """The registry name `target` asks for: its URL scheme, lower-cased, or "sqlite" for a path.

    >>> store_kind("postgresql://u@h/db"), store_kind("data/chunks.db"), store_kind("SQLite:///x")
    ('postgresql', 'sqlite', 'sqlite')
    """
    found = _SCHEME.match(target) if isinstance(target, str) else None
    return found.group(1).lower() if found else DEFAULT_STORE


def is_postgres_url(target: str | Path) -> bool:
    """Whether `target` names a PostgreSQL database rather than a SQLite file."""
    return store_kind(target) in ("postgresql", "postgres")


def open_chunk_store(target: str | Path, *, store: str | None = None, **options: Any) -> ChunkStoreProtocol:
    """The chunk store at `target`, of the class its scheme (or `store`) names; `options` go to
    its constructor (e.g. `cache_dir=` for a PostgreSQL store).

    >>> with open_chunk_store(":memory:") as opened:
    ...     type(opened).__name__
    'ChunkStore'
    >>> try:
    ...     open_chunk_store("mysql://h/db")
    ... except ValueError as exc:
    ...     print(exc)
    unknown chunk store 'mysql'; valid: sqlite, postgresql, postgres, or a dotted path package.module:Class
    """
    key, build = CHUNK_STORES.builder(store if store is not None else store_kind(target))
    if key == "sqlite" and isinstance(target, str) and store_kind(target) == "sqlite":
        target = _SCHEME.sub("", target, count=1)  # sqlite:///abs/path -> /abs/path
    opened = build(target if key == "sqlite" else str(target), **options)
    if not isinstance(opened, ChunkStoreProtocol):
        close = getattr(opened, "close", None)
        if callable(close):
            close()
        raise TypeError(
            f"chunk store {key!r} opened a {type(opened).__name__}, which does not implement "
            "ChunkStoreProtocol (see ragspine.retrieval.store.protocol)"
        )
    return opened

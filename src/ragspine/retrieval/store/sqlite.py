"""Versioned chunk store on SQLite: the specification's `ChunkStore(db_path)`.

Invariants: the chunk-store contract of `sql_base.SQLChunkStore` (one schema, one transaction
per write, versions, the change log; every row's sensitivity stored normalised by `_row`), with
SQLite's dialect: a write is BEGIN IMMEDIATE … COMMIT (ROLLBACK on any error, unless SQLite
already rolled back, as it does on a full disk), which serialises writers across processes, and
a full disk is raised as `StorageFull` (`store.full`); the file is in WAL mode; `execute_read`
runs only reads (an authorizer denies every write, schema change and pragma); a path that holds
something other than a RAGSpine store is refused (`NotAChunkStoreError`) before anything is
written to it: a store we made carries a `store_uid` in its meta table; one without (made before
that record existed) must have a `narrative_chunk` table whose columns are all ours, the
specification's core ones included, so another program's table of that name is never adopted and
altered.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, ClassVar

from ragspine.errors import RagspineError
from ragspine.retrieval.model import Chunk  # noqa: F401 - the doctest uses it
from ragspine.retrieval.store.full import raising_storage_full
from ragspine.retrieval.store.protocol import StoredChunk
from ragspine.retrieval.store.sql_base import (  # noqa: F401 - _COLUMNS, _row: bench/prepare.py
    _COLUMNS,
    CHANGES_TABLE,
    META_TABLE,
    TABLE,
    SQLChunkStore,
    _row,
    iter_chunks_query,
)

__all__ = [
    "CHANGES_TABLE", "META_TABLE", "TABLE", "ChunkStore", "NotAChunkStoreError", "StoredChunk",
    "Snapshot", "Transaction", "iter_chunks_query", "set_wal_mode",
]  # fmt: skip

_ALLOWED_READ_ACTIONS = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)


class NotAChunkStoreError(RagspineError, ValueError):
    """The path exists but is not a RAGSpine chunk store."""


class ChunkStore(SQLChunkStore):
    """Versioned chunk storage in one SQLite file (WAL mode), or in memory (":memory:").

    >>> with ChunkStore(":memory:") as store:
    ...     store.init_schema()
    ...     store.replace_doc_chunks("d", [Chunk("d:0", "d", 0, "text", "d#p1@0-4")])
    1
    """

    max_pages: ClassVar[int | None] = None
    """A drill, never needed in use: SQLite's `max_page_count` for the write connection of every
    store opened while it is set (None: SQLite's own limit). A write past it fails exactly as on a
    full disk ("database or disk is full"), so tests set it to reproduce one without filling a disk."""

    def __init__(self, db_path: str | Path) -> None:
        self.db_path = str(db_path)
        if self.db_path != ":memory:":
            path = Path(self.db_path)
            _check_is_store_or_new(path)
            path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(self.db_path, check_same_thread=False, isolation_level=None)
        try:
            set_wal_mode(self._conn)
            if self.max_pages is not None:
                self._conn.execute(f"PRAGMA max_page_count={int(self.max_pages)}")
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise NotAChunkStoreError(f"{self.db_path} is not a SQLite database: {exc}") from exc

    def __repr__(self) -> str:
        return f"ChunkStore({self.db_path!r})"

    def execute_read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one read-only statement; anything that would write or change state is refused."""
        with self._lock:
            self._conn.set_authorizer(_read_only_authorizer)
            try:
                return self._conn.execute(sql, tuple(params)).fetchall()
            except sqlite3.DatabaseError as exc:
                if "not authorized" in str(exc):
                    raise PermissionError(f"execute_read accepts only reads (SELECT): {sql!r}") from exc
                raise
            finally:
                self._conn.set_authorizer(None)

    # -- dialect ------------------------------------------------------------------------------
    def _write(self) -> AbstractContextManager[None]:
        return raising_storage_full(Transaction(self._conn))

    def _snapshot(self) -> Snapshot:
        return Snapshot(self._conn)

    def _columns(self, table: str) -> set[str]:
        return {row[1] for row in self._conn.execute(f"PRAGMA table_info({table})")}

    def _reader_connection(self) -> sqlite3.Connection | None:
        if self.db_path == ":memory:":
            return None  # another connection would see another database
        conn = sqlite3.connect(
            Path(self.db_path).resolve().as_uri() + "?mode=ro", uri=True,
            check_same_thread=False, isolation_level=None,
        )  # fmt: skip
        conn.execute("PRAGMA busy_timeout=10000")
        return conn

    def _logs_changes(self) -> bool:
        return (
            self._conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (CHANGES_TABLE,)
            ).fetchone()
            is not None
        )


def set_wal_mode(conn: sqlite3.Connection) -> None:
    """The pragmas a long-lived connection to a SQLite file runs first: the WAL journal (readers
    never block the writer) and a 10 s wait on a lock before "database is locked"."""
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA busy_timeout=10000")


class Transaction:
    """BEGIN IMMEDIATE … COMMIT, or ROLLBACK on any exception (a COMMIT that fails included).
    SQLite rolls back by itself after some errors (SQLITE_FULL, SQLITE_IOERR): then there is
    nothing left to roll back, and the error that caused it is what propagates."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is not None:
            self._rollback()
            return
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error:
            self._rollback()
            raise

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")


class Snapshot:
    """BEGIN … COMMIT around reads: the SELECTs inside see one committed state."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> None:
        self._conn.execute("BEGIN")

    def __exit__(self, *_: object) -> None:
        self._conn.execute("COMMIT")


def _read_only_authorizer(action: int, *_: object) -> int:
    return sqlite3.SQLITE_OK if action in _ALLOWED_READ_ACTIONS else sqlite3.SQLITE_DENY


_SQLITE_MAGIC = b"SQLite format 3\x00"
_CORE_COLUMNS = frozenset({"chunk_id", "doc_id", "text"})  # every chunk table has had them


def _check_is_store_or_new(path: Path) -> None:
    """Refuse a path that holds something other than a (possibly empty) RAGSpine store."""
    if path.is_dir():
        raise NotAChunkStoreError(f"{path} is a directory, not a chunk store file")
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb") as handle:
        if handle.read(16) != _SQLITE_MAGIC:
            raise NotAChunkStoreError(f"{path} is not a RAGSpine chunk store (not a SQLite file)")
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        ours = META_TABLE in tables and conn.execute(
            f"SELECT 1 FROM {META_TABLE} WHERE key = 'store_uid'"
        ).fetchone() is not None
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({TABLE})")}
    except sqlite3.DatabaseError as exc:
        raise NotAChunkStoreError(f"{path} is not a RAGSpine chunk store ({exc})") from exc
    finally:
        conn.close()
    if tables - {"sqlite_sequence"} and TABLE not in tables:
        raise NotAChunkStoreError(
            f"{path} is a SQLite database without a {TABLE!r} table: not a RAGSpine chunk store"
        )
    foreign = sorted(columns - set(_COLUMNS) - {"row_id"})
    if TABLE in tables and not ours and (foreign or not _CORE_COLUMNS <= columns):
        what = f"columns RAGSpine never makes ({', '.join(foreign)})" if foreign else "not the columns of a chunk store"
        raise NotAChunkStoreError(
            f"{path} has a {TABLE!r} table that RAGSpine did not create: {what}; it is left "
            "untouched: point RAGSPINE_DB (or --db) at a new file"
        )

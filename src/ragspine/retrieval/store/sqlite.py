"""Versioned chunk store on SQLite.

Invariants: every write is one transaction (a reader never sees half a document version);
`replace_doc_chunks` gives the new rows version = max(version) + 1 and marks older rows
inactive; an empty list withdraws the document; SQL is parameterised; `execute_read` runs only
reads (an authorizer denies every write, schema change and pragma). `data_version` grows with
every committed change, so caches built over the store can tell when they are stale; the change
log (written in the same transaction as each replacement) tells them which documents changed,
so they can catch up instead of rebuilding.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any

from ragspine.retrieval.model import Chunk, metadata_json

TABLE = "narrative_chunk"
META_TABLE = "ragspine_meta"
CHANGES_TABLE = "ragspine_changes"


@dataclass(frozen=True)
class StoredChunk(Chunk):
    """A `Chunk` as stored: its ingest metadata and whether it is in the active set."""

    valid_as_of: str = ""
    ingested_at: str = ""
    version: int = 1
    active: bool = True


class NotAChunkStoreError(ValueError):
    """The path exists but is not a RAGSpine chunk store."""


_COLUMN_TYPES: dict[str, str] = {
    f.name: (
        "INTEGER NOT NULL DEFAULT 0" if f.type in ("int", "bool")
        else "TEXT NOT NULL DEFAULT '{}'" if f.name == "metadata"  # user metadata as JSON
        else "TEXT NOT NULL DEFAULT ''"
    )
    for f in fields(StoredChunk)
}  # fmt: skip
_COLUMNS: tuple[str, ...] = tuple(_COLUMN_TYPES)
_ALLOWED_READ_ACTIONS = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)


class ChunkStore:
    """Versioned chunk storage in one SQLite file (WAL mode).

    >>> with ChunkStore(":memory:") as store:
    ...     store.init_schema()
    ...     store.replace_doc_chunks("d", [Chunk("d:0", "d", 0, "text", "d#p1@0-4")])
    1
    """

    def __init__(self, db_path: str | Path) -> None:
        self.db_path = str(db_path)
        if self.db_path != ":memory:":
            path = Path(self.db_path)
            _check_is_store_or_new(path)
            path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(self.db_path, check_same_thread=False, isolation_level=None)
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA busy_timeout=10000")
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise NotAChunkStoreError(f"{self.db_path} is not a SQLite database: {exc}") from exc

    # -- schema -------------------------------------------------------------------------------
    def init_schema(self) -> None:
        """Create the table and indexes, or add columns missing from an older schema. Idempotent."""
        with self._lock, self._transaction():
            self._conn.execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE} (row_id INTEGER PRIMARY KEY AUTOINCREMENT)"
            )
            present = {row[1] for row in self._conn.execute(f"PRAGMA table_info({TABLE})")}
            for name in _COLUMNS:
                if name not in present:
                    self._conn.execute(f"ALTER TABLE {TABLE} ADD COLUMN {name} {_COLUMN_TYPES[name]}")
            if "active" not in present and present - {"row_id"}:
                self._conn.execute(f"UPDATE {TABLE} SET active = 1")  # older rows were all live
            self._conn.execute(
                f"CREATE INDEX IF NOT EXISTS ix_{TABLE}_doc ON {TABLE} (doc_id, version)"
            )
            self._conn.execute(
                f"CREATE INDEX IF NOT EXISTS ix_{TABLE}_active ON {TABLE} (active, chunk_id)"
            )
            self._conn.execute(
                f"CREATE TABLE IF NOT EXISTS {META_TABLE} (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )
            self._conn.execute(
                f"INSERT OR IGNORE INTO {META_TABLE} (key, value) VALUES ('data_version', '0')"
            )
            self._conn.execute(
                f"INSERT OR IGNORE INTO {META_TABLE} (key, value) VALUES ('store_uid', ?)",
                (uuid.uuid4().hex,),
            )
            # The change log covers every version after the one at which it was created.
            self._conn.execute(
                f"INSERT OR IGNORE INTO {META_TABLE} (key, value) SELECT 'changes_from', value "
                f"FROM {META_TABLE} WHERE key = 'data_version'"
            )
            self._conn.execute(
                f"CREATE TABLE IF NOT EXISTS {CHANGES_TABLE} "
                "(version INTEGER NOT NULL, doc_id TEXT NOT NULL)"
            )
            self._conn.execute(
                f"CREATE INDEX IF NOT EXISTS ix_{CHANGES_TABLE}_version ON {CHANGES_TABLE} (version)"
            )

    # -- writes -------------------------------------------------------------------------------
    def replace_doc_chunks(self, doc_id: str, chunks: Sequence[Chunk], valid_as_of: str = "") -> int:
        """Make `chunks` the active version of `doc_id` in one transaction; return rows written.

        An empty `chunks` withdraws the document (its rows stay, inactive, for lineage).
        """
        for chunk in chunks:
            if chunk.doc_id != doc_id:
                raise ValueError(f"chunk {chunk.chunk_id!r} belongs to {chunk.doc_id!r}, not {doc_id!r}")
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with self._lock, self._transaction():
            (current,) = self._conn.execute(
                f"SELECT COALESCE(MAX(version), 0) FROM {TABLE} WHERE doc_id = ?", (doc_id,)
            ).fetchone()
            self._conn.execute(
                f"UPDATE {TABLE} SET active = 0 WHERE doc_id = ? AND active = 1", (doc_id,)
            )
            rows = [
                _row(chunk, valid_as_of=valid_as_of, ingested_at=now, version=current + 1)
                for chunk in chunks
            ]
            placeholders = ", ".join("?" for _ in _COLUMNS)
            self._conn.executemany(
                f"INSERT INTO {TABLE} ({', '.join(_COLUMNS)}) VALUES ({placeholders})", rows
            )
            self._conn.execute(
                f"UPDATE {META_TABLE} SET value = CAST(value AS INTEGER) + 1 WHERE key = 'data_version'"
            )
            if self._has_table(CHANGES_TABLE):
                self._conn.execute(
                    f"INSERT INTO {CHANGES_TABLE} (version, doc_id) SELECT CAST(value AS INTEGER), ? "
                    f"FROM {META_TABLE} WHERE key = 'data_version'",
                    (doc_id,),
                )
        return len(rows)

    # -- reads --------------------------------------------------------------------------------
    def iter_chunks(
        self,
        *,
        doc_id: str | None = None,
        topic: str | None = None,
        entity: str | None = None,
        geography: str | None = None,
        period: str | None = None,
        language: str | None = None,
        include_inactive: bool = False,
    ) -> list[StoredChunk]:
        """Chunks matching every given field (AND), active ones only unless asked, in
        (doc_id, version, seq) order."""
        given = {
            "doc_id": doc_id,
            "topic": topic,
            "entity": entity,
            "geography": geography,
            "period": period,
            "language": language,
        }
        sql, params = iter_chunks_query(given, include_inactive)
        with self._lock:
            rows = self._conn.execute(sql, params).fetchall()
        return [_stored(row) for row in rows]

    def data_version(self) -> int:
        """A counter that grows with every committed change to the chunks."""
        with self._lock:
            row = self._conn.execute(
                f"SELECT value FROM {META_TABLE} WHERE key = 'data_version'"
            ).fetchone()
        return int(row[0]) if row else 0

    def changes_since(self, version: int) -> tuple[int, list[str]] | None:
        """(current data_version, distinct doc_ids changed after `version`, in change order),
        read in one snapshot; None when the change log does not cover every version after
        `version` (then a cache must rebuild)."""
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                meta = dict(self._conn.execute(f"SELECT key, value FROM {META_TABLE}").fetchall())
                current = int(meta.get("data_version", 0))
                if "changes_from" not in meta or not self._has_table(CHANGES_TABLE):
                    return None
                if version < int(meta["changes_from"]) or version > current:
                    return None
                rows = self._conn.execute(
                    f"SELECT version, doc_id FROM {CHANGES_TABLE} WHERE version > ? "
                    "ORDER BY version, rowid",
                    (version,),
                ).fetchall()
            finally:
                self._conn.execute("COMMIT")
        if {v for v, _ in rows} != set(range(version + 1, current + 1)):
            return None  # a write that did not log itself: the log has a gap
        return current, list(dict.fromkeys(doc for _, doc in rows))

    def chunks_by_row_ids(self, row_ids: Sequence[int]) -> list[StoredChunk | None]:
        """The stored rows with these row ids (active or not), in the given order; None for
        a row id that does not exist."""
        found: dict[int, StoredChunk] = {}
        wanted = list(dict.fromkeys(int(r) for r in row_ids))
        for start in range(0, len(wanted), 500):
            batch = wanted[start : start + 500]
            marks = ", ".join("?" for _ in batch)
            sql = f"SELECT row_id, {', '.join(_COLUMNS)} FROM {TABLE} WHERE row_id IN ({marks})"
            with self._lock:
                rows = self._conn.execute(sql, batch).fetchall()
            for row in rows:
                found[row[0]] = _stored(row[1:])
        return [found.get(int(r)) for r in row_ids]

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

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> ChunkStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _transaction(self) -> Transaction:
        return Transaction(self._conn)

    def _has_table(self, name: str) -> bool:
        return (
            self._conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
            ).fetchone()
            is not None
        )


class Transaction:
    """BEGIN IMMEDIATE … COMMIT, or ROLLBACK on any exception."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        self._conn.execute("ROLLBACK" if exc_type else "COMMIT")


def iter_chunks_query(
    given: dict[str, str | None],
    include_inactive: bool,
    *,
    mark: str = "?",
    order: str = "doc_id, version, seq",
) -> tuple[str, list[Any]]:
    """The SELECT behind `iter_chunks` (shared by every ChunkStore): the given fields AND-ed,
    active rows only unless asked; `mark` is the driver's placeholder."""
    clauses = [f"{name} = {mark}" for name, value in given.items() if value is not None]
    params: list[Any] = [value for value in given.values() if value is not None]
    if not include_inactive:
        clauses.append("active = 1")
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    return f"SELECT {', '.join(_COLUMNS)} FROM {TABLE}{where} ORDER BY {order}", params


def _read_only_authorizer(action: int, *_: object) -> int:
    return sqlite3.SQLITE_OK if action in _ALLOWED_READ_ACTIONS else sqlite3.SQLITE_DENY


def _row(chunk: Chunk, **ingest: Any) -> tuple[Any, ...]:
    values = {f.name: getattr(chunk, f.name) for f in fields(Chunk)}
    values["metadata"] = metadata_json(chunk.metadata)
    values.update(ingest, active=1)
    return tuple(values[name] for name in _COLUMNS)


def _stored(row: Iterable[Any]) -> StoredChunk:
    values = dict(zip(_COLUMNS, row, strict=True))
    values["active"] = bool(values["active"])
    values["metadata"] = json.loads(values["metadata"] or "{}")
    return StoredChunk(**values)


_SQLITE_MAGIC = b"SQLite format 3\x00"


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
    finally:
        conn.close()
    if tables - {"sqlite_sequence"} and TABLE not in tables:
        raise NotAChunkStoreError(
            f"{path} is a SQLite database without a {TABLE!r} table: not a RAGSpine chunk store"
        )

"""One SQL implementation of the chunk-store Protocol; SQLite and PostgreSQL supply only a dialect.

Invariants (checked for every backend by `ragspine.testing.chunk_store.ChunkStoreSuite`):
- One schema: tables, columns and column types are the same in every backend (user metadata is
  canonical JSON text), so SQL written against one runs on the other through `execute_read`.
- Every write is one transaction, serialised with every other writer (the dialect's `_write`),
  so a reader never sees half a document version and versions never interleave.
  `replace_doc_chunks` gives the new rows version = max(version) + 1, marks older rows inactive,
  bumps `data_version` and logs the change in that transaction; an empty list withdraws the
  document (its rows stay, inactive, for lineage). Every row's sensitivity is stored normalised
  (`normalize_label`, in `_row`, through which every backend writes its rows).
- `data_version` grows with every committed change; the change log covers every version after
  `changes_from`, so caches over the store can tell when they are stale and which documents
  changed, and catch up instead of rebuilding. Each logged write carries a random `epoch`
  (`epoch_at(version)`), so a cache can tell a store's own history from a restored or diverged
  copy's that reached the same version, uid, row count and row-id sum.
- `read_snapshot()` gives a view whose reads all see one committed state (one read transaction),
  for caches that read in several statements (pages of a rebuild, a catch-up).
- Every statement is parameterised; the dialect supplies the placeholder (`_MARK`).
"""

from __future__ import annotations

import copy
import json
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import fields
from datetime import UTC, datetime
from typing import Any, ClassVar, Self, Unpack

from ragspine.closing import Closeable
from ragspine.retrieval.model import FILTER_FIELDS, Chunk, FieldFilters, field_filters, metadata_json
from ragspine.retrieval.sensitivity import normalize_label
from ragspine.retrieval.store.protocol import (
    INDEX_ROW_FIELDS,
    ChunkCounts,
    IndexRow,
    StoredChunk,
)

TABLE = "narrative_chunk"
META_TABLE = "ragspine_meta"
CHANGES_TABLE = "ragspine_changes"

_COLUMN_TYPES: dict[str, str] = {
    f.name: (
        "INTEGER NOT NULL DEFAULT 0" if f.type in ("int", "bool")
        else "TEXT NOT NULL DEFAULT '{}'" if f.name == "metadata"  # user metadata as JSON
        else "TEXT NOT NULL DEFAULT ''"
    )
    for f in fields(StoredChunk)
}  # fmt: skip
_COLUMNS: tuple[str, ...] = tuple(_COLUMN_TYPES)
_INDEX_COLUMNS = ", ".join(INDEX_ROW_FIELDS)
_FILTERS = ("doc_id", *FILTER_FIELDS)  # the fields `iter_chunks` matches, in its SQL's order
IN_BATCH = 500  # keys per IN (...) list where the dialect has no array parameter
OWN_META_KEYS = frozenset({"data_version", "store_uid", "changes_from"})  # kept by the store itself


class SQLChunkStore(Closeable):
    """The chunk store in SQL; subclasses set the dialect (class attributes and `_` hooks).

    Not used directly: open a `ChunkStore` (SQLite) or a `PostgresChunkStore`.
    """

    db_path: str = ":memory:"
    _MARK: ClassVar[str] = "?"  # the driver's placeholder
    _BYTE_ORDER: ClassVar[str] = ""  # after a text column in ORDER BY: compare bytes
    _LOCK_META: ClassVar[str] = ""  # after the data_version read of a write: lock the row
    _ROW_ID: ClassVar[str] = "INTEGER PRIMARY KEY AUTOINCREMENT"
    _CHANGE_ORDER: ClassVar[str] = ""  # the change log's insertion-order column, if declared
    _conn: Any
    _lock: threading.RLock

    # -- dialect hooks ------------------------------------------------------------------------
    def _write(self) -> AbstractContextManager[Any]:
        """A write transaction, serialised with every other writer; rolled back on error."""
        raise NotImplementedError

    def _snapshot(self) -> AbstractContextManager[Any]:
        """A read transaction: the statements in it see one committed state."""
        raise NotImplementedError

    def _columns(self, table: str) -> set[str]:
        """The column names `table` has now."""
        raise NotImplementedError

    def _begin_schema(self) -> None:
        """Called first inside init_schema's transaction (e.g. to take a schema lock)."""

    def _insert_many(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        self._conn.executemany(sql, rows)

    def _reader_connection(self) -> Any:
        """A second connection for `read_snapshot` (None: read on this one, holding the lock)."""
        return None

    def _logs_changes(self) -> bool:
        """Whether the change-log table exists (a store whose schema predates it has none)."""
        return True

    def _in(self, column: str, values: Sequence[Any]) -> Iterator[tuple[str, list[Any]]]:
        """(condition, parameters) pairs that together select `column IN values`."""
        for start in range(0, len(values), IN_BATCH):
            batch = list(values[start : start + IN_BATCH])
            yield f"{column} IN ({', '.join(self._MARK for _ in batch)})", batch

    def execute_read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    # -- schema -------------------------------------------------------------------------------
    def init_schema(self) -> None:
        """Create the tables and indexes, or add columns missing from an older schema. Idempotent."""
        m = self._MARK
        with self._lock, self._write():
            run = self._conn.execute
            self._begin_schema()
            run(f"CREATE TABLE IF NOT EXISTS {TABLE} (row_id {self._ROW_ID})")
            present = self._columns(TABLE)
            for name in _COLUMNS:
                if name not in present:
                    run(f"ALTER TABLE {TABLE} ADD COLUMN {name} {_COLUMN_TYPES[name]}")
            if "active" not in present and present - {"row_id"}:
                run(f"UPDATE {TABLE} SET active = 1")  # rows of an older schema were all live
            run(f"CREATE INDEX IF NOT EXISTS ix_{TABLE}_doc ON {TABLE} (doc_id, version)")
            run(f"CREATE INDEX IF NOT EXISTS ix_{TABLE}_active ON {TABLE} (active, chunk_id)")
            run(f"CREATE TABLE IF NOT EXISTS {META_TABLE} (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            run(
                f"INSERT INTO {META_TABLE} (key, value) VALUES ('data_version', '0'), "
                f"('store_uid', {m}) ON CONFLICT (key) DO NOTHING",
                (uuid.uuid4().hex,),
            )
            # The change log covers every version after the one at which it was created.
            run(
                f"INSERT INTO {META_TABLE} (key, value) SELECT 'changes_from', value "
                f"FROM {META_TABLE} WHERE key = 'data_version' ON CONFLICT (key) DO NOTHING"
            )
            run(
                f"CREATE TABLE IF NOT EXISTS {CHANGES_TABLE} "
                f"(version INTEGER NOT NULL, doc_id TEXT NOT NULL{self._CHANGE_ORDER})"
            )
            if "epoch" not in self._columns(CHANGES_TABLE):
                run(f"ALTER TABLE {CHANGES_TABLE} ADD COLUMN epoch TEXT NOT NULL DEFAULT ''")
            run(f"CREATE INDEX IF NOT EXISTS ix_{CHANGES_TABLE}_version ON {CHANGES_TABLE} (version)")

    # -- writes -------------------------------------------------------------------------------
    def replace_doc_chunks(self, doc_id: str, chunks: Sequence[Chunk], valid_as_of: str = "") -> int:
        """Make `chunks` the active version of `doc_id` in one transaction; return rows written.

        An empty `chunks` withdraws the document (its rows stay, inactive, for lineage).
        """
        for chunk in chunks:
            if chunk.doc_id != doc_id:
                raise ValueError(f"chunk {chunk.chunk_id!r} belongs to {chunk.doc_id!r}, not {doc_id!r}")
        now = datetime.now(UTC).isoformat(timespec="seconds")
        m = self._MARK
        with self._lock, self._write():
            run = self._conn.execute
            row = run(
                f"SELECT value FROM {META_TABLE} WHERE key = 'data_version'{self._LOCK_META}"
            ).fetchone()
            version = int(row[0]) + 1 if row else 1
            (current,) = run(
                f"SELECT COALESCE(MAX(version), 0) FROM {TABLE} WHERE doc_id = {m}", (doc_id,)
            ).fetchone()
            run(f"UPDATE {TABLE} SET active = 0 WHERE doc_id = {m} AND active = 1", (doc_id,))
            rows = [
                _row(chunk, valid_as_of=valid_as_of, ingested_at=now, version=current + 1)
                for chunk in chunks
            ]
            if rows:
                marks = ", ".join(m for _ in _COLUMNS)
                self._insert_many(f"INSERT INTO {TABLE} ({', '.join(_COLUMNS)}) VALUES ({marks})", rows)
            run(f"UPDATE {META_TABLE} SET value = {m} WHERE key = 'data_version'", (str(version),))
            if self._logs_changes():
                if self._logs_epochs():
                    run(f"INSERT INTO {CHANGES_TABLE} (version, doc_id, epoch) VALUES ({m}, {m}, {m})",
                        (version, doc_id, uuid.uuid4().hex))  # fmt: skip
                else:
                    run(f"INSERT INTO {CHANGES_TABLE} (version, doc_id) VALUES ({m}, {m})", (version, doc_id))
        return len(rows)

    def write_meta(self, key: str, value: str) -> None:
        """Keep `value` under `key` in the store's meta table (replacing any earlier value), in
        one transaction; the store's own keys (OWN_META_KEYS) are refused with ValueError."""
        if not isinstance(key, str) or not key.strip() or key in OWN_META_KEYS:
            raise ValueError(
                f"meta key {key!r} is not writable: use a non-empty key other than the store's "
                f"own ({', '.join(sorted(OWN_META_KEYS))})"
            )
        if not isinstance(value, str):
            raise ValueError(f"meta value must be a string (e.g. JSON text), got {type(value).__name__}")
        m = self._MARK
        with self._lock, self._write():
            self._conn.execute(
                f"INSERT INTO {META_TABLE} (key, value) VALUES ({m}, {m}) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    # -- reads --------------------------------------------------------------------------------
    def read_meta(self, key: str) -> str | None:
        """The value kept under `key` in the store's meta table; None when there is none."""
        rows = self._rows(f"SELECT value FROM {META_TABLE} WHERE key = {self._MARK}", (key,))
        return str(rows[0][0]) if rows else None

    def iter_chunks(
        self, *, doc_id: str | None = None, include_inactive: bool = False, **filters: Unpack[FieldFilters]
    ) -> list[StoredChunk]:
        """Chunks matching every given field (`doc_id` and the `FieldFilters`, AND-ed), active
        ones only unless asked, in (doc_id, version, seq) order (doc_id in byte order)."""
        given: dict[str, str | None] = {"doc_id": doc_id, **field_filters(filters, caller="iter_chunks")}
        sql, params = iter_chunks_query(
            {name: given.get(name) for name in _FILTERS},
            include_inactive,
            mark=self._MARK,
            order=f"doc_id{self._BYTE_ORDER}, version, seq",
        )
        return [_stored(row) for row in self._rows(sql, params)]

    def data_version(self) -> int:
        """A counter that grows with every committed change to the chunks."""
        rows = self._rows(f"SELECT value FROM {META_TABLE} WHERE key = 'data_version'")
        return int(rows[0][0]) if rows else 0

    def store_uid(self) -> str:
        """The store's random identity ("" for a store whose schema predates it)."""
        return self.read_meta("store_uid") or ""

    def epoch_at(self, version: int) -> str:
        """The random epoch of the write that made `version` ("" for version 0, or a write
        logged before epochs existed): two stores that agree here share their history."""
        if not self._logs_changes() or not self._logs_epochs():
            return ""
        rows = self._rows(
            f"SELECT epoch FROM {CHANGES_TABLE} WHERE version = {self._MARK} LIMIT 1", (int(version),)
        )
        return str(rows[0][0]) if rows else ""

    @contextmanager
    def read_snapshot(self) -> Iterator[Self]:
        """A view of this store whose reads all see one committed state (one read transaction),
        until the block ends. SQLite reads a file through a second connection (WAL: writers are
        not blocked); otherwise the view reads on this connection, holding its lock. Only reads
        may be made through the view."""
        conn = self._reader_connection()
        view = copy.copy(self)
        if conn is None:
            with self._lock, self._snapshot():
                setattr(view, "_snapshot", nullcontext)  # already inside the read transaction
                yield view
            return
        view._conn, view._lock = conn, threading.RLock()
        try:
            with view._snapshot():
                setattr(view, "_snapshot", nullcontext)
                yield view
        finally:
            conn.close()

    def changes_since(self, version: int) -> tuple[int, list[str]] | None:
        """(current data_version, distinct doc_ids changed after `version`, in change order),
        read in one snapshot; None when the change log does not cover every version after
        `version` (then a cache must rebuild)."""
        with self._lock, self._snapshot():
            meta = dict(self._conn.execute(f"SELECT key, value FROM {META_TABLE}").fetchall())
            current = int(meta.get("data_version", 0))
            if "changes_from" not in meta or not self._logs_changes():
                return None
            if version < int(meta["changes_from"]) or version > current:
                return None
            rows = self._conn.execute(
                f"SELECT version, doc_id FROM {CHANGES_TABLE} WHERE version > {self._MARK} "
                "ORDER BY version, rowid",
                (version,),
            ).fetchall()
        if {v for v, _ in rows} != set(range(version + 1, current + 1)):
            return None  # a write that did not log itself: the log has a gap
        return current, list(dict.fromkeys(doc for _, doc in rows))

    def counts(self, *, include_inactive: bool = False) -> ChunkCounts:
        """Documents and chunk rows, active ones only unless asked (one statement)."""
        where = "" if include_inactive else " WHERE active = 1"
        ((documents, chunks),) = self._rows(f"SELECT COUNT(DISTINCT doc_id), COUNT(*) FROM {TABLE}{where}")
        return ChunkCounts(int(documents), int(chunks))

    def active_doc_ids(self) -> list[str]:
        """The doc_ids that have active chunks, in byte order."""
        sql = (
            f"SELECT doc_id FROM {TABLE} WHERE active = 1 GROUP BY doc_id "
            f"ORDER BY doc_id{self._BYTE_ORDER}"
        )
        return [row[0] for row in self._rows(sql)]

    def active_version(self, doc_id: str) -> int | None:
        """The version of `doc_id`'s active chunks; None when it has none."""
        sql = f"SELECT MAX(version) FROM {TABLE} WHERE doc_id = {self._MARK} AND active = 1"
        ((version,),) = self._rows(sql, (doc_id,))
        return None if version is None else int(version)

    def latest_version(self, doc_id: str) -> int:
        """The highest version ever written for `doc_id` (active or not); 0 when never."""
        sql = f"SELECT COALESCE(MAX(version), 0) FROM {TABLE} WHERE doc_id = {self._MARK}"
        ((version,),) = self._rows(sql, (doc_id,))
        return int(version)

    def chunks_by_row_ids(self, row_ids: Sequence[int]) -> list[StoredChunk | None]:
        """The stored rows with these row ids (active or not), in the given order; None for
        a row id that does not exist."""
        wanted = list(dict.fromkeys(int(r) for r in row_ids))
        found: dict[int, StoredChunk] = {}
        for condition, params in self._in("row_id", wanted):
            sql = f"SELECT row_id, {', '.join(_COLUMNS)} FROM {TABLE} WHERE {condition}"
            for row in self._rows(sql, params):
                found[row[0]] = _stored(row[1:])
        return [found.get(int(r)) for r in row_ids]

    def active_index_rows(self, *, after_row_id: int, limit: int) -> list[IndexRow]:
        """Up to `limit` active rows after `after_row_id`, in row-id order (INDEX_ROW_FIELDS)."""
        m = self._MARK
        sql = (
            f"SELECT {_INDEX_COLUMNS} FROM {TABLE} WHERE active = 1 AND row_id > {m} "
            f"ORDER BY row_id LIMIT {m}"
        )
        return self._rows(sql, (int(after_row_id), int(limit)))

    def index_rows(self, row_ids: Sequence[int]) -> list[IndexRow]:
        """The INDEX_ROW_FIELDS of these rows (active or not); missing ids are absent."""
        out: list[IndexRow] = []
        for condition, params in self._in("row_id", [int(r) for r in row_ids]):
            out.extend(self._rows(f"SELECT {_INDEX_COLUMNS} FROM {TABLE} WHERE {condition}", params))
        return out

    def row_states(self, doc_ids: Sequence[str], *, active_only: bool = False) -> list[tuple[int, bool]]:
        """(row_id, active) of every row, any version (only active ones if asked: then the
        cost follows the documents' current size, not their history), of these documents."""
        out: list[tuple[int, bool]] = []
        only = " AND active = 1" if active_only else ""
        for condition, params in self._in("doc_id", list(doc_ids)):
            rows = self._rows(f"SELECT row_id, active FROM {TABLE} WHERE {condition}{only}", params)
            out.extend((int(r), bool(a)) for r, a in rows)
        return out

    def active_fingerprint(self) -> tuple[int, int]:
        """(number of active rows, sum of their row ids)."""
        ((count, total),) = self._rows(
            f"SELECT COUNT(*), COALESCE(SUM(row_id), 0) FROM {TABLE} WHERE active = 1"
        )
        return int(count), int(total)

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _logs_epochs(self) -> bool:
        """Whether the change log has its epoch column (kept once seen: columns are never dropped)."""
        if not self.__dict__.get("_epochs"):
            self.__dict__["_epochs"] = "epoch" in self._columns(CHANGES_TABLE)
        return bool(self.__dict__["_epochs"])

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            rows: list[tuple[Any, ...]] = self._conn.execute(sql, params).fetchall()
        return rows


def iter_chunks_query(
    given: dict[str, str | None],
    include_inactive: bool,
    *,
    mark: str = "?",
    order: str = "doc_id, version, seq",
) -> tuple[str, list[Any]]:
    """The SELECT behind `iter_chunks`: the given fields AND-ed, active rows only unless asked;
    `mark` is the driver's placeholder."""
    clauses = [f"{name} = {mark}" for name, value in given.items() if value is not None]
    params: list[Any] = [value for value in given.values() if value is not None]
    if not include_inactive:
        clauses.append("active = 1")
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    return f"SELECT {', '.join(_COLUMNS)} FROM {TABLE}{where} ORDER BY {order}", params


def _row(chunk: Chunk, **ingest: Any) -> tuple[Any, ...]:
    """The column values of `chunk` as written (metadata as canonical JSON, sensitivity
    normalised, active = 1)."""
    values = {f.name: getattr(chunk, f.name) for f in fields(Chunk)}
    values["metadata"] = metadata_json(chunk.metadata)
    values["sensitivity"] = normalize_label(chunk.sensitivity)  # every store writes rows through here
    values.update(ingest, active=1)
    return tuple(values[name] for name in _COLUMNS)


def _stored(row: Iterable[Any]) -> StoredChunk:
    values = dict(zip(_COLUMNS, row, strict=True))
    values["active"] = bool(values["active"])
    values["metadata"] = json.loads(values["metadata"] or "{}")
    return StoredChunk(**values)

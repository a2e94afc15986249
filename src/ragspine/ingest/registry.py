"""The document registry: one row per ingested document, beside the chunks in the same database
(the SQLite file, or the PostgreSQL database a `postgresql://` URL names).

Invariants: the `ragspine_document` table is created and used only through this module, on its
own connection (the chunk store's schema is untouched); the SQL is the same for both databases
but for the placeholder and the upsert, and PostgreSQL creates the table under an advisory lock
(replicas may ingest at the same time); each write is one transaction; a row
records the content hash of the file, the `ingest_key` (content plus everything else that shapes
the chunks: sidecar, defaults, rules, chunk budget), the store version holding its chunks, and
the document's effective metadata as JSON, free fields included (they have no chunk-store column
yet and are not filterable). Reads never write, so an unchanged re-run leaves the file as it was.

Documents are known by content: `content_hash` (the bytes) and `text_hash` (the loaded text,
normalised: `ingest.content.text_hash`); a second copy of an active document's content is a row
with status `duplicate` and `duplicate_of` naming the stored one (no chunks of its own). A store
made before these columns opens as it is: the missing columns are added (`ALTER TABLE … ADD
COLUMN`, empty defaults) when the registry opens, so old rows read with `text_hash == ""` and
`duplicate_of == ""`. The `ragspine_ingest_failure` table keeps the failures of each file's last
run (by resolved path), so a run can tell a new failure from a known, permanent one.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragspine.closing import Closeable
from ragspine.retrieval.store.factory import is_postgres_url
from ragspine.retrieval.store.postgres import connect

TABLE = "ragspine_document"
FAILURES = "ragspine_ingest_failure"
ACTIVE, WITHDRAWN, DUPLICATE = "active", "withdrawn", "duplicate"

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    doc_id TEXT PRIMARY KEY,
    root TEXT NOT NULL,
    source_path TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    ingest_key TEXT NOT NULL,
    version INTEGER NOT NULL,
    chunks INTEGER NOT NULL,
    status TEXT NOT NULL,
    loader TEXT NOT NULL DEFAULT '',
    encoding TEXT NOT NULL DEFAULT '',
    pages INTEGER NOT NULL DEFAULT 0,
    size_bytes INTEGER NOT NULL DEFAULT 0,
    metadata TEXT NOT NULL DEFAULT '{{}}',
    ingested_at TEXT NOT NULL,
    text_hash TEXT NOT NULL DEFAULT '',
    duplicate_of TEXT NOT NULL DEFAULT ''
)"""
# Columns added after the first release, with their definitions: added to an older table on open.
_ADDED = (("text_hash", "TEXT NOT NULL DEFAULT ''"), ("duplicate_of", "TEXT NOT NULL DEFAULT ''"))
_INDEXES = (
    f"CREATE INDEX IF NOT EXISTS ix_{TABLE}_root ON {TABLE} (root, status)",
    f"CREATE INDEX IF NOT EXISTS ix_{TABLE}_content ON {TABLE} (content_hash)",
    f"CREATE INDEX IF NOT EXISTS ix_{TABLE}_text ON {TABLE} (text_hash)",
    f"CREATE INDEX IF NOT EXISTS ix_{TABLE}_path ON {TABLE} (source_path)",
    f"CREATE INDEX IF NOT EXISTS ix_{TABLE}_duplicate ON {TABLE} (duplicate_of)",
    f"CREATE TABLE IF NOT EXISTS {FAILURES} (path TEXT PRIMARY KEY, reason TEXT NOT NULL, seen_at TEXT NOT NULL)",
)
_SCHEMA_LOCK = 0x52474452  # pg_advisory_xact_lock key: one registry CREATE at a time ("RGDR")
_FIELDS = (
    "doc_id", "root", "source_path", "content_hash", "ingest_key", "version", "chunks", "status",
    "loader", "encoding", "pages", "size_bytes", "metadata", "ingested_at", "text_hash", "duplicate_of",
)  # fmt: skip


@dataclass(frozen=True)
class DocumentRecord:
    """What the registry knows about one document."""

    doc_id: str
    root: str
    source_path: str
    content_hash: str
    ingest_key: str
    version: int
    chunks: int
    status: str = ACTIVE
    loader: str = ""
    encoding: str = ""
    pages: int = 0
    size_bytes: int = 0
    metadata: str = "{}"
    ingested_at: str = ""
    text_hash: str = ""  # the loaded text's normalised hash ('' in rows older than the column)
    duplicate_of: str = ""  # status DUPLICATE: the doc_id whose chunks hold this content

    def metadata_dict(self) -> dict[str, Any]:
        """The stored metadata (known and free fields) as a dict."""
        data = json.loads(self.metadata)
        return data if isinstance(data, dict) else {}


class DocumentRegistry(Closeable):
    """Registry rows in the SQLite file at `db_path`, or the PostgreSQL database a `postgresql://`
    URL names (create the chunk store there first).

    >>> with DocumentRegistry(":memory:") as registry:
    ...     registry.record(DocumentRecord("a.md", "/r", "/r/a.md", "h", "k", 1, 3))
    ...     registry.get("a.md").chunks
    3
    """

    def __init__(self, db_path: str | Path) -> None:
        self.db_path = str(db_path)
        self._postgres = is_postgres_url(self.db_path)
        if self._postgres:
            self._conn = connect(self.db_path)  # autocommit; a failure names the server, never the URL
            self._mark = "%s"
            with self._conn.transaction():
                self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                self._conn.execute(_SCHEMA)
                for name, definition in _ADDED:
                    self._conn.execute(f"ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS {name} {definition}")
                for statement in _INDEXES:
                    self._conn.execute(statement)
            return
        self._mark = "?"
        # Used from the HTTP service's threads too; `IngestPipeline` writes one row at a time.
        self._conn = sqlite3.connect(self.db_path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA busy_timeout=10000")
        # A registry row lost to a power cut only means that document is ingested again next run.
        self._conn.execute("PRAGMA synchronous=NORMAL")
        (exists,) = self._conn.execute(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?", (TABLE,)
        ).fetchone()
        if not exists:
            self._conn.execute(_SCHEMA)
        if self._needs_migration():  # an older store: migrated once, under a write lock
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                columns = {row[1] for row in self._conn.execute(f"PRAGMA table_info({TABLE})")}
                for name, definition in _ADDED:
                    if name not in columns:
                        self._conn.execute(f"ALTER TABLE {TABLE} ADD COLUMN {name} {definition}")
                for statement in _INDEXES:
                    self._conn.execute(statement)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _needs_migration(self) -> bool:
        """Whether this SQLite registry lacks a column or an index of this version (reads only)."""
        columns = {row[1] for row in self._conn.execute(f"PRAGMA table_info({TABLE})")}
        names = [f"ix_{TABLE}_duplicate", FAILURES]
        (have,) = self._conn.execute(
            "SELECT COUNT(*) FROM sqlite_master WHERE name IN (?, ?)", tuple(names)
        ).fetchone()
        return any(name not in columns for name, _ in _ADDED) or have < len(names)

    def _write(self) -> Any:
        """One write transaction on this registry's connection."""
        return self._conn.transaction() if self._postgres else self._conn

    def get(self, doc_id: str) -> DocumentRecord | None:
        """The row for `doc_id`, or None."""
        row = self._conn.execute(
            f"SELECT {', '.join(_FIELDS)} FROM {TABLE} WHERE doc_id = {self._mark}", (doc_id,)
        ).fetchone()
        return DocumentRecord(*row) if row else None

    def active_under(self, root: str) -> list[DocumentRecord]:
        """Active documents found under the folder `root` (an absolute path), by doc_id."""
        return self._where(f"root = {self._mark} AND status = {self._mark}", (root, ACTIVE))

    def within(self, folder: Path) -> list[DocumentRecord]:
        """Active and duplicate rows whose file lies in `folder` (an absolute path) or below it,
        whatever root they were found under (`--prune` of a sub-folder or a parent), by doc_id."""
        rows = self._where(f"status IN ({self._mark}, {self._mark})", (ACTIVE, DUPLICATE))
        prefix = os.path.join(str(folder), "")  # the folder with one trailing separator
        return [row for row in rows if _lies_in(row, str(folder), prefix)]

    def by_source_path(self, path: str) -> list[DocumentRecord]:
        """Active and duplicate rows of the file at `path` (resolved), by doc_id."""
        m = self._mark
        return self._where(f"source_path = {m} AND status IN ({m}, {m})", (path, ACTIVE, DUPLICATE))

    def with_content(self, content_hash: str, text_hash: str = "") -> list[DocumentRecord]:
        """Every row (any status) whose bytes hash is `content_hash` or whose text hash is
        `text_hash` (an empty hash matches nothing), by doc_id."""
        m = self._mark
        return self._where(
            f"(content_hash = {m} AND content_hash <> '') OR (text_hash = {m} AND text_hash <> '')",
            (content_hash, text_hash),
        )

    def duplicates(self, of: Sequence[str] | None = None) -> list[DocumentRecord]:
        """Duplicate rows (of the doc_ids `of`; None: all), by doc_id."""
        if of is None:
            return self._where(f"status = {self._mark}", (DUPLICATE,))
        if not of:
            return []
        marks = ", ".join(self._mark for _ in of)
        return self._where(f"status = {self._mark} AND duplicate_of IN ({marks})", (DUPLICATE, *of))

    def _where(self, condition: str, params: tuple[Any, ...]) -> list[DocumentRecord]:
        rows = self._conn.execute(
            f"SELECT {', '.join(_FIELDS)} FROM {TABLE} WHERE {condition} ORDER BY doc_id{self._byte_order}", params
        ).fetchall()
        return [DocumentRecord(*row) for row in rows]

    def all(self) -> list[DocumentRecord]:
        """Every row, by doc_id."""
        rows = self._conn.execute(f"SELECT {', '.join(_FIELDS)} FROM {TABLE} ORDER BY doc_id{self._byte_order}")
        return [DocumentRecord(*row) for row in rows.fetchall()]

    def record(self, entry: DocumentRecord) -> None:
        """Insert or replace the row for `entry.doc_id` (one transaction)."""
        placeholders = ", ".join(self._mark for _ in _FIELDS)
        update = ", ".join(f"{name} = excluded.{name}" for name in _FIELDS[1:])
        with self._write():
            self._conn.execute(
                f"INSERT INTO {TABLE} ({', '.join(_FIELDS)}) VALUES ({placeholders}) "
                f"ON CONFLICT (doc_id) DO UPDATE SET {update}",
                tuple(getattr(entry, name) for name in _FIELDS),
            )

    def mark_withdrawn(self, doc_id: str, at: str) -> None:
        """Record that `doc_id` was withdrawn from the active set."""
        m = self._mark
        with self._write():
            self._conn.execute(
                f"UPDATE {TABLE} SET status = {m}, chunks = 0, ingested_at = {m} WHERE doc_id = {m}",
                (WITHDRAWN, at, doc_id),
            )

    def failures(self) -> dict[str, str]:
        """The failures recorded by the last run that met each path: {path: reason}."""
        return dict(self._conn.execute(f"SELECT path, reason FROM {FAILURES}").fetchall())

    def record_failures(self, failed: Mapping[str, str], succeeded: Iterable[str], at: str) -> None:
        """Record this run's `failed` paths (resolved: reason) and forget `succeeded` ones."""
        m = self._mark
        with self._write():
            for path in succeeded:
                self._conn.execute(f"DELETE FROM {FAILURES} WHERE path = {m}", (path,))
            for path, reason in failed.items():
                self._conn.execute(
                    f"INSERT INTO {FAILURES} (path, reason, seen_at) VALUES ({m}, {m}, {m}) "
                    "ON CONFLICT (path) DO UPDATE SET reason = excluded.reason, seen_at = excluded.seen_at",
                    (path, reason, at),
                )

    @property
    def _byte_order(self) -> str:
        return ' COLLATE "C"' if self._postgres else ""  # doc_ids in byte order, as SQLite sorts

    def close(self) -> None:
        self._conn.close()


def _lies_in(row: DocumentRecord, folder: str, prefix: str) -> bool:
    """Whether the row's file (its `source_path`, else root/doc_id) is `folder` or below it
    (`prefix`: the folder with a trailing separator); compared as strings, both absolute."""
    path = row.source_path or os.path.join(row.root, row.doc_id)
    return path == folder or path.startswith(prefix)

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
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragspine.closing import Closeable
from ragspine.retrieval.store.factory import is_postgres_url
from ragspine.retrieval.store.postgres import connect

TABLE = "ragspine_document"
ACTIVE, WITHDRAWN = "active", "withdrawn"

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
    ingested_at TEXT NOT NULL
)"""
_SCHEMA_LOCK = 0x52474452  # pg_advisory_xact_lock key: one registry CREATE at a time ("RGDR")
_FIELDS = (
    "doc_id", "root", "source_path", "content_hash", "ingest_key", "version", "chunks", "status",
    "loader", "encoding", "pages", "size_bytes", "metadata", "ingested_at",
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
                self._conn.execute(f"CREATE INDEX IF NOT EXISTS ix_{TABLE}_root ON {TABLE} (root, status)")
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
            self._conn.execute(f"CREATE INDEX IF NOT EXISTS ix_{TABLE}_root ON {TABLE} (root, status)")

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
        rows = self._conn.execute(
            f"SELECT {', '.join(_FIELDS)} FROM {TABLE} WHERE root = {self._mark} AND status = {self._mark} "
            f"ORDER BY doc_id{self._byte_order}",
            (root, ACTIVE),
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

    @property
    def _byte_order(self) -> str:
        return ' COLLATE "C"' if self._postgres else ""  # doc_ids in byte order, as SQLite sorts

    def close(self) -> None:
        self._conn.close()

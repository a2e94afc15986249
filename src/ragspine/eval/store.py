"""The eval's chunk store: in memory, or kept at --db and reused by later runs.

Invariants: a kept store records, in its own table `ragspine_eval_manifest`, what was ingested
(corpus SHA-256, dataset name, document count, chunking) and whether ingest finished. A later
run with the same fingerprint skips ingest (or resumes an interrupted one); a different
corpus or chunking, or a chunk store that `ragspine eval` did not build, is an `EvalError`,
never a silent mix. The chunk tables themselves are written only through `ChunkStore`.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass
from enum import Enum

from ragspine.eval.modes import EvalError
from ragspine.retrieval.store.sqlite import ChunkStore

MANIFEST_TABLE = "ragspine_eval_manifest"
IN_MEMORY = ":memory:"


@dataclass(frozen=True)
class IngestFingerprint:
    """What decides the stored chunks: the corpus bytes and the chunking."""

    dataset: str
    corpus_sha256: str
    docs: int
    chunking: str  # "whole" or "<max_chars>/<overlap_chars>"
    text_layout: str = "title\\n\\ntext"

    def same_corpus(self, other: IngestFingerprint) -> bool:
        return self.corpus_sha256 == other.corpus_sha256


class StoreState(str, Enum):
    NEW = "new"  # nothing ingested yet
    PARTIAL = "partial"  # an earlier run with this fingerprint stopped during ingest
    COMPLETE = "complete"  # ingest finished: skip it


def open_store(db: str | None) -> ChunkStore:
    """The chunk store at `db` (schema ensured), or a fresh in-memory one."""
    store = ChunkStore(db or IN_MEMORY)
    try:
        store.init_schema()
    except BaseException:
        store.close()
        raise
    return store


def check_store(store: ChunkStore, fingerprint: IngestFingerprint) -> StoreState:
    """How `store` relates to `fingerprint`; raise EvalError when it holds something else."""
    if store.db_path == IN_MEMORY:
        return StoreState.NEW
    recorded = _read_manifest(store.db_path)
    if recorded is None:
        if store.counts(include_inactive=True).chunks:
            raise EvalError(
                f"{store.db_path} already holds a chunk store that `ragspine eval` did not build; "
                "pass a new --db path (eval never mixes a dataset into other documents)"
            )
        return StoreState.NEW
    stored, status = recorded
    if not stored.same_corpus(fingerprint):
        raise EvalError(
            f"{store.db_path} holds the eval store of a different corpus ({stored.dataset}, "
            f"{stored.docs} docs, sha256 {stored.corpus_sha256[:12]}…) than {fingerprint.dataset} "
            f"(sha256 {fingerprint.corpus_sha256[:12]}…); pass another --db or delete that file"
        )
    if stored != fingerprint:
        raise EvalError(
            f"{store.db_path} holds {stored.dataset} ingested with chunking {stored.chunking} "
            f"(layout {stored.text_layout!r}); this run asks for chunking {fingerprint.chunking} "
            f"(layout {fingerprint.text_layout!r}); pass another --db or delete that file"
        )
    return StoreState.COMPLETE if status == StoreState.COMPLETE.value else StoreState.PARTIAL


def mark_ingest(store: ChunkStore, fingerprint: IngestFingerprint, state: StoreState) -> None:
    """Record `fingerprint` with `state` (PARTIAL before ingest, COMPLETE after)."""
    if store.db_path == IN_MEMORY:
        return
    value = json.dumps({"fingerprint": asdict(fingerprint), "status": state.value})
    with _connect(store.db_path) as conn:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {MANIFEST_TABLE} (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )
        conn.execute(
            f"INSERT OR REPLACE INTO {MANIFEST_TABLE} (key, value) VALUES ('ingest', ?)", (value,)
        )


def active_doc_ids(store: ChunkStore) -> set[str]:
    """Documents that have active chunks (those a resumed ingest can skip)."""
    return set(store.active_doc_ids())


def active_chunk_count(store: ChunkStore) -> int:
    return store.counts().chunks


def _read_manifest(db_path: str) -> tuple[IngestFingerprint, str] | None:
    with _connect(db_path) as conn:
        exists = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (MANIFEST_TABLE,)
        ).fetchone()
        if not exists:
            return None
        row = conn.execute(f"SELECT value FROM {MANIFEST_TABLE} WHERE key = 'ingest'").fetchone()
    if row is None:
        return None
    try:
        data = json.loads(row[0])
        return IngestFingerprint(**data["fingerprint"]), str(data["status"])
    except (ValueError, KeyError, TypeError) as exc:
        raise EvalError(f"{db_path}: unreadable eval manifest ({exc}); delete the file and rerun") from exc


class _connect:
    """A short-lived connection of our own for the manifest table (committed on success)."""

    def __init__(self, db_path: str) -> None:
        self._conn = sqlite3.connect(db_path, isolation_level=None)
        self._conn.execute("PRAGMA busy_timeout=10000")

    def __enter__(self) -> sqlite3.Connection:
        self._conn.execute("BEGIN IMMEDIATE")
        return self._conn

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        try:
            self._conn.execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            self._conn.close()

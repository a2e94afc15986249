"""Persisted dense vectors of a chunk store's chunks, and the batch job that fills them at ingest.

`ChunkVectors` keeps one unit-length float32 vector per chunk_id, for ONE embedding model, in a
SQLite file beside the chunk store (`<db>.vectors.sqlite`) or in memory.

Invariants:
- A file records the `model_id` and `dim` it was made with; opening it with another model_id,
  or another (non-None) dim, raises `VectorModelMismatch`, whose message says how to re-embed.
  Vectors of different models are never mixed or compared.
- A chunk_id carries a digest of its text, so its text never changes: a stored vector is never
  recomputed (`embed_chunks` only embeds ids `missing` reports).
- Every write (`add`, `retain`) is one transaction (BEGIN IMMEDIATE … COMMIT, ROLLBACK on any
  error): a reader sees all of it or none of it, and a rejected input (wrong dimension, NaN or
  infinity) writes nothing. Rows are L2-normalised before they are stored.
- `version()` grows with every write that changes something. Each vector row records the
  version that wrote it and each deleted id leaves a tombstone with the version that deleted
  it (removed again if the id is re-added), so `changed_since(v)` tells an in-memory matrix
  exactly which ids to (re)load and which to drop.
- `embed_chunks` never sends a RESTRICTED chunk to a remote backend (`can_embed`); that chunk
  stays lexical-only. It commits each batch before embedding the next, so an interrupted run
  resumes where it stopped. For the active chunks of one run,
  embedded + present + lexical_only == number of active chunks.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import numpy as np
from tqdm import tqdm

from ragspine.retrieval.chunking.contextual import indexed_text
from ragspine.retrieval.chunking.protocol import IndexTextFn
from ragspine.retrieval.store.protocol import ChunkStoreProtocol, StoredChunk
from ragspine.retrieval.store.sqlite import Snapshot as _Snapshot
from ragspine.retrieval.store.sqlite import Transaction
from ragspine.retrieval.vector.arrays import as_matrix, unit_rows
from ragspine.retrieval.vector.embeddings.support import (
    EmbeddingBackendError,
    can_embed,
    model_id_of,
)
from ragspine.retrieval.vector.errors import VectorModelMismatch

VECTORS_SUFFIX = ".vectors.sqlite"
_META = "chunk_vector_meta"
_VECTORS = "chunk_vector"
_TOMBSTONES = "chunk_vector_deleted"
_FORMAT = "ragspine-chunk-vectors-v1"
_IN_BATCH = 900  # ids per IN (...) query: below SQLite's oldest bound-parameter limit (999)


class ChunkVectors:
    """Unit-length float32 vectors keyed by chunk_id for ONE model, in a SQLite file (or in memory).

    >>> with ChunkVectors(None, model_id="m") as vectors:
    ...     vectors.add(["a", "b"], [[3.0, 4.0], [0.0, 2.0]])
    ...     rows, present = vectors.get(["a", "c"])
    ...     vectors.missing(["a", "c", "b"]), rows.astype(float).round(3).tolist(), present.tolist()
    (['c'], [[0.6, 0.8], [0.0, 0.0]], [True, False])
    """

    def __init__(self, path: str | Path | None, *, model_id: str, dim: int | None = None) -> None:
        if not isinstance(model_id, str) or not model_id:
            raise ValueError(f"model_id must be a non-empty string, got {model_id!r}")
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
            raise ValueError(f"dim must be a positive integer or None, got {dim!r}")
        self.path = ":memory:" if path is None or str(path) == ":memory:" else str(path)
        self.model_id = model_id
        self.dim: int | None = dim
        if self.path != ":memory:":
            file = Path(self.path)
            if file.is_dir():
                raise ValueError(f"{self.path} is a directory, not a chunk vectors file")
            file.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA busy_timeout=10000")
            self._open_schema()
        except sqlite3.OperationalError as exc:  # locked, read-only, …: say what SQLite said
            self._conn.close()
            raise ValueError(f"cannot open chunk vectors file {self.path}: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise ValueError(f"{self.path} is not a SQLite database: {exc}") from exc
        except BaseException:
            self._conn.close()
            raise

    @classmethod
    def beside(cls, store: ChunkStoreProtocol, *, model_id: str, dim: int | None = None, tag: str = "") -> ChunkVectors:
        """The vectors of `store`: `<db_path><tag>.vectors.sqlite` (`tag`: an index text's,
        `index_text_tag`); in memory for a ":memory:" store."""
        db = str(store.db_path)
        return cls(None if db == ":memory:" else db + tag + VECTORS_SUFFIX, model_id=model_id, dim=dim)

    # -- writes -------------------------------------------------------------------------------
    def add(self, chunk_ids: Sequence[str], vectors: Any) -> None:
        """Store (or replace) the vector of each chunk_id, normalised to unit length, in one
        transaction. ValueError, and nothing written, on a wrong dimension, NaN or infinity."""
        ids = _check_ids(chunk_ids)
        matrix = as_matrix(vectors, dim=self.dim, what="vectors")
        if matrix.shape[0] != len(ids):
            raise ValueError(
                f"add got {len(ids)} chunk_ids but {matrix.shape[0]} vectors; "
                "pass one vector per id"
            )
        if not ids:
            return
        rows = unit_rows(matrix).astype("<f4", copy=False)
        dim = int(rows.shape[1])
        with self._lock, Transaction(self._conn):
            stored_dim = self._meta("dim")
            if stored_dim is not None and int(stored_dim) != dim:
                raise ValueError(f"vectors have dimension {dim}, expected {stored_dim}")
            if stored_dim is None:
                self._set_meta("dim", str(dim))
            version = self._bump_version()
            self._conn.executemany(
                f"INSERT INTO {_VECTORS} (chunk_id, version, vec) VALUES (?, ?, ?) "
                "ON CONFLICT (chunk_id) DO UPDATE "
                "SET version = excluded.version, vec = excluded.vec",
                [(cid, version, row.tobytes()) for cid, row in zip(ids, rows, strict=True)],
            )
            for part in _parts(list(dict.fromkeys(ids))):
                self._conn.execute(
                    f"DELETE FROM {_TOMBSTONES} WHERE chunk_id IN ({_marks(part)})", part
                )
        self.dim = dim

    def retain(self, keep_ids: Iterable[str]) -> int:
        """Delete every vector whose chunk_id is not in `keep_ids` (one transaction); return
        how many were deleted."""
        keep = set(keep_ids)
        with self._lock, Transaction(self._conn):
            stored = [row[0] for row in self._conn.execute(f"SELECT chunk_id FROM {_VECTORS}")]
            doomed = [cid for cid in stored if cid not in keep]
            if not doomed:
                return 0
            version = self._bump_version()
            for part in _parts(doomed):
                self._conn.execute(
                    f"DELETE FROM {_VECTORS} WHERE chunk_id IN ({_marks(part)})", part
                )
            self._conn.executemany(
                f"INSERT INTO {_TOMBSTONES} (chunk_id, version) VALUES (?, ?) "
                "ON CONFLICT (chunk_id) DO UPDATE SET version = excluded.version",
                [(cid, version) for cid in doomed],
            )
        return len(doomed)

    # -- reads --------------------------------------------------------------------------------
    def missing(self, chunk_ids: Sequence[str]) -> list[str]:
        """The ids in `chunk_ids` without a vector, in the given order (duplicates kept)."""
        ids = _check_ids(chunk_ids)
        present: set[str] = set()
        with self._lock, _Snapshot(self._conn):
            for part in _parts(list(dict.fromkeys(ids))):
                present.update(
                    row[0]
                    for row in self._conn.execute(
                        f"SELECT chunk_id FROM {_VECTORS} WHERE chunk_id IN ({_marks(part)})", part
                    )
                )
        return [cid for cid in ids if cid not in present]

    def get(self, chunk_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(rows, present): a (len(chunk_ids), dim) float32 matrix, all-zero where an id has no
        vector, and a bool mask of the ids that have one."""
        ids = _check_ids(chunk_ids)
        found: dict[str, bytes] = {}
        with self._lock, _Snapshot(self._conn):
            self._refresh_dim()
            for part in _parts(list(dict.fromkeys(ids))):
                found.update(
                    self._conn.execute(
                        f"SELECT chunk_id, vec FROM {_VECTORS} WHERE chunk_id IN ({_marks(part)})",
                        part,
                    ).fetchall()
                )
        rows = np.zeros((len(ids), self.dim or 0), dtype=np.float32)
        mask = np.zeros(len(ids), dtype=bool)
        for i, cid in enumerate(ids):
            blob = found.get(cid)
            if blob is not None:
                rows[i] = np.frombuffer(blob, dtype="<f4")
                mask[i] = True
        return rows, mask

    def load_all(self) -> tuple[list[str], np.ndarray]:
        """Every (chunk_id, vector): ids sorted ascending and a (count, dim) float32 matrix."""
        with self._lock, _Snapshot(self._conn):
            self._refresh_dim()
            rows = self._conn.execute(
                f"SELECT chunk_id, vec FROM {_VECTORS} ORDER BY chunk_id"
            ).fetchall()
        return [cid for cid, _ in rows], self._matrix([blob for _, blob in rows])

    def changed_since(self, version: int) -> tuple[int, list[str], list[str]]:
        """(current version, ids added or replaced after `version`, ids deleted after it), read
        in one snapshot; both lists sorted and disjoint. `version` is an earlier `version()`
        of this file (0 for "from the start")."""
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise ValueError(
                f"version must be a non-negative integer from version(), got {version!r}"
            )
        with self._lock, _Snapshot(self._conn):
            current = int(self._meta("version") or 0)
            if version > current:
                raise ValueError(
                    f"version {version} is newer than this vectors file ({current}); it came from "
                    "another file or one that was re-created: reload everything with load_all()"
                )
            added = [
                row[0]
                for row in self._conn.execute(
                    f"SELECT chunk_id FROM {_VECTORS} WHERE version > ? ORDER BY chunk_id",
                    (version,),
                )
            ]
            deleted = [
                row[0]
                for row in self._conn.execute(
                    f"SELECT chunk_id FROM {_TOMBSTONES} WHERE version > ? ORDER BY chunk_id",
                    (version,),
                )
            ]
        return current, added, deleted

    def version(self) -> int:
        """A counter that grows with every write that changes the stored vectors."""
        with self._lock:
            return int(self._meta("version") or 0)

    def count(self) -> int:
        """How many vectors are stored."""
        with self._lock:
            (n,) = self._conn.execute(f"SELECT COUNT(*) FROM {_VECTORS}").fetchone()
        return int(n)

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ChunkVectors({self.path!r}, model_id={self.model_id!r}, dim={self.dim})"

    # -- internals ----------------------------------------------------------------------------
    def _open_schema(self) -> None:
        """Create the tables, or check an existing file against (model_id, dim)."""
        with self._lock, Transaction(self._conn):
            tables = {
                row[0]
                for row in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            if _META not in tables and tables - {"sqlite_sequence"}:
                raise ValueError(
                    f"{self.path} is a SQLite database but not a chunk vectors file; "
                    "give a new path (the default is the chunk store's path + '.vectors.sqlite')"
                )
            self._conn.execute(
                f"CREATE TABLE IF NOT EXISTS {_META} (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )
            self._conn.execute(
                f"CREATE TABLE IF NOT EXISTS {_VECTORS} "
                "(chunk_id TEXT PRIMARY KEY, version INTEGER NOT NULL, vec BLOB NOT NULL)"
            )
            self._conn.execute(
                f"CREATE INDEX IF NOT EXISTS ix_{_VECTORS}_version ON {_VECTORS} (version)"
            )
            self._conn.execute(
                f"CREATE TABLE IF NOT EXISTS {_TOMBSTONES} "
                "(chunk_id TEXT PRIMARY KEY, version INTEGER NOT NULL)"
            )
            self._conn.execute(
                f"CREATE INDEX IF NOT EXISTS ix_{_TOMBSTONES}_version ON {_TOMBSTONES} (version)"
            )
            fmt = self._meta("format")
            if fmt is not None and fmt != _FORMAT:
                raise ValueError(
                    f"{self.path} has chunk vectors format {fmt!r}; this version of ragspine reads "
                    f"{_FORMAT!r}: re-embed into a new file"
                )
            stored_model, stored_dim = self._meta("model_id"), self._meta("dim")
            if stored_model is not None and stored_model != self.model_id:
                raise VectorModelMismatch(
                    f"the vectors in {self.path!r} were made by model {stored_model!r} "
                    f"(dim {stored_dim}), but the embedding backend in use is {self.model_id!r} "
                    f"(dim {self.dim}); vectors of different models cannot be compared. "
                    f"{self._reembed_hint()}"
                )
            if stored_dim is not None and self.dim is not None and int(stored_dim) != self.dim:
                raise VectorModelMismatch(
                    f"the vectors in {self.path!r} (model {stored_model!r}) have dimension "
                    f"{stored_dim}, but the embedding backend in use makes {self.dim}. "
                    f"{self._reembed_hint()}"
                )
            self._set_meta("format", _FORMAT)
            self._set_meta("model_id", self.model_id)
            if stored_dim is not None:
                self.dim = int(stored_dim)
            elif self.dim is not None:
                self._set_meta("dim", str(self.dim))
            self._conn.execute(
                f"INSERT OR IGNORE INTO {_META} (key, value) VALUES ('version', '0')"
            )

    def _reembed_hint(self) -> str:
        db = self.path[: -len(VECTORS_SUFFIX)] if self.path.endswith(VECTORS_SUFFIX) else "<db>"
        db = re.sub(r"\.ctx-[\w.-]+$", "", db)  # an index text's tag (`index_text_tag`) is not part of the store's path
        return f"Re-embed with `ragspine embed --db {db} --reembed`"

    def _meta(self, key: str) -> str | None:
        row = self._conn.execute(f"SELECT value FROM {_META} WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _set_meta(self, key: str, value: str) -> None:
        self._conn.execute(
            f"INSERT INTO {_META} (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def _refresh_dim(self) -> None:
        """Adopt the dim another connection fixed after this one opened the file."""
        if self.dim is None:
            stored = self._meta("dim")
            self.dim = None if stored is None else int(stored)

    def _bump_version(self) -> int:
        version = int(self._meta("version") or 0) + 1
        self._set_meta("version", str(version))
        return version

    def _matrix(self, blobs: list[bytes]) -> np.ndarray:
        dim = self.dim or 0
        if not blobs:
            return np.zeros((0, dim), dtype=np.float32)
        flat = np.frombuffer(b"".join(blobs), dtype="<f4")
        return flat.reshape(len(blobs), -1).astype(np.float32, copy=True)


@dataclass(frozen=True)
class EmbedReport:
    """What one `embed_chunks` run did."""

    embedded: int  # vectors computed now
    present: int  # active chunks that already had a vector (skipped: never recomputed)
    lexical_only: int  # RESTRICTED chunks not sent to a remote backend
    removed: int  # vectors of chunks no longer active, deleted
    seconds: float


def embed_chunks(
    store: ChunkStoreProtocol,
    vectors: ChunkVectors,
    backend: Any,
    *,
    batch_size: int = 64,
    progress: bool | None = None,
    prune: bool = True,
    index_text: IndexTextFn | None = None,
) -> EmbedReport:
    """Embed every active chunk of `store` that has no vector yet, in batches; each batch is
    committed before the next starts, so an interrupted run resumes without redoing finished
    batches.

    Chunks are embedded shortest text first (less padding for transformer backends). A RESTRICTED
    chunk is never sent to a remote backend (counted in `lexical_only`). `prune` deletes the
    vectors of chunks that are no longer active. `progress`: a bar on stderr; None shows it on
    a terminal only. Backend errors propagate; the batches done so far stay committed.
    `index_text`: what is embedded for a chunk (Contextual Retrieval); None: its text.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    started = time.perf_counter()
    model_id = model_id_of(backend)
    if model_id != vectors.model_id:
        raise VectorModelMismatch(
            f"the vectors in {vectors.path!r} are for model {vectors.model_id!r} (dim "
            f"{vectors.dim}), but the embedding backend is {model_id!r} (dim "
            f"{getattr(backend, 'dim', None)}); open them with the backend's model_id. "
            f"{vectors._reembed_hint()}"
        )
    backend_dim = getattr(backend, "dim", None)
    if isinstance(backend_dim, int) and vectors.dim is not None and backend_dim != vectors.dim:
        raise VectorModelMismatch(
            f"the vectors in {vectors.path!r} (model {vectors.model_id!r}) have dimension "
            f"{vectors.dim}, but the embedding backend makes {backend_dim}. "
            f"{vectors._reembed_hint()}"
        )
    active: dict[str, StoredChunk] = {c.chunk_id: c for c in store.iter_chunks()}
    removed = vectors.retain(active) if prune else 0
    todo = [active[cid] for cid in vectors.missing(list(active))]
    present = len(active) - len(todo)
    sendable = [c for c in todo if can_embed(backend, c.sensitivity)]
    lexical_only = len(todo) - len(sendable)
    sendable.sort(key=lambda c: len(c.text))  # stable: equal lengths keep store order
    embedded = 0
    hide = None if progress is None else not progress  # None: tqdm shows it on a terminal only
    with tqdm(total=len(sendable), desc="embed", unit="chunk", disable=hide) as bar:
        for start in range(0, len(sendable), batch_size):
            batch = sendable[start : start + batch_size]
            texts = [indexed_text(c, index_text) for c in batch]
            result = backend.embed_texts(texts)
            if len(result) != len(texts):
                raise EmbeddingBackendError(
                    f"{type(backend).__name__} returned {len(result)} vectors "
                    f"for {len(texts)} texts"
                )
            vectors.add([c.chunk_id for c in batch], result)
            embedded += len(batch)
            bar.update(len(batch))
    return EmbedReport(
        embedded=embedded,
        present=present,
        lexical_only=lexical_only,
        removed=removed,
        seconds=time.perf_counter() - started,
    )


def _check_ids(chunk_ids: Sequence[str]) -> list[str]:
    if isinstance(chunk_ids, str):
        # ValueError, as backend_support.check_texts does for texts
        raise ValueError("chunk_ids must be a list of strings, not one string")
    ids = list(chunk_ids)
    for i, cid in enumerate(ids):
        if not isinstance(cid, str) or not cid:
            raise ValueError(f"chunk_ids[{i}] is {cid!r}; expected a non-empty string")
    return ids


def _parts(ids: list[str]) -> list[list[str]]:
    return [ids[i : i + _IN_BATCH] for i in range(0, len(ids), _IN_BATCH)]


def _marks(part: Sequence[str]) -> str:
    return ", ".join("?" for _ in part)

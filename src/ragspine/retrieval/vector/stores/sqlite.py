"""`ChunkVectors`: the SQLite vectors file beside a chunk store, a `ChunkVectorStore`.

It keeps one unit-length float32 vector per chunk_id, for ONE embedding model, in a SQLite file
beside the chunk store (`<db>.vectors.sqlite`) or in memory: the persisted `VectorStore` the dense
channel reads into a matrix for a SQLite store (`dense.local`), and the one `embed_chunks` fills.
It passes the `VectorStoreSuite` conformance suite like every other store here.

Invariants:
- A file records the `model_id` and `dim` it was made with; opening it with another model_id,
  or another (non-None) dim, raises `VectorModelMismatch`, whose message says how to re-embed.
  Vectors of different models are never mixed or compared.
- A chunk_id carries a digest of its text, so its text never changes: a stored vector is never
  recomputed (embedding only ever fills ids `missing` reports).
- Every record carries a 32-bit checksum of its bytes (`record_checksums`). A record that
  fails it, or has the wrong length, is never used: reads skip it (WARNING, `damaged_ids()`),
  the chunk is ranked by BM25 until `embed_chunks` (`ragspine embed`) repairs and re-embeds it.
  A file SQLite cannot read raises `VectorFilesDamaged`. A v1 file (no checksums) is upgraded
  in place on open.
- Every write (`upsert`, `add`, `delete`, `retain`) is one transaction (BEGIN IMMEDIATE … COMMIT, ROLLBACK on any
  error): a reader sees all of it or none of it, and a rejected input (wrong dimension, NaN or
  infinity) writes nothing. Rows are L2-normalised before they are stored.
- `version()` grows with every write that changes something. Each vector row records the
  version that wrote it and each deleted id leaves a tombstone with the version that deleted
  it (removed again if the id is re-added), so `changed_since(v)` tells an in-memory matrix
  exactly which ids to (re)load and which to drop.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.closing import Closeable
from ragspine.retrieval.filters import Filter, matches
from ragspine.retrieval.store.protocol import ChunkStoreProtocol
from ragspine.retrieval.store.sqlite import Snapshot as _Snapshot
from ragspine.retrieval.store.sqlite import Transaction, set_wal_mode
from ragspine.retrieval.vector.arrays import as_matrix, unit_rows, unit_vector
from ragspine.retrieval.vector.errors import VectorFilesDamaged, VectorModelMismatch
from ragspine.retrieval.vector.stores.inprocess import SCORE_DECIMALS, VectorMetadata, Vectors, check_query, check_upsert, rows_found, top_k

# the logger this store has always logged under (its home was `dense.chunk_vectors`): logging
# configured by name keeps working
log = logging.getLogger("ragspine.retrieval.vector.dense.chunk_vectors")
VECTORS_SUFFIX = ".vectors.sqlite"
_META = "chunk_vector_meta"
_VECTORS = "chunk_vector"
_TOMBSTONES = "chunk_vector_deleted"
_FORMAT = "ragspine-chunk-vectors-v2"
_FORMAT_V1 = "ragspine-chunk-vectors-v1"  # no checksums or metadata: upgraded in place on open
_IN_BATCH = 900  # ids per IN (...) query: below SQLite's oldest bound-parameter limit (999)


LOAD_PART = 8192  # records per read when loading every vector (bounds the transient copies)


def vectors_path(store: ChunkStoreProtocol, tag: str = "") -> str | None:
    """Where `ChunkVectors.beside` keeps `store`'s vectors: `<db_path><tag>.vectors.sqlite`; None
    for a ":memory:" store (in memory)."""
    db = str(store.db_path)
    return None if db == ":memory:" else db + tag + VECTORS_SUFFIX


def record_checksums(rows: np.ndarray) -> np.ndarray:
    """A 32-bit checksum per float32 row (int64 array): Σ word·w mod 2³², with w odd and
    different per column, so a flipped bit, a changed or zeroed word, or two swapped words change
    it. Vectorised: checking 100k records costs milliseconds, not a Python loop."""
    words = np.ascontiguousarray(rows, dtype="<f4").view("<u4")
    weights = (np.arange(words.shape[1], dtype=np.uint32) * np.uint32(2654435761) + np.uint32(1)) | np.uint32(1)
    sums = np.empty(len(words), dtype=np.int64)
    for start in range(0, len(words), 8192):  # uint32 arithmetic wraps: exactly mod 2³²
        part = words[start : start + 8192]
        sums[start : start + 8192] = (part * weights).sum(axis=1, dtype=np.uint32)
    return sums


class ChunkVectors(Closeable):
    """Unit-length float32 vectors keyed by chunk_id for ONE model, in a SQLite file (or in
    memory): the dense channel's persisted in-process `VectorStore` (also a `ChunkVectorStore`).

    Every record carries a checksum of its bytes; a record that fails it (or has the wrong
    length) is never used: reads skip it and log a WARNING, `damaged_ids()` lists it, and
    `repair()` deletes it so `embed_chunks` embeds that chunk again.

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
        self._damaged: set[str] = set()
        if self.path != ":memory:":
            file = Path(self.path)
            if file.is_dir():
                raise ValueError(f"{self.path} is a directory, not a chunk vectors file")
            file.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            set_wal_mode(self._conn)
            self._open_schema()
        except sqlite3.OperationalError as exc:  # locked, read-only, …: say what SQLite said
            self._conn.close()
            raise ValueError(f"cannot open chunk vectors file {self.path}: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise VectorFilesDamaged(
                f"{self.path} is not a readable chunk vectors file ({exc}); "
                f"{self._repair_hint()}"
            ) from exc
        except BaseException:
            self._conn.close()
            raise

    @classmethod
    def beside(cls, store: ChunkStoreProtocol, *, model_id: str, dim: int | None = None, tag: str = "") -> ChunkVectors:
        """The vectors of `store`: `<db_path><tag>.vectors.sqlite` (`tag`: an index text's,
        `index_text_tag`); in memory for a ":memory:" store."""
        return cls(vectors_path(store, tag), model_id=model_id, dim=dim)

    # -- writes (the VectorStore seam) ----------------------------------------------------------
    def upsert(self, ids: Sequence[str], vectors: Vectors, metadata: VectorMetadata = None) -> None:
        """Insert or replace one vector and its metadata (default {}) per id, in one transaction;
        ValueError, and nothing written, on a wrong dimension, NaN, infinity or a repeated id."""
        checked, matrix, metas = check_upsert(ids, vectors, metadata, dim=self.dim, what="vectors")
        self._write(checked, matrix, metas)

    def add(self, chunk_ids: Sequence[str], vectors: Any) -> None:
        """Store (or replace) the vector of each chunk_id, keeping any metadata it had."""
        ids = _check_ids(chunk_ids)
        matrix = as_matrix(vectors, dim=self.dim, what="vectors")
        if matrix.shape[0] != len(ids):
            raise ValueError(
                f"add got {len(ids)} chunk_ids but {matrix.shape[0]} vectors; "
                "pass one vector per id"
            )
        self._write(ids, matrix, None)

    def _write(self, ids: list[str], matrix: np.ndarray, metas: list[dict[str, Any]] | None) -> None:
        if not ids:
            return
        rows = unit_rows(matrix).astype("<f4", copy=False)
        dim = int(rows.shape[1])
        blobs = [row.tobytes() for row in rows]
        sums = record_checksums(rows).tolist()
        with self._lock, Transaction(self._conn):
            stored_dim = self._meta("dim")
            if stored_dim is not None and int(stored_dim) != dim:
                raise ValueError(f"vectors have dimension {dim}, expected {stored_dim}")
            if stored_dim is None:
                self._set_meta("dim", str(dim))
            version = self._bump_version()
            if metas is None:
                self._conn.executemany(
                    f"INSERT INTO {_VECTORS} (chunk_id, version, vec, crc) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (chunk_id) DO UPDATE SET version = excluded.version, "
                    "vec = excluded.vec, crc = excluded.crc",
                    [(cid, version, blob, crc) for cid, blob, crc in zip(ids, blobs, sums, strict=True)],
                )
            else:
                self._conn.executemany(
                    f"INSERT INTO {_VECTORS} (chunk_id, version, vec, crc, meta, doc_id) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (chunk_id) DO UPDATE SET "
                    "version = excluded.version, vec = excluded.vec, crc = excluded.crc, "
                    "meta = excluded.meta, doc_id = excluded.doc_id",
                    [
                        (cid, version, blob, crc, _dump(meta), _doc_of(meta))
                        for cid, blob, crc, meta in zip(ids, blobs, sums, metas, strict=True)
                    ],
                )
            for part in _parts(list(dict.fromkeys(ids))):
                self._conn.execute(
                    f"DELETE FROM {_TOMBSTONES} WHERE chunk_id IN ({_marks(part)})", part
                )
        self.dim = dim
        self._damaged.difference_update(ids)

    def delete(self, ids: Iterable[str]) -> int:
        """Delete these ids (unknown ids are ignored; one transaction); returns how many."""
        if isinstance(ids, str):
            raise ValueError("ids must be a list of strings, not one string")
        return self._delete(list(dict.fromkeys(ids)))

    def delete_doc(self, doc_id: str) -> int:
        """Delete every vector whose metadata "doc_id" equals `doc_id`; returns how many."""
        with self._lock:
            ids = [r[0] for r in self._conn.execute(f"SELECT chunk_id FROM {_VECTORS} WHERE doc_id = ?", (doc_id,))]
        return self._delete(ids)

    def retain(self, keep_ids: Iterable[str]) -> int:
        """Delete every vector whose chunk_id is not in `keep_ids` (one transaction); return
        how many were deleted."""
        keep = set(keep_ids)
        return self._delete([cid for cid in self.ids() if cid not in keep])

    def _delete(self, doomed: list[str]) -> int:
        if not doomed:
            return 0
        try:
            with self._lock, Transaction(self._conn):
                version = self._bump_version()
                deleted = 0
                for part in _parts(doomed):
                    deleted += self._conn.execute(
                        f"DELETE FROM {_VECTORS} WHERE chunk_id IN ({_marks(part)})", part
                    ).rowcount
                if not deleted:
                    raise _NothingChanged  # rolls the version bump back
                self._conn.executemany(
                    f"INSERT INTO {_TOMBSTONES} (chunk_id, version) VALUES (?, ?) "
                    "ON CONFLICT (chunk_id) DO UPDATE SET version = excluded.version",
                    [(cid, version) for cid in doomed],
                )
        except _NothingChanged:
            return 0
        self._damaged.difference_update(doomed)
        return deleted

    def repair(self) -> int:
        """Delete every record that fails its checksum or length check (one transaction), so
        the chunks they belonged to count as `missing` and are embedded again; returns how many."""
        with self._lock, _Snapshot(self._conn):
            self._refresh_dim()
            records = self._conn.execute(f"SELECT chunk_id, vec, crc FROM {_VECTORS}").fetchall()
        ok, _ = self._verified(records, log_damage=False)
        return self._delete([r[0] for r, good in zip(records, ok.tolist(), strict=True) if not good])

    # -- reads --------------------------------------------------------------------------------
    def query(
        self, vector: Sequence[float] | np.ndarray, *, k: int, where: Filter | Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """The `k` best (id, cosine) among intact vectors whose metadata matches `where` (an exact
        scan, ranked by `top_k` as every store ranks)."""
        typed = check_query(k, where)
        with self._lock, _Snapshot(self._conn):
            self._refresh_dim()
            query = unit_vector(vector, dim=self.dim)
            records = self._conn.execute(f"SELECT chunk_id, vec, crc, meta FROM {_VECTORS} ORDER BY chunk_id").fetchall()
        ok, matrix = self._verified(records)
        rows = np.fromiter(
            (i for i, (r, good) in enumerate(zip(records, ok.tolist(), strict=True))
             if good and (typed is None or matches(typed, json.loads(r[3])))),
            dtype=np.int64,
        )  # fmt: skip
        if not rows.size:
            return []
        scores = np.round((matrix[rows] @ query).astype(np.float64), SCORE_DECIMALS)
        return top_k(rows, scores, k, [r[0] for r in records])

    def ids(self) -> list[str]:
        """Every stored id, sorted."""
        with self._lock:
            return [r[0] for r in self._conn.execute(f"SELECT chunk_id FROM {_VECTORS} ORDER BY chunk_id")]

    def metadata(self, id_: str) -> dict[str, Any]:
        """The metadata stored with `id_` (KeyError when absent)."""
        with self._lock:
            row = self._conn.execute(f"SELECT meta FROM {_VECTORS} WHERE chunk_id = ?", (id_,)).fetchone()
        if row is None:
            raise KeyError(id_)
        meta: dict[str, Any] = json.loads(row[0])
        return meta

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
        intact vector, and a bool mask of the ids that have one."""
        ids = _check_ids(chunk_ids)
        found: dict[str, np.ndarray] = {}
        with self._lock, _Snapshot(self._conn):
            self._refresh_dim()
            for part in _parts(list(dict.fromkeys(ids))):
                records = self._conn.execute(
                    f"SELECT chunk_id, vec, crc FROM {_VECTORS} WHERE chunk_id IN ({_marks(part)})", part
                ).fetchall()
                ok, matrix = self._verified(records)
                found.update((r[0], row) for r, good, row in zip(records, ok.tolist(), matrix, strict=True) if good)
        return rows_found(ids, found, self.dim)

    def load_all(self) -> tuple[list[str], np.ndarray]:
        """Every intact (chunk_id, vector): ids sorted ascending and a (count, dim) float32 matrix."""
        ids, matrix, _ = self._load(None)
        return ids, matrix

    def load_all_with(self, key: str) -> tuple[list[str], np.ndarray, list[Any]]:
        """`load_all`, plus each record's metadata value under `key` (None where absent), read
        by SQLite (no per-record JSON parsing in Python)."""
        if not key.isidentifier():
            raise ValueError(f"metadata key must be an identifier, got {key!r}")
        return self._load(key)

    def _load(self, key: str | None) -> tuple[list[str], np.ndarray, list[Any]]:
        """Every intact record, read in parts of LOAD_PART rows straight into one (count, dim)
        matrix: the peak is that matrix plus one part, not the whole file held as bytes, joined
        and copied (three copies of the vectors at once)."""
        extra = ", json_extract(meta, ?)" if key is not None else ""
        ids: list[str] = []
        values: list[Any] = []
        with self._lock, _Snapshot(self._conn):
            self._refresh_dim()
            (count,) = self._conn.execute(f"SELECT COUNT(*) FROM {_VECTORS}").fetchone()
            matrix = np.zeros((count, self.dim or 0), dtype=np.float32)
            ok = np.zeros(count, dtype=bool)
            cursor = self._conn.execute(
                f"SELECT chunk_id, vec, crc{extra} FROM {_VECTORS} ORDER BY chunk_id", (f"$.{key}",) if key else ()
            )
            while part := cursor.fetchmany(LOAD_PART):
                start = len(ids)
                ok[start : start + len(part)], matrix[start : start + len(part)] = self._verified(part)
                ids.extend(r[0] for r in part)
                if key is not None:
                    values.extend(r[3] for r in part)
        if ok.all():
            return ids, matrix, values
        good = ok.tolist()
        kept = [v for v, g in zip(values, good, strict=True) if g] if key is not None else []
        return [i for i, g in zip(ids, good, strict=True) if g], matrix[ok], kept

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
            # sorted here, not by ORDER BY: with it SQLite walks the whole table in chunk_id
            # order (0.1-0.14 s at 100k records, on every attach) instead of the version index
            added = sorted(
                row[0]
                for row in self._conn.execute(
                    f"SELECT chunk_id FROM {_VECTORS} WHERE version > ?", (version,)
                )
            )
            deleted = sorted(
                row[0]
                for row in self._conn.execute(
                    f"SELECT chunk_id FROM {_TOMBSTONES} WHERE version > ?", (version,)
                )
            )
        return current, added, deleted

    def version(self) -> int:
        """A counter that grows with every write that changes the stored vectors."""
        with self._lock:
            return int(self._meta("version") or 0)

    def identity(self) -> tuple[str, int]:
        """(file_id, version), read together: `file_id` names this file (a new one for a file
        re-created under the same path), `version` is `version()`."""
        with self._lock, _Snapshot(self._conn):
            return str(self._meta("file_id") or ""), int(self._meta("version") or 0)

    def stamp(self) -> str:
        """The size and modification time of the file on disk ("" in memory), after a passive
        checkpoint (so a later checkpoint does not change them): a derived copy records it and,
        when it differs at open, reads the records again (each checked by its checksum) instead
        of trusting the copy. A write changes it; so does damage done to the file from outside."""
        if self.path == ":memory:":
            return ""
        with self._lock:
            try:
                self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            except sqlite3.DatabaseError:  # busy or damaged: the stamp then differs, never wrongly equal
                pass
            try:
                stat = Path(self.path).stat()
            except OSError:
                return ""
        return f"{stat.st_size}:{stat.st_mtime_ns}"

    def note_damaged(self, ids: Iterable[str]) -> None:
        """Remember ids found damaged by an earlier read of this file's records (a derived copy
        made then, read instead of the records): `damaged_ids()` reports them as a read would."""
        with self._lock:
            self._damaged.update(ids)

    def count(self) -> int:
        """How many vector records are stored (damaged ones included until `repair`)."""
        with self._lock:
            (n,) = self._conn.execute(f"SELECT COUNT(*) FROM {_VECTORS}").fetchone()
        return int(n)

    def damaged_ids(self) -> list[str]:
        """The ids whose record a read found damaged (skipped), sorted; `repair()` clears them."""
        with self._lock:
            return sorted(self._damaged)

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __len__(self) -> int:
        return self.count()

    def __repr__(self) -> str:
        return f"ChunkVectors({self.path!r}, model_id={self.model_id!r}, dim={self.dim})"

    # -- internals ----------------------------------------------------------------------------
    def _verified(self, records: list[Any], *, log_damage: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """(ok, matrix) for (chunk_id, vec, crc, …) records: ok[i] when record i has the right
        length and checksum; matrix row i its float32 vector (all zero when not ok). A failing
        record is remembered (`damaged_ids`) and, with `log_damage`, logged once."""
        dim = self.dim or 0
        n = len(records)
        blobs = [r[1] if isinstance(r[1], bytes) else b"" for r in records]
        ok = np.fromiter(map(len, blobs), dtype=np.int64, count=n) == 4 * dim if dim else np.zeros(n, dtype=bool)
        matrix = np.zeros((n, dim), dtype=np.float32)
        if n and ok.all():
            matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(n, dim).copy()
        elif ok.any():
            chosen = np.flatnonzero(ok).tolist()
            matrix[chosen] = np.frombuffer(b"".join([blobs[i] for i in chosen]), dtype="<f4").reshape(len(chosen), dim)
        stored = np.fromiter((r[2] if isinstance(r[2], int) else -1 for r in records), dtype=np.int64, count=n)
        ok &= record_checksums(matrix) == stored
        if not ok.all():
            for i in np.flatnonzero(~ok).tolist():
                chunk_id = records[i][0]
                if chunk_id not in self._damaged and log_damage:
                    log.warning(
                        "chunk vectors %s: the record of %s is damaged (checksum or length); it is "
                        "ranked by BM25 only until re-embedded. %s", self.path, chunk_id, self._repair_hint(),
                    )  # fmt: skip
                self._damaged.add(chunk_id)
            matrix[~ok] = 0.0
        return ok, matrix

    def _open_schema(self) -> None:
        """Create the tables, upgrade a v1 file, or check an existing file against (model_id, dim)."""
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
            fmt = self._meta("format")
            if fmt not in (None, _FORMAT, _FORMAT_V1):
                raise ValueError(
                    f"{self.path} has chunk vectors format {fmt!r}; this version of ragspine reads "
                    f"{_FORMAT!r}: re-embed into a new file"
                )
            self._conn.execute(
                f"CREATE TABLE IF NOT EXISTS {_VECTORS} (chunk_id TEXT PRIMARY KEY, "
                "version INTEGER NOT NULL, vec BLOB NOT NULL, crc INTEGER, "
                "meta TEXT NOT NULL DEFAULT '{}', doc_id TEXT)"
            )
            if fmt == _FORMAT_V1:
                self._upgrade_v1()
            self._conn.execute(
                f"CREATE INDEX IF NOT EXISTS ix_{_VECTORS}_version ON {_VECTORS} (version)"
            )
            self._conn.execute(f"CREATE INDEX IF NOT EXISTS ix_{_VECTORS}_doc ON {_VECTORS} (doc_id)")
            self._conn.execute(
                f"CREATE TABLE IF NOT EXISTS {_TOMBSTONES} "
                "(chunk_id TEXT PRIMARY KEY, version INTEGER NOT NULL)"
            )
            self._conn.execute(
                f"CREATE INDEX IF NOT EXISTS ix_{_TOMBSTONES}_version ON {_TOMBSTONES} (version)"
            )
            stored_model, stored_dim = self._meta("model_id"), self._meta("dim")
            if stored_model is not None and stored_model != self.model_id:
                from ragspine.retrieval.vector.embeddings.e5 import keep_vectors_hint

                raise VectorModelMismatch(
                    f"the vectors in {self.path!r} were made by model {stored_model!r} "
                    f"(dim {stored_dim}), but the embedding backend in use is {self.model_id!r} "
                    f"(dim {self.dim}); vectors of different models cannot be compared. "
                    f"{keep_vectors_hint(stored_model, self.model_id)}{self._reembed_hint()}"
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
            # names this file: a file re-created under the same path restarts `version` at 0,
            # so a derived copy (the dense channel's matrix cache) is keyed by both
            self._conn.execute(
                f"INSERT OR IGNORE INTO {_META} (key, value) VALUES ('file_id', ?)", (uuid.uuid4().hex,)
            )

    def _upgrade_v1(self) -> None:
        """Add the checksum and metadata columns to a v1 file (inside the open transaction); the
        existing records are checksummed as they are (a v1 file had nothing to check them by)."""
        columns = {row[1] for row in self._conn.execute(f"PRAGMA table_info({_VECTORS})")}
        for name, decl in (("crc", "INTEGER"), ("meta", "TEXT NOT NULL DEFAULT '{}'"), ("doc_id", "TEXT")):
            if name not in columns:
                self._conn.execute(f"ALTER TABLE {_VECTORS} ADD COLUMN {name} {decl}")
        rows = self._conn.execute(f"SELECT chunk_id, vec FROM {_VECTORS}").fetchall()
        dim = int(self._meta("dim") or 0)
        sized = [(cid, blob) for cid, blob in rows if dim and len(blob) == 4 * dim]  # others stay NULL: damaged
        if sized:
            sums = record_checksums(np.frombuffer(b"".join(b for _, b in sized), dtype="<f4").reshape(len(sized), dim))
            self._conn.executemany(
                f"UPDATE {_VECTORS} SET crc = ? WHERE chunk_id = ?",
                [(crc, cid) for (cid, _), crc in zip(sized, sums.tolist(), strict=True)],
            )
        log.info("chunk vectors %s: upgraded from %s to %s", self.path, _FORMAT_V1, _FORMAT)

    def _reembed_hint(self) -> str:
        return f"Re-embed with `ragspine embed --db {self._db()} --reembed`"

    def _repair_hint(self) -> str:
        return f"Run `ragspine embed --db {self._db()}` to re-embed the damaged records"

    def _db(self) -> str:
        db = self.path[: -len(VECTORS_SUFFIX)] if self.path.endswith(VECTORS_SUFFIX) else "<db>"
        return re.sub(r"\.ctx-[\w.-]+$", "", db)  # an index text's tag (`index_text_tag`) is not part of the store's path

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


def quarantine_if_damaged(path: str | Path) -> str | None:
    """Move a chunk vectors file SQLite cannot read (or whose pages fail `PRAGMA quick_check`)
    aside to `<path>.damaged-<UTC time>` (with its -wal/-shm files), so a fresh file can be
    embedded in its place; returns the new name, or None when the file is readable or absent."""
    file = Path(path)
    if not file.exists():
        return None
    problem: str | None = None
    conn = sqlite3.connect(str(file))
    try:
        rows = conn.execute("PRAGMA quick_check").fetchall()
        if [r[0] for r in rows] != ["ok"]:
            problem = "; ".join(str(r[0]) for r in rows[:3])
        else:
            conn.execute(f"SELECT COUNT(*) FROM {_META}").fetchone()
    except sqlite3.DatabaseError as exc:  # not a database, malformed pages, no meta table
        problem = str(exc)
    finally:
        conn.close()
    if problem is None:
        return None
    target = f"{file}.damaged-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    for suffix in ("", "-wal", "-shm"):
        part = Path(str(file) + suffix)
        if part.exists():
            part.rename(target + suffix)
    log.warning("chunk vectors %s are damaged (%s); moved aside to %s", file, problem, target)
    return target


class _NothingChanged(Exception):
    """Raised inside a write transaction that turned out to change nothing (rolls it back)."""


def _dump(meta: Mapping[str, Any]) -> str:
    return json.dumps(meta, ensure_ascii=False, sort_keys=True, allow_nan=False)


def _doc_of(meta: Mapping[str, Any]) -> str | None:
    doc = meta.get("doc_id")
    return doc if isinstance(doc, str) else None


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

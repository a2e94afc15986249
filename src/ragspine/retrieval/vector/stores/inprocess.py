"""The `VectorStore` seam and its embedded default, `InProcessVectorStore` (numpy, exact cosine).

Invariants (every implementation; `tests/vector/vector_store_suite.py` checks them):
- `query` ranks by cosine similarity, rounded to SCORE_DECIMALS, best first; equal scores break
  by ascending id. It returns at most `k` (id, score) pairs.
- `where` is the typed filter language (`ragspine.retrieval.filters`), evaluated with
  `filters.matches` on the metadata stored with each vector, so it means exactly what it means
  in the lexical channel; a missing field never matches. It narrows before ranking.
- RESTRICTED vectors are *not* removed here: the two exits (rerank, link) do that.
- `upsert` is idempotent: an id present is replaced (vector and metadata), never duplicated.
  `delete_doc(doc_id)` deletes every vector whose metadata "doc_id" equals it.
- Every vector of a store has one dimension, fixed by the first upsert (or the constructor); a
  vector of another dimension, or with NaN/infinity, is a ValueError that names both dimensions.

`InProcessVectorStore` keeps unit-length float32 rows in memory and persists them to a folder
(`vector_files`): `save(path)` atomically, `load(path, model_id=..., dim=...)` refusing vectors
made by another model or of another dimension, with an error that says how to re-embed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ragspine.retrieval.filters import Filter, matches, parse_filter
from ragspine.retrieval.lexical.index.scoring import best_k
from ragspine.retrieval.vector.stores.files import read_vectors, write_vectors
from ragspine.retrieval.vector.arrays import as_matrix, unit_rows, unit_vector

SCORE_DECIMALS = 6  # float32 dot products agree to ~1e-7: rounding makes equal vectors tie exactly
_SCALARS = (str, int, float, bool, type(None))
# What an upsert takes: one vector per id (lists or a matrix), and one metadata record per id
# (None: {} for each).
Vectors = Sequence[Sequence[float]] | np.ndarray
VectorMetadata = Sequence[Mapping[str, Any]] | None


@runtime_checkable
class VectorStore(Protocol):
    """Vectors keyed by id (a chunk id), each with filterable metadata; see the module invariants."""

    def upsert(self, ids: Sequence[str], vectors: Vectors, metadata: VectorMetadata = None) -> None: ...

    def query(
        self, vector: Sequence[float] | np.ndarray, *, k: int, where: Filter | Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]: ...

    def delete(self, ids: Iterable[str]) -> int: ...

    def delete_doc(self, doc_id: str) -> int: ...

    def count(self) -> int: ...


@runtime_checkable
class ChunkVectorStore(VectorStore, Protocol):
    """A `VectorStore` the dense channel can keep in step with a chunk store: it names the model
    and dimension of its vectors (None while unknown), lists its ids, says which ids it lacks and
    reads vectors back (`get`: a (len(ids), dim) float32 matrix, zero rows where absent, and the
    bool mask of the ids present). `ChunkVectors` (SQLite, beside the store), `PgVectorStore`,
    `QdrantVectorStore` and `InProcessVectorStore` are ones."""

    @property
    def model_id(self) -> str | None: ...

    @property
    def dim(self) -> int | None: ...

    def ids(self) -> list[str]: ...

    def missing(self, ids: Sequence[str]) -> list[str]: ...

    def get(self, ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]: ...

    def close(self) -> None: ...


def check_upsert(
    ids: Sequence[str], vectors: Vectors, metadata: VectorMetadata, *, dim: int | None, what: str
) -> tuple[list[str], np.ndarray, list[dict[str, Any]]]:
    """Validate an upsert for any VectorStore: (ids, float matrix, metadata records), one each."""
    checked = _check_ids(ids)
    matrix = as_matrix(vectors, dim=dim, what=what)
    if matrix.shape[0] != len(checked):
        raise ValueError(f"{len(checked)} ids but {matrix.shape[0]} vectors")
    metas = [{} for _ in checked] if metadata is None else [_check_meta(m) for m in metadata]
    if len(metas) != len(checked):
        raise ValueError(f"{len(checked)} ids but {len(metas)} metadata records")
    return checked, matrix, metas


def check_query(k: int, where: Filter | Mapping[str, Any] | None) -> Filter | None:
    """Validate a query's arguments for any VectorStore: the typed `where` (`parse_filter`);
    ValueError first when `k` is not a positive integer."""
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return parse_filter(where)


class StoreChecks:
    """What every VectorStore checks against its own dimension and model: an upsert
    (`check_upsert`) and a query vector (`unit_vector`), their errors naming the model."""

    dim: int | None
    model_id: str | None

    def _what(self, noun: str = "vectors") -> str:
        return f"{noun} for this store (model_id={self.model_id!r})" if self.model_id else noun

    def _check_upsert(
        self, ids: Sequence[str], vectors: Vectors, metadata: VectorMetadata
    ) -> tuple[list[str], np.ndarray, list[dict[str, Any]]]:
        return check_upsert(ids, vectors, metadata, dim=self.dim, what=self._what())

    def _query_vector(self, vector: Sequence[float] | np.ndarray) -> np.ndarray:
        """`vector` checked against the store's dimension, scaled to length 1."""
        return unit_vector(vector, dim=self.dim, what=self._what("query vector"))


class InProcessVectorStore(StoreChecks):
    """Exact cosine search over unit-length numpy rows held in memory. A query costs one
    matrix-vector product over the stored rows (plus a `matches` call per row when `where` is
    given); deletes are O(deleted), `delete_doc` finds its rows through a doc_id index.

    >>> store = InProcessVectorStore(model_id="demo")
    >>> store.upsert(["a:0", "b:0"], [[1.0, 0.0], [0.0, 1.0]], [{"doc_id": "a"}, {"doc_id": "b"}])
    >>> store.query([1.0, 0.1], k=1)
    [('a:0', 0.995037)]
    """

    def __init__(self, dim: int | None = None, *, model_id: str | None = None) -> None:
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
            raise ValueError(f"dim must be a positive integer, got {dim!r}")
        self.dim = dim
        self.model_id = model_id
        self._buf = np.zeros((0, dim or 0), dtype=np.float32)  # rows [0, count) are in use
        self._ids: list[str] = []  # row → id
        self._meta: list[dict[str, Any]] = []  # row → metadata
        self._row_of: dict[str, int] = {}  # id → row
        self._by_doc: dict[str, set[str]] = {}  # metadata doc_id → ids

    def upsert(self, ids: Sequence[str], vectors: Vectors, metadata: VectorMetadata = None) -> None:
        """Insert or replace one vector (and its metadata, default {}) per id."""
        ids, matrix, metas = self._check_upsert(ids, vectors, metadata)
        if not ids:
            return
        if self.dim is None:
            self.dim = int(matrix.shape[1])
            self._buf = np.zeros((0, self.dim), dtype=np.float32)
        new_ids = [i for i in ids if i not in self._row_of]
        self._reserve(len(self._ids) + len(new_ids))
        for id_ in new_ids:
            self._row_of[id_] = len(self._ids)
            self._ids.append(id_)
            self._meta.append({})
        rows = [self._row_of[i] for i in ids]
        self._buf[rows] = unit_rows(matrix)
        for row, meta in zip(rows, metas, strict=True):
            self._unindex(row)
            self._meta[row] = meta
            doc = meta.get("doc_id")
            if isinstance(doc, str):
                self._by_doc.setdefault(doc, set()).add(self._ids[row])

    def query(
        self, vector: Sequence[float] | np.ndarray, *, k: int, where: Filter | Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """The `k` best (id, cosine) among vectors whose metadata matches `where`."""
        typed = check_query(k, where)
        query = self._query_vector(vector)
        if not self._ids:
            return []
        matrix = self._buf[: len(self._ids)]
        if typed is None:
            rows = np.arange(len(self._ids))
            raw = matrix @ query
        else:
            rows = np.fromiter((i for i, m in enumerate(self._meta) if matches(typed, m)), dtype=np.int64)
            if rows.size == 0:
                return []
            raw = matrix[rows] @ query
        scores = np.round(raw.astype(np.float64), SCORE_DECIMALS)
        return top_k(rows, scores, k, self._ids)

    def delete(self, ids: Iterable[str]) -> int:
        """Delete these ids (unknown ids are ignored); returns how many were deleted."""
        if isinstance(ids, str):
            raise ValueError("ids must be a list of strings, not one string")
        doomed = {self._row_of[i] for i in set(ids) if i in self._row_of}
        self._drop(doomed)
        return len(doomed)

    def delete_doc(self, doc_id: str) -> int:
        """Delete every vector whose metadata "doc_id" equals `doc_id`; returns how many."""
        return self.delete(sorted(self._by_doc.get(doc_id, ())))

    def count(self) -> int:
        return len(self._ids)

    def ids(self) -> list[str]:
        """Every stored id, sorted."""
        return sorted(self._ids)

    def missing(self, ids: Sequence[str]) -> list[str]:
        """The ids in `ids` without a vector, in the given order."""
        return [i for i in ids if i not in self._row_of]

    def get(self, ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(rows, present) as `ChunkVectorStore.get` describes."""
        present = np.fromiter((i in self._row_of for i in ids), dtype=bool, count=len(ids))
        rows = np.zeros((len(ids), self.dim or 0), dtype=np.float32)
        if present.any():
            rows[present] = self._buf[[self._row_of[i] for i, ok in zip(ids, present, strict=True) if ok]]
        return rows, present

    def close(self) -> None:
        """Nothing to release (memory only); present for the `ChunkVectorStore` seam."""

    def metadata(self, id_: str) -> dict[str, Any]:
        """A copy of the metadata stored with `id_` (KeyError when absent)."""
        return dict(self._meta[self._row_of[id_]])

    def vector(self, id_: str) -> list[float]:
        """The stored (unit-length) vector of `id_` (KeyError when absent)."""
        row: list[float] = self._buf[self._row_of[id_]].tolist()
        return row

    def save(self, path: str | Path) -> None:
        """Write the store to the folder `path`, replacing what was there atomically; rows are
        written in id order, so the same content gives the same files."""
        order = sorted(range(len(self._ids)), key=self._ids.__getitem__)
        write_vectors(
            Path(path), self._buf[order].reshape(len(order), self.dim or 0),
            [self._ids[r] for r in order], [self._meta[r] for r in order],
            model_id=self.model_id, dim=self.dim,
        )  # fmt: skip

    @classmethod
    def load(
        cls, path: str | Path, *, model_id: str | None = None, dim: int | None = None
    ) -> InProcessVectorStore:
        """The store saved in `path`. With `model_id` / `dim` (those of the backend in use), a
        store saved by another model or of another dimension raises VectorFilesMismatch,
        whose message says how to re-embed."""
        saved = read_vectors(Path(path), model_id=model_id, dim=dim)
        store = cls(saved.dim, model_id=saved.model_id)
        if saved.ids:
            store.upsert(saved.ids, saved.vectors, saved.metadata)
        return store

    def __len__(self) -> int:
        return len(self._ids)

    def __repr__(self) -> str:
        return f"InProcessVectorStore(count={len(self._ids)}, dim={self.dim}, model_id={self.model_id!r})"

    def _drop(self, rows: set[int]) -> None:
        """Delete rows by moving the last row into each hole: O(deleted), not O(count)."""
        for row in sorted(rows, reverse=True):
            self._unindex(row)
            del self._row_of[self._ids[row]]
            last = len(self._ids) - 1
            if row != last:
                self._buf[row] = self._buf[last]
                self._ids[row], self._meta[row] = self._ids[last], self._meta[last]
                self._row_of[self._ids[row]] = row
            self._ids.pop()
            self._meta.pop()

    def _unindex(self, row: int) -> None:
        doc = self._meta[row].get("doc_id")
        if isinstance(doc, str) and doc in self._by_doc:
            self._by_doc[doc].discard(self._ids[row])
            if not self._by_doc[doc]:
                del self._by_doc[doc]

    def _reserve(self, rows: int) -> None:
        if rows > self._buf.shape[0]:
            grown = np.zeros((max(rows, 2 * self._buf.shape[0], 16), self._buf.shape[1]), np.float32)
            grown[: len(self._ids)] = self._buf[: len(self._ids)]
            self._buf = grown


def rows_found(ids: Sequence[str], found: Mapping[str, Any], dim: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(rows, present) as `ChunkVectorStore.get` describes, from `found` (id → vector of each id
    a store holds): the one assembly every store's `get` ends with."""
    rows = np.zeros((len(ids), dim or 0), dtype=np.float32)
    present = np.zeros(len(ids), dtype=bool)
    for i, id_ in enumerate(ids):
        if id_ in found:
            rows[i], present[i] = found[id_], True
    return rows, present


def top_k(rows: np.ndarray, scores: np.ndarray, k: int, ids: Sequence[str]) -> list[tuple[str, float]]:
    """The `k` best (ids[row], score) by (-score, id). Every row tied with the k-th best is
    considered, so the cut never depends on the order of equal scores."""
    return [(ids[row], score) for row, score in top_k_rows(rows, scores, k, ids)]


def top_k_rows(rows: np.ndarray, scores: np.ndarray, k: int, ids: Any) -> list[tuple[int, float]]:
    """The `k` best (row, score) by (-score, ids[row]) (`best_k`, the one exact rank every vector
    store and the dense channel use). `ids` is anything indexable by a row that gives its id."""
    return best_k(rows, scores, k, lambda row: ids[row])


def _check_ids(ids: Sequence[str]) -> list[str]:
    if isinstance(ids, str):
        raise ValueError("ids must be a list of strings, not one string")
    out = list(ids)
    for id_ in out:
        if not isinstance(id_, str) or not id_:
            raise ValueError(f"every id must be a non-empty string, got {id_!r}")
    if len(set(out)) != len(out):
        raise ValueError("ids repeat within one upsert; give each id once")
    return out


def _check_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `meta`; its values must be JSON scalars or lists of them (they are persisted)."""
    if not isinstance(meta, Mapping):
        raise ValueError(f"metadata must be a mapping, got {type(meta).__name__}")
    out: dict[str, Any] = {}
    for key, value in meta.items():
        if not isinstance(key, str):
            raise ValueError(f"metadata keys must be strings, got {key!r}")
        if isinstance(value, (list, tuple)):
            if not all(isinstance(v, _SCALARS) for v in value):
                raise ValueError(f"metadata {key!r}: a list may hold only strings, numbers, booleans")
            value = list(value)
        elif not isinstance(value, _SCALARS):
            raise ValueError(f"metadata {key!r}: {type(value).__name__} is not a string or a number")
        if isinstance(value, float) and not np.isfinite(value):
            raise ValueError(f"metadata {key!r}: NaN or infinity cannot be stored")
        out[key] = value
    return out

"""`QdrantVectorStore`: the `VectorStore` seam over a Qdrant collection (server tier) [qdrant].

    store = QdrantVectorStore("chunks", url="http://qdrant:6333", model_id="onnx:minilm")
    # tests and single-process use: QdrantVectorStore("chunks", location=":memory:") or path=...

Invariants (beyond the `VectorStore` ones in `store.py`, which the conformance suite checks):
- Results are the in-process store's: the same ids in the same order, scores equal to float
  precision. Vectors are stored unit-length (zero rows stay zero) under DOT distance; `query`
  rescores the candidates Qdrant returns in Python (float32 dot products of the stored unit rows,
  rounded to SCORE_DECIMALS, as the in-process store computes them), breaks ties by ascending
  id, and widens the fetch until every candidate that could reach or tie the k-th score has been
  seen. Local mode (":memory:" / path=) scans exactly; against a server, pass exact=True for a
  full scan, else HNSW decides the candidates.
- `where` means `filters.matches`, always: every candidate's metadata is checked in Python.
  What can be pushed down is sent to Qdrant as a filter that never drops a matching point
  (`to_qdrant_filter`): eq/in on plain strings, numeric ranges on a numeric shadow field;
  everything else (periods, ne/nin, mixed kinds) is decided in Python alone, over-fetching.
- A string id maps to the point id uuid5(ID_NAMESPACE, id); the id and metadata are the payload
  {"id": ..., "meta": {...}, "num": {field: number}}; `num` holds each metadata value that
  `filters` reads as a number, so numeric ranges push down exactly.
- The collection's dim and model_id are recorded in a manifest collection "<name>__ragspine"
  (written before the data collection is created); opening with another model_id or dim raises
  VectorFilesMismatch, which says how to re-embed. A collection without a manifest is refused.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ragspine.closing import Closeable
from ragspine.retrieval.filters import (  # the private parsers: pushed-down filters must agree with matches
    And,
    Filter,
    Or,
    Predicate,
    _as_interval,
    _as_number,
    compares_as_text,
    matches,
)
from ragspine.retrieval.vector.embeddings.support import require
from ragspine.retrieval.vector.stores.inprocess import SCORE_DECIMALS, StoreChecks, VectorMetadata, Vectors, check_query, rows_found, top_k
from ragspine.retrieval.vector.stores.files import VectorFilesError, VectorFilesMismatch
from ragspine.retrieval.vector.arrays import batches, unit_rows

if TYPE_CHECKING:
    from qdrant_client import QdrantClient
    from qdrant_client.http import models as qm

    from ragspine.secret import Secret

ID_NAMESPACE = uuid.UUID("6f0c4a8e-3b7d-5c21-9a4e-2d8f1b6c7e90")  # fixed forever: point ids depend on it
MANIFEST_SUFFIX = "__ragspine"
FORMAT = "ragspine-qdrant"
FORMAT_VERSION = 1
UPSERT_BATCH = 256
_TOLERANCE = 1e-4  # Qdrant's float32 scores vs ours: far larger than their disagreement
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # field names safe inside a Qdrant key path
_SHADOW_LIMIT = 1e300  # numeric shadows are clamped to ±this (JSON has no infinity)


def point_id(id_: str) -> str:
    """The Qdrant point id of a chunk id: deterministic, the same in every process."""
    return str(uuid.uuid5(ID_NAMESPACE, id_))


class QdrantVectorStore(StoreChecks, Closeable):
    """Vectors in one Qdrant collection; see the module invariants.

    >>> store = QdrantVectorStore("demo", location=":memory:", model_id="demo")
    >>> store.upsert(["a:0", "b:0"], [[1.0, 0.0], [0.0, 1.0]], [{"doc_id": "a"}, {"doc_id": "b"}])
    >>> store.query([1.0, 0.1], k=1), store.query([1.0, 0.1], k=1, where={"doc_id": "b"})
    ([('a:0', 0.995037)], [('b:0', 0.099504)])
    >>> store.close()
    """

    def __init__(
        self,
        collection: str = "ragspine_chunks",
        dim: int | None = None,
        *,
        model_id: str | None = None,
        client: QdrantClient | None = None,
        url: str | None = None,
        location: str | None = None,
        path: str | None = None,
        api_key: str | Secret | None = None,
        timeout: int | None = None,
        exact: bool = False,
    ) -> None:
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
            raise ValueError(f"dim must be a positive integer, got {dim!r}")
        if not isinstance(collection, str) or not collection:
            raise ValueError(f"collection must be a non-empty string, got {collection!r}")
        self._qm: Any = require("qdrant_client", extra="qdrant", backend="QdrantVectorStore").models
        self.collection = collection
        self.exact = exact
        self._owns_client = client is None
        self._client = client if client is not None else _connect(url, location, path, api_key, timeout)
        self.dim, self.model_id = dim, model_id
        saved = self._read_manifest()
        if saved is not None:
            self._check_saved(saved, dim, model_id)
            self.dim = saved.get("dim")
            self.model_id = saved.get("model_id") if model_id is None else model_id
        elif self._client.collection_exists(collection):
            raise VectorFilesError(
                f"Qdrant collection {collection!r} exists but has no RAGSpine manifest "
                f"({collection + MANIFEST_SUFFIX!r}); it was not made by QdrantVectorStore. "
                "Name another collection, or drop that one"
            )
        if self.dim is not None:
            self._ensure_collection(self.dim, write_manifest=saved is None)

    def upsert(self, ids: Sequence[str], vectors: Vectors, metadata: VectorMetadata = None) -> None:
        """Insert or replace one vector (and its metadata, default {}) per id."""
        self._collection_ready()  # adopt a collection another process created meanwhile
        ids, matrix, metas = self._check_upsert(ids, vectors, metadata)
        if not ids:
            return
        if self.dim is None:
            self._ensure_collection(int(matrix.shape[1]), write_manifest=True)
        rows = unit_rows(matrix).tolist()
        points = [
            self._qm.PointStruct(id=point_id(i), vector=row, payload={"id": i, "meta": m, "num": _numbers(m)})
            for i, row, m in zip(ids, rows, metas, strict=True)
        ]
        for batch in batches(points, UPSERT_BATCH):
            self._client.upsert(self.collection, points=list(batch), wait=True)

    def query(
        self, vector: Sequence[float] | np.ndarray, *, k: int, where: Filter | Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """The `k` best (id, cosine) among vectors whose metadata matches `where`."""
        typed = check_query(k, where)
        ready = self._collection_ready()
        query = self._query_vector(vector)
        if not ready or (isinstance(typed, Or) and not typed.items):
            return []
        pushed = to_qdrant_filter(typed, self._qm)
        limit = max(2 * k, k + 16)
        while True:
            hits = self._search(query, pushed, limit)
            kept = [h for h in hits if typed is None or matches(typed, h.payload["meta"])]
            ids = [h.payload["id"] for h in kept]
            scores = _rescore(kept, query)
            best = top_k(np.arange(len(ids)), scores, k, ids)
            if len(hits) < limit or (len(best) == k and hits[-1].score < best[-1][1] - _TOLERANCE):
                return best
            limit *= 2

    def delete(self, ids: Iterable[str]) -> int:
        """Delete these ids (unknown ids are ignored); returns how many were deleted."""
        if isinstance(ids, str):
            raise ValueError("ids must be a list of strings, not one string")
        wanted = {point_id(i): i for i in set(ids)}
        if not wanted or not self._collection_ready():
            return 0
        found = self._client.retrieve(self.collection, ids=sorted(wanted), with_payload=["id"])
        doomed = [str(p.id) for p in found if p.payload and p.payload.get("id") == wanted.get(str(p.id))]
        self._delete_points(doomed)
        return len(doomed)

    def delete_doc(self, doc_id: str) -> int:
        """Delete every vector whose metadata "doc_id" equals `doc_id`; returns how many."""
        if not isinstance(doc_id, str) or not self._collection_ready():
            return 0
        qm = self._qm
        selector = qm.Filter(must=[qm.FieldCondition(key="meta.doc_id", match=qm.MatchValue(value=doc_id))])
        doomed, offset = [], None
        while True:
            page, offset = self._client.scroll(
                self.collection, scroll_filter=selector, limit=1024, offset=offset, with_payload=["meta"]
            )
            doomed += [str(p.id) for p in page if (p.payload or {}).get("meta", {}).get("doc_id") == doc_id]
            if offset is None:
                break
        self._delete_points(doomed)
        return len(doomed)

    def count(self) -> int:
        if not self._collection_ready():
            return 0
        return int(self._client.count(self.collection, exact=True).count)

    def ids(self) -> list[str]:
        """Every stored id, sorted."""
        if not self._collection_ready():
            return []
        found: list[str] = []
        offset = None
        while True:
            page, offset = self._client.scroll(self.collection, limit=1024, offset=offset, with_payload=["id"])
            found += [str((p.payload or {}).get("id")) for p in page]
            if offset is None:
                return sorted(found)

    def missing(self, ids: Sequence[str]) -> list[str]:
        """The ids in `ids` without a vector, in the given order."""
        present = set(self._retrieve(ids, vectors=False))
        return [i for i in ids if i not in present]

    def get(self, ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(rows, present): the stored unit vectors of `ids` (zero rows where absent) and the mask."""
        found = self._retrieve(ids, vectors=True)
        return rows_found(ids, found, self.dim)

    def _retrieve(self, ids: Sequence[str], *, vectors: bool) -> dict[str, Any]:
        """id → stored vector (None without `vectors`) of the given ids that exist."""
        wanted = {point_id(i): i for i in set(ids)}
        if not wanted or not self._collection_ready():
            return {}
        found: dict[str, Any] = {}
        for part in batches(sorted(wanted), UPSERT_BATCH):
            for p in self._client.retrieve(self.collection, ids=list(part), with_payload=["id"], with_vectors=vectors):
                id_ = (p.payload or {}).get("id")
                if isinstance(id_, str) and id_ == wanted.get(str(p.id)):
                    found[id_] = p.vector if vectors else None
        return found

    def drop(self) -> None:
        """Delete the collection and its manifest (everything this store holds)."""
        for name in (self.collection, self.collection + MANIFEST_SUFFIX):
            if self._client.collection_exists(name):
                self._client.delete_collection(name)
        self.dim = None

    def close(self) -> None:
        """Close the client this store opened (a client passed in is left open)."""
        if self._owns_client:
            self._client.close()

    def __len__(self) -> int:
        return self.count()

    def __repr__(self) -> str:
        return (f"QdrantVectorStore(collection={self.collection!r}, dim={self.dim}, "
                f"model_id={self.model_id!r})")  # fmt: skip

    def _search(self, query: np.ndarray, pushed: qm.Filter | None, limit: int) -> list[Any]:
        response = self._client.query_points(
            self.collection, query=query.tolist(), query_filter=pushed, limit=limit, with_payload=True,
            with_vectors=True, search_params=self._qm.SearchParams(exact=self.exact),
        )  # fmt: skip
        return list(response.points)

    def _delete_points(self, points: list[str]) -> None:
        if points:
            selector = self._qm.PointIdsList(points=points)
            self._client.delete(self.collection, points_selector=selector, wait=True)

    def _collection_ready(self) -> bool:
        """Whether the data collection exists; reads the manifest while the dim is unknown."""
        if self.dim is None:
            saved = self._read_manifest()
            if saved is None:
                return False
            self._check_saved(saved, None, self.model_id)
            self.model_id = saved.get("model_id")
            self._ensure_collection(int(saved["dim"]), write_manifest=False)
        return True

    def _ensure_collection(self, dim: int, *, write_manifest: bool) -> None:
        """Write the manifest (when new), then create the data collection: a crash between leaves
        a manifest and no data collection, which the next open completes."""
        qm, manifest = self._qm, self.collection + MANIFEST_SUFFIX
        if write_manifest:
            self._create(manifest, 1)
            record = {"format": FORMAT, "version": FORMAT_VERSION, "model_id": self.model_id, "dim": dim,
                      "distance": "dot", "id_namespace": str(ID_NAMESPACE)}  # fmt: skip
            point = qm.PointStruct(id=1, vector=[1.0], payload=record)
            self._client.upsert(manifest, points=[point], wait=True)
        self._create(self.collection, dim)
        self.dim = dim

    def _create(self, name: str, size: int) -> None:
        """Create a DOT collection unless it exists (another process may create it meanwhile)."""
        if self._client.collection_exists(name):
            return
        params = self._qm.VectorParams(size=size, distance=self._qm.Distance.DOT)
        try:
            self._client.create_collection(name, vectors_config=params)
        except Exception:
            if not self._client.collection_exists(name):
                raise

    def _read_manifest(self) -> dict[str, Any] | None:
        manifest = self.collection + MANIFEST_SUFFIX
        if not self._client.collection_exists(manifest):
            return None
        found = self._client.retrieve(manifest, ids=[1], with_payload=True, with_vectors=False)
        if not found:
            return None  # created, but the record was never written: as if absent
        record = dict(found[0].payload or {})
        if record.get("format") != FORMAT or record.get("version") != FORMAT_VERSION:
            raise VectorFilesError(f"Qdrant collection {manifest!r} is not a RAGSpine manifest ({FORMAT} v1)")
        return record

    def _check_saved(self, saved: Mapping[str, Any], dim: int | None, model_id: str | None) -> None:
        where = f"Qdrant collection {self.collection!r}"
        fix = f"embed every chunk with the backend in use into a new collection (or drop {self.collection!r})"
        if model_id is not None and saved.get("model_id") != model_id:
            raise VectorFilesMismatch(
                f"the vectors in {where} were made by model {saved.get('model_id')!r}, but the embedding "
                f"backend in use is {model_id!r}; vectors of different models cannot be compared. "
                f"Re-embed: {fix}"
            )
        if dim is not None and saved.get("dim") != dim:
            raise VectorFilesMismatch(
                f"the vectors in {where} have dimension {saved.get('dim')}, but the embedding backend in use "
                f"makes {dim}; re-{fix}"
            )


def to_qdrant_filter(spec: Filter | None, models: Any) -> Any:
    """A Qdrant filter that keeps every point `matches(spec, meta)` keeps (and maybe more);
    None when nothing can be pushed down. The caller still applies `matches`."""
    condition = _condition(spec, models)
    if condition is None or isinstance(condition, models.Filter):
        return condition
    return models.Filter(must=[condition])


def _condition(spec: Filter | None, models: Any) -> Any:
    if spec is None:
        return None
    if isinstance(spec, And):
        parts = [c for c in (_condition(item, models) for item in spec.items) if c is not None]
        return models.Filter(must=parts) if parts else None
    if isinstance(spec, Or):
        parts = [_condition(item, models) for item in spec.items]
        if not parts or any(p is None for p in parts):
            return None  # a member that cannot be pushed down could match anything
        return models.Filter(should=parts)
    return _predicate(spec, models)


def _predicate(p: Predicate, models: Any) -> Any:
    if not _KEY.match(p.field):
        return None
    if p.op in ("eq", "in"):
        values = list(p.value) if p.op == "in" else [p.value]
        if not all(_plain(v) for v in values):
            return None  # numbers, periods and dates have several spellings: decided in Python
        match = models.MatchValue(value=values[0]) if len(values) == 1 else models.MatchAny(any=values)
        return models.FieldCondition(key=f"meta.{p.field}", match=match)
    if p.op in ("gt", "gte", "lt", "lte", "between"):
        bounds = list(p.value) if p.op == "between" else [p.value]
        if not all(_numeric_only(v) for v in bounds):
            return None  # a period bound compares in time order: decided in Python
        numbers = [_as_number(v) for v in bounds]
        limits = {"gte": numbers[0], "lte": numbers[1]} if p.op == "between" else {p.op: numbers[0]}
        return models.FieldCondition(key=f"num.{p.field}", range=models.Range(**limits))
    return None  # ne / nin: a missing field never matches, and lists compare as text


def _plain(value: Any) -> bool:
    """True when `matches` compares `value` by string equality alone against stored strings only:
    not a number, a period or a date, not blank, and not a spelling of a bool or a list."""
    return (
        compares_as_text(value) and bool(value.strip())
        and value not in ("True", "False") and not value.startswith("[")
    )  # fmt: skip


def _numeric_only(value: Any) -> bool:
    """True when a range bound compares only with numbers (it is not also a period, like 2024)."""
    number = _as_number(value)
    return number is not None and abs(number) < _SHADOW_LIMIT and _as_interval(value) is None


def _numbers(meta: Mapping[str, Any]) -> dict[str, float]:
    """The numeric shadow of a metadata record: each value `filters` reads as a number."""
    out = {}
    for key, value in meta.items():
        number = None if isinstance(value, list) else _as_number(value)
        if number is not None and _KEY.match(key):
            out[key] = math.copysign(min(abs(number), _SHADOW_LIMIT), number)  # "1e400" parses as inf
    return out


def _rescore(hits: Sequence[Any], query: np.ndarray) -> np.ndarray:
    if not hits:
        return np.zeros(0, dtype=np.float64)
    stored = np.asarray([h.vector for h in hits], dtype=np.float32)
    return np.round((stored @ query).astype(np.float64), SCORE_DECIMALS)


def _connect(
    url: str | None, location: str | None, path: str | None, api_key: Any, timeout: int | None
) -> Any:
    given = {name: value for name, value in (("url", url), ("location", location), ("path", path)) if value}
    if len(given) != 1:
        raise ValueError("QdrantVectorStore needs exactly one of url=, location= (':memory:') or path=, "
                         f"or a client=; got {', '.join(given) or 'none'}")  # fmt: skip
    qdrant_client = require("qdrant_client", extra="qdrant", backend="QdrantVectorStore")
    key = api_key.reveal() if hasattr(api_key, "reveal") else api_key
    options: dict[str, Any] = {"api_key": key} if key else {}
    if timeout is not None:
        options["timeout"] = timeout
    return qdrant_client.QdrantClient(**given, **options)

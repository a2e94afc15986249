"""HNSW candidates for the dense channel at scale: `AnnIndex` (faiss-cpu, the `ann` extra).

The dense channel ranks by exact cosine over every allowed vector. Above
`AnnConfig.min_vectors` vectors it asks this index for candidates instead and ranks only those,
exactly (`DenseView.rank`). Below the threshold no index exists and ranking is the exact scan.

Invariants:
- The index never decides a score: it proposes labels, and the channel re-scores the candidates
  from its float32 matrix and ranks them with `top_k_rows`, so every returned score is the exact
  cosine and ties break by chunk_id as in the exact scan. What ANN can change is only which
  vectors are found (recall), measured in docs/dense.md.
- A label is an index into `ids` (chunk ids, in the order they were added); labels are never
  reused or removed. A deleted chunk's label stays in the graph but its position is not allowed,
  so it is dropped like any filtered-out candidate; the channel rebuilds the index when dead
  labels pass `DEAD_SHARE` of it.
- Persisted as ONE file (`save`: written to a temporary name, then renamed), holding the faiss
  index, the ids and a header naming model_id, dim and the build parameters; `load` refuses
  (returns None, logged) a file made for another model, dimension or format, so a stale index is
  rebuilt, never used. Rows added after the last save are added again when the file is loaded.
- faiss is imported lazily; without it `AnnIndex` raises `MissingExtraError` naming the `ann` extra.
- `add` and `search` hold the index's lock (faiss does not allow a search during an add).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ragspine.extras import require

log = logging.getLogger(__name__)

ANN_SUFFIX = ".hnsw"  # beside the vectors file: `<db>.vectors.sqlite.hnsw`
_FORMAT = "ragspine-hnsw-v1"
DEFAULT_MIN_VECTORS = 50_000  # below this the exact scan costs a few milliseconds
DEAD_SHARE = 0.25  # rebuild when this share of the labels belong to no active chunk
_TRAIN_ROWS = 50_000  # rows the 8-bit quantiser's ranges are fitted on (evenly spaced)
_READ_BLOCK = 1 << 20  # bytes per read when a saved index is streamed from its archive


@dataclass(frozen=True)
class AnnConfig:
    """When and how the dense channel uses an HNSW index.

    min_vectors: the channel builds and uses the index once it holds at least this many vectors
    (None: never). m, ef_construction: the graph (HNSW M and build beam). ef_search: the search
    beam (at least the number of candidates asked). oversample: candidates asked per result the
    caller wants (they are re-ranked exactly). min_fraction: when a filter allows less than this
    share of the indexed vectors, the exact scan over the allowed ones is used instead (it is
    cheap then, and graph search would have to skip most of what it finds).
    """

    min_vectors: int | None = DEFAULT_MIN_VECTORS
    m: int = 16
    ef_construction: int = 80
    ef_search: int = 64
    oversample: int = 2
    min_fraction: float = 0.05

    def __post_init__(self) -> None:
        if self.min_vectors is not None and (isinstance(self.min_vectors, bool) or self.min_vectors < 0):
            raise ValueError(f"min_vectors must be a non-negative integer or None, got {self.min_vectors!r}")
        for name in ("m", "ef_construction", "ef_search", "oversample"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not 0.0 <= self.min_fraction <= 1.0:
            raise ValueError(f"min_fraction must be within [0, 1], got {self.min_fraction!r}")

    def applies(self, count: int) -> bool:
        """Whether a channel holding `count` vectors should use the index."""
        return self.min_vectors is not None and count >= self.min_vectors

    def graph(self) -> dict[str, int]:
        """The parameters a persisted index must have been built with to be reused."""
        return {"m": self.m, "ef_construction": self.ef_construction}


def _faiss() -> ModuleType:
    return require("faiss", extra="ann", purpose="the dense channel's HNSW index (RAGSPINE_ANN_MIN_VECTORS)")


class AnnIndex:
    """An HNSW graph over 8-bit scalar-quantised copies of unit vectors (inner product), labelled
    by position in `ids`. The quantised copy is a quarter of float32's memory; the channel
    re-scores its candidates from the exact vectors.

    >>> import numpy as np
    >>> rows = np.eye(4, dtype=np.float32)
    >>> index = AnnIndex.build(["a", "b", "c", "d"], rows, model_id="m", config=AnnConfig(min_vectors=0))
    >>> [index.ids[label] for label in index.search(rows[2], 1).tolist()]
    ['c']
    """

    def __init__(self, index: Any, ids: list[str], *, model_id: str, dim: int, config: AnnConfig, saved: int = 0) -> None:
        self._index = index
        self.ids = ids
        self.model_id, self.dim, self.config = model_id, dim, config
        self.saved = saved  # labels held by the file on disk (0: never saved)
        self._lock = threading.Lock()

    @classmethod
    def build(cls, ids: list[str], matrix: np.ndarray, *, model_id: str, config: AnnConfig) -> AnnIndex:
        """A new index over `matrix` (unit float32 rows), label i = ids[i]."""
        faiss = _faiss()
        dim = int(matrix.shape[1])
        index = faiss.IndexHNSWSQ(dim, faiss.ScalarQuantizer.QT_8bit, config.m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = config.ef_construction
        # Unit vectors' coordinates lie in [-1, 1]: fitting ranges on a sample is enough, and a
        # later vector outside them is clipped (its exact score is recomputed anyway).
        step = max(1, len(matrix) // _TRAIN_ROWS)
        sample = np.ascontiguousarray(matrix[::step], dtype=np.float32)
        index.train(sample if len(sample) else np.zeros((1, dim), dtype=np.float32))
        built = cls(index, [], model_id=model_id, dim=dim, config=config)
        built.add(ids, matrix)
        return built

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, ids: list[str], matrix: np.ndarray) -> None:
        """Append `ids` with their vectors (labels len(self) … len(self)+len(ids)-1)."""
        if not ids:
            return
        if matrix.shape != (len(ids), self.dim):
            raise ValueError(f"add got {len(ids)} ids and vectors of shape {matrix.shape}; expected ({len(ids)}, {self.dim})")
        with self._lock:
            self._index.add(np.ascontiguousarray(matrix, dtype=np.float32))
            self.ids = self.ids + list(ids)  # a new list: a view holding the old one is unchanged

    def search(self, query: np.ndarray, k: int) -> np.ndarray:
        """Labels of up to `k` approximate nearest neighbours by inner product (int64, best
        first; fewer when the index holds fewer)."""
        faiss = _faiss()
        k = min(int(k), len(self))
        if k <= 0:
            return np.zeros(0, dtype=np.int64)
        params = faiss.SearchParametersHNSW()
        params.efSearch = max(self.config.ef_search, k)
        with self._lock:
            _, labels = self._index.search(np.ascontiguousarray(query[None, :], dtype=np.float32), k, params=params)
        found: np.ndarray = labels[0]
        return found[found >= 0]

    # -- persistence ---------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write the index, its ids and its header to `path` atomically (temporary file + rename)."""
        faiss = _faiss()
        with self._lock:
            blob = faiss.serialize_index(self._index)
            ids = list(self.ids)
        header = {"format": _FORMAT, "model_id": self.model_id, "dim": self.dim, "count": len(ids)} | self.config.graph()
        target = Path(path)
        temporary = target.with_name(f"{target.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        try:
            with zipfile.ZipFile(temporary, "w", compression=zipfile.ZIP_STORED) as archive:
                archive.writestr("header.json", json.dumps(header))
                archive.writestr("ids.txt", "\n".join(ids))
                archive.writestr("index.faiss", np.asarray(blob).tobytes())
            os.replace(temporary, target)
        finally:
            temporary.unlink(missing_ok=True)
        self.saved = len(ids)

    @classmethod
    def load(cls, path: str | Path, *, model_id: str, dim: int, config: AnnConfig) -> AnnIndex | None:
        """The index saved at `path`, or None (logged at INFO when the file exists) when there is
        none or it was made for another model, dimension, format or graph parameters, or cannot
        be read: the caller builds a new one."""
        file = Path(path)
        if not file.exists():
            return None
        faiss = _faiss()
        try:
            with zipfile.ZipFile(file) as archive:
                header = json.loads(archive.read("header.json"))
                expected = {"format": _FORMAT, "model_id": model_id, "dim": dim} | config.graph()
                stale = {k: header.get(k) for k, v in expected.items() if header.get(k) != v}
                if stale:
                    log.info("ANN index %s does not fit (%s): rebuilding it", file, stale)
                    return None
                text = archive.read("ids.txt").decode("utf-8")
                ids = text.split("\n") if text else []
                # streamed from the archive in 1 MiB reads: the file is never held whole
                # beside the index built from it (at 100k vectors: +53 MB peak, not +152 MB)
                with archive.open("index.faiss") as member:
                    index = faiss.read_index(faiss.PyCallbackIOReader(member.read, _READ_BLOCK))
        except (OSError, KeyError, ValueError, zipfile.BadZipFile, RuntimeError) as exc:
            log.warning("ANN index %s cannot be read (%s): rebuilding it", file, exc)
            return None
        if index.ntotal != len(ids) or index.d != dim:
            log.warning("ANN index %s is inconsistent (%d vectors, %d ids): rebuilding it", file, index.ntotal, len(ids))
            return None
        return cls(index, ids, model_id=model_id, dim=dim, config=config, saved=len(ids))


def ann_path(vectors_path: str) -> str | None:
    """Where the index of a vectors file lives; None for vectors in memory."""
    return None if vectors_path == ":memory:" else vectors_path + ANN_SUFFIX

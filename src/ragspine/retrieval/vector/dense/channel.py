"""`DenseChannel`: the cosine ranking of a lexical index's positions, from persisted chunk vectors.

The lexical index (`IndexSnapshot`) decides which positions exist, which are active and which a
filter allows; this channel only adds a vector row to each position, so both channels always
rank the same candidate set.

Invariants:
- A chunk's vector comes from `ChunkVectors` (keyed by chunk_id and model): it is computed once,
  at ingest or lazily, and never per query. Only the query is embedded: all of a query's
  variants in one backend call (`DenseView.embed_queries`), each distinct text once.
- Positions without a vector are embedded lazily when the snapshot changes, if there are at most
  `lazy_limit` of them (logged at INFO). More than that is an explicit fallback: those chunks are
  ranked by BM25 only until embedded; `coverage()` reports how many active positions have a
  vector, and the owner says so once (`NarrativeIndex.vectors_note`: in progress, or what to
  run). A store with no vectors file gets no channel at all from its `NarrativeIndex` until a
  write makes the file: a search never creates one.
- `view_over` (a retriever over a fixed list of chunks) instead embeds, per query, only the
  positions that query's filter allows and that have no vector yet, whatever their number;
  vectors are kept by chunk_id, so no chunk is embedded twice.
- A RESTRICTED chunk is never sent to a remote backend (`can_embed`): it stays lexical-only.
- `rank` returns positions by (-cosine rounded to SCORE_DECIMALS, chunk_id): exact cosine over
  every allowed position that has a vector. Once the channel holds `AnnConfig.min_vectors`
  vectors (RAGSPINE_ANN_MIN_VECTORS), an HNSW index (`ann.AnnIndex`, persisted beside the
  vectors file, kept up to date as vectors arrive) proposes candidates that are re-scored exactly
  and ranked the same way, so scores are exact and only recall can differ; a selective filter,
  a depth near the allowed count, or too few allowed candidates fall back to the exact scan.
  Below the threshold no index exists and the results are the exact scan's.
- Instant start (`matrix_cache`): from `cache_min_vectors` vectors on, a process's first load
  writes the matrix (`<vectors>.matrix`) and each attach the alignment and centring
  (`<vectors>.align`) beside the vectors file; a later process maps them instead of reading
  every record, only when they were made from this very file, model, dimension and version
  (or an earlier version with only additions since: those are read and added). Otherwise the
  records are read as without a cache. Rankings and scores are the same either way.
- Language centring: small multilingual encoders place texts of one language near each other
  whatever they say, so in a mixed corpus a Chinese question prefers any Chinese passage to the
  English passage that answers it. When at least two languages (`detect_language` on the chunk
  text) each hold >= MIN_LANGUAGE_SHARE of the vectors, every vector is compared after
  subtracting its language's mean passage vector (the query: the mean of its own language;
  Libovický et al. 2020, "On the language neutrality of pre-trained multilingual
  representations"), then re-normalised. The means are over the positions a caller may see
  (`IndexSnapshot.visible`: RESTRICTED chunks never shift another chunk's score). A corpus in one language is ranked by plain cosine
  (centring measured slightly worse there: CMRC2018 dev dense nDCG@10 0.9365 → 0.9316).

Structure: the channel chooses its strategy once, from the store it is given (`DenseVectors`):
`LocalVectors` (`local.py`: a `ChunkVectors` file or memory, read into a matrix; matrix cache,
ANN, language centring) or `StoreVectors` (`store_view.py`: pgvector, Qdrant, …, which rank for
it). Embedding what has no vector is `pending.py`'s, for every caller. The names the rest of the
package imports from here (`DenseView`, `StoreDenseView`, `lazy_batch`, `language_code`, …) are
re-exported from their modules.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ragspine.retrieval.chunking.protocol import IndexTextFn
from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot
from ragspine.retrieval.types import ChunkSource, EmbeddingBackend
from ragspine.retrieval.vector.dense import matrix_cache
from ragspine.retrieval.vector.dense.ann import AnnConfig, AnnIndex
from ragspine.retrieval.vector.dense.languages import (
    CACHE_MEANING,
    LANGUAGES,
    MIN_LANGUAGE_SHARE,
    MIN_LANGUAGE_VECTORS,
    crossed,
    language_centring,
    language_code,
    language_codes,
)
from ragspine.retrieval.vector.dense.local import LocalVectors
from ragspine.retrieval.vector.dense.pending import lazy_batch
from ragspine.retrieval.vector.dense.ranking import (
    DenseCoverage,
    DenseRanking,
    DenseVectors,
    recent_query_vector,
    unit_query_vectors,
)
from ragspine.retrieval.vector.dense.store_view import EXACT_IDS_MAX, VECTOR_CACHE_MAX, StoreDenseView, StoreVectors
from ragspine.retrieval.vector.dense.view import AnnCandidates, DenseView
from ragspine.retrieval.vector.errors import VectorModelMismatch
from ragspine.retrieval.vector.stores.inprocess import ChunkVectorStore
from ragspine.retrieval.vector.stores.sqlite import ChunkVectors

__all__ = [
    "CACHE_MEANING",
    "DEFAULT_LAZY_LIMIT",
    "EXACT_IDS_MAX",
    "LANGUAGES",
    "MIN_LANGUAGE_SHARE",
    "MIN_LANGUAGE_VECTORS",
    "VECTOR_CACHE_MAX",
    "AnnCandidates",
    "DenseChannel",
    "DenseCoverage",
    "DenseRanking",
    "DenseVectors",
    "DenseView",
    "StoreDenseView",
    "crossed",
    "language_code",
    "language_codes",
    "lazy_batch",
    "recent_query_vector",
    "unit_query_vectors",
    "vector_key",
]

DEFAULT_LAZY_LIMIT = 64  # chunks a query may embed on the spot (seconds with e5 on a CPU); more: logged fallback


def vector_key(backend: Any) -> str | None:
    """The backend's `model_id` (the key of its persisted vectors), or None when it has none."""
    model_id = getattr(backend, "model_id", None)
    return model_id if isinstance(model_id, str) and model_id else None




class DenseChannel:
    """Vectors aligned to an `IndexSnapshot`'s positions; exact cosine ranking.

    `vectors` is the `ChunkVectorStore` the vectors live in: `ChunkVectors` (the default; in
    memory when not given) is read into a matrix aligned to the positions and kept up to date
    from its change log; any other store (pgvector, Qdrant) is asked per query (`StoreDenseView`:
    the store ranks, this channel keeps the positions the query may see; plain cosine, no
    language centring).

    >>> from ragspine.retrieval.lexical.index.segment import SegmentBuilder
    >>> from ragspine.retrieval.chunking.chunking import Chunk
    >>> from ragspine.retrieval.pipeline.hybrid import ListChunks
    >>> from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend
    >>> chunks = [Chunk("a:0", "a", 0, "cat food", "a#p1@0-8"), Chunk("b:0", "b", 0, "dog", "b#p1@0-3")]
    >>> builder = SegmentBuilder(first=0); builder.add([["cat", "food"], ["dog"]], chunk_ids=["a:0", "b:0"])
    >>> snapshot = IndexSnapshot([builder.finish()])
    >>> channel = DenseChannel(DeterministicEmbeddingBackend(dim=16))
    >>> view = channel.attach(snapshot, ListChunks(chunks))
    >>> ranked, _ = view.rank(view.embed_query("cat food"), snapshot.active_positions(), 2)
    >>> [snapshot.chunk_id(p) for p in ranked]
    ['a:0', 'b:0']
    """

    def __init__(
        self,
        backend: EmbeddingBackend,
        vectors: ChunkVectorStore | None = None,
        *,
        lazy_limit: int = DEFAULT_LAZY_LIMIT,
        problem: str | None = None,
        index_text: IndexTextFn | None = None,
        ann: AnnConfig | None = None,
        cache_min_vectors: int | None = matrix_cache.DEFAULT_MIN_VECTORS,
    ) -> None:
        self.backend = backend
        self.index_text = index_text  # what a chunk's vector embeds (None: its text)
        self.ann_config = ann if ann is not None else AnnConfig()
        self.lazy_limit = lazy_limit
        key = vector_key(backend)
        if vectors is None:
            vectors = ChunkVectors(None, model_id=key or f"unnamed:{type(backend).__qualname__}")
        elif key is not None and vectors.model_id is not None and vectors.model_id != key:
            raise VectorModelMismatch(
                f"vectors of model {vectors.model_id!r} cannot serve backend model {key!r}; "
                "re-embed with the backend in use (`ragspine embed --reembed`)"
            )
        self.vectors: ChunkVectorStore = vectors
        self._lock = threading.Lock()
        # the one choice of strategy; the tunable module constants are read now
        self._strategy: DenseVectors
        if isinstance(vectors, ChunkVectors):
            self._strategy = LocalVectors(
                backend, vectors, problem=problem, index_text=index_text, ann=self.ann_config,
                cache_min_vectors=cache_min_vectors, cache_meaning=CACHE_MEANING, centring=self._centring,
            )  # fmt: skip
        else:
            self._strategy = StoreVectors(backend, vectors, index_text=index_text, exact_ids_max=EXACT_IDS_MAX)
            self._strategy.cache_min_vectors = cache_min_vectors

    # the language centring a local strategy computes (a seam: a test replaces it to prove that a
    # fresh matrix cache is used instead)
    _centring = staticmethod(language_centring)

    def attach(self, snapshot: IndexSnapshot, source: ChunkSource) -> DenseRanking:
        """Align to `snapshot`: load vectors written since the last call, embed what is missing
        (`lazy_batch`: within `lazy_limit`, decided by the chunks a caller may see), and map every
        position to its vector row. The returned view ranks
        that snapshot's positions and is not changed by later attaches."""
        with self._lock:
            return self._strategy.attach(snapshot, source, self.lazy_limit)

    def view_over(self, snapshot: IndexSnapshot, source: ChunkSource, allowed: np.ndarray) -> DenseRanking:
        """The lazy form of `attach`, for a retriever over a fixed list of chunks: embed only
        the `allowed` positions (one query's filter survivors) that have no vector yet, with
        no `lazy_limit`, and keep them (by chunk_id) for later queries. Language centring, when
        it applies, is computed over `allowed` (with no filter: every active position, as
        `attach` does)."""
        with self._lock:
            return self._strategy.view_over(snapshot, source, allowed)

    def coverage(self) -> DenseCoverage:
        """How many active positions of the last attached snapshot the channel can rank."""
        return self._strategy.coverage()

    @property
    def cache_stats(self) -> dict[str, int]:
        """Matrix-cache counters (loads, writes, records read); zeros over a vector store."""
        return self._strategy.cache_stats

    @property
    def ann_stats(self) -> dict[str, int]:
        """ANN-index counters (builds, loads, added, saves); zeros over a vector store."""
        return self._strategy.ann_stats

    @property
    def _ann(self) -> AnnIndex | None:
        """The HNSW index of a local channel (None below the threshold, or over a vector store)."""
        return self._strategy.ann.index if isinstance(self._strategy, LocalVectors) else None

    @property
    def cache_min_vectors(self) -> int | None:
        """At and above this many vectors, a vectors file gets a memory-mapped matrix cache
        beside it (`matrix_cache`; None: never). Settable."""
        return self._strategy.cache_min_vectors

    @cache_min_vectors.setter
    def cache_min_vectors(self, value: int | None) -> None:
        self._strategy.cache_min_vectors = value

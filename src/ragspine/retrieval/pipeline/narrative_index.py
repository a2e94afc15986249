"""NarrativeIndex: ingest documents into a ChunkStore and retrieve from its active chunks.

Invariants: `ingest` chunks the text and replaces the document's chunks in one store
transaction; retrieval always reflects the store's current active set at its current
data_version, including writes by other processes: the lexical index (`StoreIndex`, persisted
beside the store) catches up incrementally from the store's change log, or rebuilds when it
cannot; rerank only reorders, with RESTRICTED handled by `listwise_rerank`.

With an embedding backend, chunk vectors are computed at ingest (`embed_on_write`, the new
document's chunks) or in bulk by `embed_pending` (batched, resumable, with a progress bar), and
kept beside the store in `<db>.vectors.sqlite` keyed by chunk_id and model (`ChunkVectors`; in
memory for an in-memory or PostgreSQL store). A RESTRICTED chunk is never sent to a remote
backend. Retrieval never recomputes a stored vector; see `DenseChannel` for what happens to
chunks that have none.

With an `index_text` function (Contextual Retrieval, `make_index_text_fn`), BM25 indexes and the
dense channel embeds `index_text(chunk)`, never changing a chunk's `text`; its lexical index and
its vectors (`<db><tag>.vectors.sqlite`, `index_text_tag`) are kept apart from those of any other
index text, so changing it re-indexes and re-embeds instead of mixing the two.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ragspine.retrieval.chunking.chunking import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
)
from ragspine.retrieval.chunking.contextual import index_text_tag, indexed_text
from ragspine.retrieval.chunking.factory import ParagraphChunker
from ragspine.retrieval.chunking.protocol import Chunker, IndexTextFn
from ragspine.retrieval.filters import Filter
from ragspine.retrieval.fusion.rrf import DEFAULT_RRF_K, Fusion
from ragspine.retrieval.lexical.bm25 import DEFAULT_BM25_B, DEFAULT_BM25_K1
from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot
from ragspine.retrieval.lexical.index.store_index import StoreIndex
from ragspine.retrieval.lexical.tokenize import tokenize
from ragspine.retrieval.model import Chunk, DocumentMeta
from ragspine.retrieval.pipeline.hybrid import (
    DEFAULT_TOP_K,
    HybridRetriever,
    RetrievalResult,
)
from ragspine.retrieval.rerank.guard import rerank_head
from ragspine.retrieval.rerank.listwise_rerank import (
    DEFAULT_TOP_N,
    ListwiseJudge,
    listwise_rerank,
)
from ragspine.retrieval.rerank.protocol import Reranker
from ragspine.retrieval.store.protocol import ChunkStoreProtocol
from ragspine.retrieval.store.sqlite import ChunkStore  # noqa: F401 - the doctests use it
from ragspine.retrieval.types import EmbeddingBackend, QueryRewriter
from ragspine.retrieval.vector.arrays import as_matrix
from ragspine.retrieval.vector.dense.channel import DenseChannel, vector_key
from ragspine.retrieval.vector.dense.chunk_vectors import (
    ChunkVectors,
    EmbedReport,
    embed_chunks,
)
from ragspine.retrieval.vector.embeddings.support import can_embed

_ROW_CACHE_MAX = 20_000  # stored rows kept in memory per NarrativeIndex


class NarrativeIndex:
    """A retrievable, versioned collection of documents over one ChunkStore.

    >>> store = ChunkStore(":memory:"); store.init_schema()
    >>> index = NarrativeIndex(store)
    >>> index.ingest("营收下滑的原因是出口减少。", DocumentMeta("r1", entity="ACME_CN"))
    1
    >>> [r.chunk.doc_id for r in index.retrieve("营收", entity="ACME_CN")]
    ['r1']
    """

    def __init__(
        self,
        store: ChunkStoreProtocol,
        *,
        embedding_backend: EmbeddingBackend | None = None,
        query_rewriter: QueryRewriter | None = None,
        judge: ListwiseJudge | None = None,
        reranker: Reranker | None = None,
        chunker: Chunker | None = None,
        max_chars: int = DEFAULT_CHUNK_CHARS,
        overlap_chars: int = DEFAULT_OVERLAP_CHARS,
        k1: float = DEFAULT_BM25_K1,
        b: float = DEFAULT_BM25_B,
        rrf_k: int = DEFAULT_RRF_K,
        top_n: int = DEFAULT_TOP_N,
        analyzer: Callable[[str], list[str]] = tokenize,
        persist_index: bool = True,
        fusion: Fusion | None = None,
        channels: str = "hybrid",
        embed_on_write: bool = True,
        index_text: IndexTextFn | None = None,
    ) -> None:
        self.store = store
        self.index_text = index_text
        self.embedding_backend = embedding_backend
        self.query_rewriter = query_rewriter
        self.judge = judge
        self.reranker = reranker  # takes precedence over the judge (specification)
        self.chunker = chunker if chunker is not None else ParagraphChunker(max_chars, overlap_chars)
        self.max_chars, self.overlap_chars = max_chars, overlap_chars
        self.k1, self.b, self.top_n = k1, b, top_n
        self.fusion = fusion if fusion is not None else Fusion(k=rrf_k)
        self.rrf_k = self.fusion.k
        self.channels = channels
        self.embed_on_write = embed_on_write
        self.analyzer = analyzer
        self._lock = threading.Lock()
        self._retriever: HybridRetriever | None = None
        self._snapshot: IndexSnapshot | None = None
        self._row_cache: dict[int, Chunk] = {}
        self.dense: DenseChannel | None = None
        if embedding_backend is not None:
            key = vector_key(embedding_backend)
            vectors = (
                ChunkVectors.beside(
                    store, model_id=key, dim=getattr(embedding_backend, "dim", None), tag=index_text_tag(index_text)
                )
                if key is not None
                else None
            )  # a backend without a model_id gets in-memory vectors only
            self.dense = DenseChannel(embedding_backend, vectors, index_text=index_text)
        # The lexical index: files beside the store (`<db>.bm25/`) unless persist_index=False
        # or the store is in memory.
        self.lexical_index = StoreIndex(store, analyzer, persist=persist_index, index_text=index_text)

    def ingest(self, text: str, meta: DocumentMeta, valid_as_of: str = "") -> int:
        """Chunk `text` (with the index's chunker) and make it the active version of `meta.doc_id`; return chunks written."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        if not isinstance(meta.doc_id, str) or not meta.doc_id.strip():
            raise ValueError("DocumentMeta.doc_id must be a non-empty string")
        chunks = self.chunker.chunk(text, meta)
        return self.replace_chunks(meta.doc_id, chunks, valid_as_of=valid_as_of)

    def replace_chunks(self, doc_id: str, chunks: Sequence[Chunk], valid_as_of: str = "") -> int:
        """Make already-made chunks (e.g. with page locators) the active version of `doc_id`."""
        written = self.store.replace_doc_chunks(doc_id, chunks, valid_as_of=valid_as_of)
        if self.dense is not None and self.embed_on_write:
            self._embed(chunks)
        self._after_write()
        return written

    def _embed(self, chunks: Sequence[Chunk]) -> None:
        """Vectors for the chunks that have none (RESTRICTED ones stay lexical-only on a remote
        backend)."""
        assert self.dense is not None
        backend, vectors = self.dense.backend, self.dense.vectors
        todo = [c for c in chunks if can_embed(backend, c.sensitivity)]
        missing = set(vectors.missing([c.chunk_id for c in todo]))
        todo = [c for c in todo if c.chunk_id in missing]
        if todo:
            vectors.add([c.chunk_id for c in todo], as_matrix(backend.embed_texts([indexed_text(c, self.index_text) for c in todo])))

    def embed_pending(self, *, progress: bool | None = None, batch_size: int = 64) -> EmbedReport | None:
        """Embed every active chunk that has no vector yet (batched by length, each batch
        committed: an interrupted run resumes), and drop vectors of chunks no longer active.
        None when there is no embedding backend."""
        if self.dense is None:
            return None
        return embed_chunks(
            self.store, self.dense.vectors, self.dense.backend, batch_size=batch_size, progress=progress,
            index_text=self.index_text,
        )

    def withdraw(self, doc_id: str) -> None:
        """Remove a document from the active set (its rows stay, inactive, for lineage)."""
        self.store.replace_doc_chunks(doc_id, [])
        self._after_write()

    def close(self) -> None:
        """Close the chunk vectors file (the store stays the caller's to close)."""
        if self.dense is not None:
            self.dense.vectors.close()

    def refresh(self) -> None:
        """Bring the lexical index (and its files) up to date with the store now."""
        self.retriever()

    def _after_write(self) -> None:
        # An index already in use is updated at once (incrementally); one never used is
        # brought up to date by the first retrieval, in one catch-up or build.
        if self.lexical_index.loaded:
            self.retriever()

    def retrieve(
        self,
        query: str,
        *,
        topic: str | None = None,
        entity: str | None = None,
        geography: str | None = None,
        period: str | None = None,
        language: str | None = None,
        top_k: int = DEFAULT_TOP_K,
        rerank: bool = True,
        where: Filter | Mapping[str, Any] | None = None,
    ) -> list[RetrievalResult]:
        """Ranked active chunks for `query` (metadata filters and the typed `where` filter
        AND-ed, before scoring), reranked when a reranker (else a judge) is set: RESTRICTED
        candidates are never given to either (`rerank.guard`)."""
        results = self.retriever().search(
            query,
            topic=topic,
            entity=entity,
            geography=geography,
            period=period,
            language=language,
            top_k=top_k,
            where=where,
        )
        if rerank and self.reranker is not None:
            results = rerank_head(query, results, self.reranker.rerank, top_n=self.top_n,
                                  name=type(self.reranker).__name__)  # fmt: skip
        elif rerank and self.judge is not None:
            results = listwise_rerank(query, results, self.judge, top_n=self.top_n)
        return results

    def retriever(self) -> HybridRetriever:
        """The ranker over the store's current active chunks (its index brought up to date)."""
        with self._lock:
            snapshot = self.lexical_index.snapshot()
            if self._retriever is None or snapshot is not self._snapshot:
                self._retriever = HybridRetriever.over_snapshot(
                    snapshot,
                    StoreChunks(self.store, snapshot, self._row_cache),
                    embedding_backend=self.embedding_backend,
                    query_rewriter=self.query_rewriter,
                    k1=self.k1,
                    b=self.b,
                    analyzer=self.analyzer,
                    fusion=self.fusion,
                    channels=self.channels,
                    dense=self.dense,
                )
                self._snapshot = snapshot
            return self._retriever


class StoreChunks:
    """Resolves index positions to the store's rows by row id (a row's content never changes
    and its `active` flag only ever goes from 1 to 0, so rows read once are kept in a bounded
    cache shared by the snapshots of one NarrativeIndex)."""

    def __init__(
        self, store: ChunkStoreProtocol, snapshot: IndexSnapshot, cache: dict[int, Chunk] | None = None
    ) -> None:
        self.store = store
        self._row_ids = snapshot.row_ids()
        self._cache: dict[int, Chunk] = {} if cache is None else cache

    def chunks_at(self, positions: Sequence[int]) -> list[Chunk]:
        if not len(positions):
            return []
        row_ids = self._row_ids[list(positions)].tolist()
        cache = self._cache
        if len(cache) + len(row_ids) > _ROW_CACHE_MAX:
            cache.clear()
        # Answer from a local dict: another thread may clear the shared cache meanwhile.
        found = {r: c for r in row_ids if (c := cache.get(r)) is not None}
        missing = [r for r in row_ids if r not in found]
        if missing:
            for row_id, row in zip(missing, self.store.chunks_by_row_ids(missing), strict=True):
                if row is None:
                    raise RuntimeError("the chunk store lost rows its lexical index still holds")
                found[row_id] = cache[row_id] = row
        return [found[r] for r in row_ids]

"""NarrativeIndex: ingest documents into a ChunkStore and retrieve from its active chunks.

Invariants: `ingest` chunks the text and replaces the document's chunks in one store
transaction; retrieval always reflects the store's current active set at its current
data_version, including writes by other processes: the lexical index (`StoreIndex`, persisted
beside the store) catches up incrementally from the store's change log, or rebuilds when it
cannot; RESTRICTED chunks are masked out before scoring (`HybridRetriever`), and rerank only
reorders, with RESTRICTED handled by `rerank.guard` all the same (exit #1, defence in depth).

With an embedding backend, chunk vectors are computed at ingest (`embed_on_write`, the new
document's chunks) or in bulk by `embed_pending` (batched, resumable, with a progress bar), and
kept beside the store in `<db>.vectors.sqlite` keyed by chunk_id and model (`ChunkVectors`; in
memory for an in-memory or PostgreSQL store), or in the `ChunkVectorStore` given as `vectors`
(pgvector, Qdrant: RAGSPINE_VECTOR_STORE through the assembly). A RESTRICTED chunk is never sent to a remote
backend. Retrieval never recomputes a stored vector; see `DenseChannel` for what happens to
chunks that have none. A search never creates the vectors file: over a store that has none (a
BM25-only ingest) it ranks by BM25 alone, embeds nothing, and says so in its trace (the
`channels` step's `dense.note`) and, once per process and store state, in the log
(`vectors_note`); the file is made by the first write that embeds (`open_vectors`: an ingest
with `embed_on_write`, `embed_pending`), and a search opens it once it exists. While some
chunks lack a vector the note says "embedding in progress" when an embed run holds the marker
(`embed_marker`), else what fills the rest (`ragspine embed`).

With an `index_text` function (Contextual Retrieval, `make_index_text_fn`), BM25 indexes and the
dense channel embeds `index_text(chunk)`, never changing a chunk's `text`; its lexical index and
its vectors (`<db><tag>.vectors.sqlite`, `index_text_tag`) are kept apart from those of any other
index text, so changing it re-indexes and re-embeds instead of mixing the two.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Unpack

import numpy as np

from ragspine.retrieval.chunking.chunking import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
)
from ragspine.retrieval.chunking.contextual import index_text_tag
from ragspine.retrieval.chunking.factory import ParagraphChunker
from ragspine.retrieval.chunking.protocol import Chunker, IndexTextFn
from ragspine.retrieval.filters import Filter
from ragspine.retrieval.fusion.rrf import DEFAULT_RRF_K, Fusion
from ragspine.retrieval.lexical.bm25 import DEFAULT_BM25_B, DEFAULT_BM25_K1
from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot
from ragspine.retrieval.lexical.index.store_index import StoreIndex
from ragspine.retrieval.lexical.tokenize import tokenize
from ragspine.retrieval.model import Chunk, DocumentMeta, FieldFilters, field_filters
from ragspine.retrieval.pipeline.channels import Channel
from ragspine.retrieval.pipeline.feedback import Feedback
from ragspine.retrieval.pipeline.hybrid import (
    DEFAULT_TOP_K,
    HybridRetriever,
    RetrievalResult,
)
from ragspine.retrieval.pipeline.stages import RerankStep
from ragspine.retrieval.pipeline.trace import Trace
from ragspine.retrieval.rerank.guard import reranker_name
from ragspine.retrieval.rerank.listwise_rerank import DEFAULT_TOP_N, ListwiseJudge
from ragspine.retrieval.rerank.protocol import Reranker
from ragspine.retrieval.store.protocol import ChunkStoreProtocol
from ragspine.retrieval.store.sqlite import ChunkStore  # noqa: F401 - the doctests use it
from ragspine.retrieval.types import EmbeddingBackend, QueryRewriter
from ragspine.retrieval.vector.dense.ann import AnnConfig
from ragspine.retrieval.vector.dense.channel import DenseChannel, vector_key
from ragspine.retrieval.vector.dense.chunk_vectors import BatchEmbedder, ChunkVectors, EmbedReport, embed_chunks
from ragspine.retrieval.vector.stores.sqlite import vectors_path
from ragspine.retrieval.vector.dense.embed_marker import embedding_in_progress, embedding_run, vector_note
from ragspine.retrieval.vector.dense.pending import embed_missing
from ragspine.retrieval.vector.errors import VectorFilesDamaged, VectorStoreError
from ragspine.retrieval.vector.stores.inprocess import ChunkVectorStore

log = logging.getLogger(__name__)

_ROW_CACHE_MAX = 20_000  # stored rows kept in memory per NarrativeIndex
# per (vectors file, else store path; with RESTRICTED access), the vector state last logged by
# `_note_vectors`: once per process and state
_NOTED: dict[tuple[str, bool], str] = {}
_NOTED_LOCK = threading.Lock()
_MARKER_RECHECK_S = 1.0  # at most this stale: "embedding in progress" after a run stopped (or before one wrote)


@dataclass(frozen=True)
class VectorsNote:
    """What a search tells one kind of caller about the chunks it may see that have no vector
    (`NarrativeIndex.vectors_note`). state: "none" (no vectors file: a BM25-only store),
    "embedding" (a run holds `embed_marker`'s marker), else `text` (X of N; what fills the rest)."""

    with_vector: int
    active: int
    state: str
    text: str
    checked: float | None = None  # when the embed marker was asked (`time.monotonic`); None: not asked

    def stale(self) -> bool:
        """Whether the marker answer is older than `_MARKER_RECHECK_S` (asked again then)."""
        return self.checked is not None and time.monotonic() - self.checked > _MARKER_RECHECK_S


_UNSET = VectorsNote(0, 0, "", "")  # `_notes` has no entry for this state yet


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
        vectors: ChunkVectorStore | None = None,
        rerank_timeout: float | None = None,
        index_text: IndexTextFn | None = None,
        extra_channels: Sequence[Channel] = (),
        ann: AnnConfig | None = None,
        feedback: Feedback = Feedback(),
    ) -> None:
        self.store = store
        self.extra_channels = list(extra_channels)
        self.feedback = feedback  # pseudo-relevance feedback in the channels (`pipeline.feedback`)
        self.index_text = index_text
        self.embedding_backend = embedding_backend
        self.query_rewriter = query_rewriter
        self.judge = judge
        self.reranker = reranker  # takes precedence over the judge (specification)
        self.chunker = chunker if chunker is not None else ParagraphChunker(max_chars, overlap_chars)
        self.max_chars, self.overlap_chars = max_chars, overlap_chars
        self.k1, self.b, self.top_n = k1, b, top_n
        self.rerank_timeout = rerank_timeout  # seconds; past it the fused order stands
        self.fusion = fusion if fusion is not None else Fusion(k=rrf_k)
        self.rrf_k = self.fusion.k
        self.channels = channels
        self.embed_on_write = embed_on_write
        self.analyzer = analyzer
        self._lock = threading.Lock()
        self._snapshot: IndexSnapshot | None = None
        self._attached_vectors: int | None = None  # `_vectors_version` when the retrievers were made
        # per include_restricted, over _snapshot; each made on first use
        self._retrievers: dict[bool, HybridRetriever] = {}
        self._row_cache: dict[int, Chunk] = {}
        self.dense: DenseChannel | None = None
        self._absent: tuple[str, str, Any] | None = None  # (path, model_id, ann) until a write makes the file
        # per include_restricted, the note of the current attach state (`vectors_note`); the
        # generation moves whenever that state does, so a note worked out meanwhile is not kept
        self._notes: dict[bool, VectorsNote | None] = {}
        self._generation = 0
        path = vectors_path(store, index_text_tag(index_text))
        # whose state `_NOTED` keeps: the vectors file, or for a ":memory:" store (no file) this index
        self._note_key = path or f"{store.db_path}#{id(self)}"
        if embedding_backend is not None:
            key = vector_key(embedding_backend)
            if vectors is None and key is not None and path is not None and not os.path.exists(path):
                self._absent = (path, key, ann)  # BM25-only store: a search never creates the file
            else:
                self._open_dense(vectors, ann)
        # The lexical index: files beside the store (`<db>.bm25/`) unless persist_index=False
        # or the store is in memory.
        self.lexical_index = StoreIndex(store, analyzer, persist=persist_index, index_text=index_text)

    def _open_dense(self, vectors: ChunkVectorStore | None, ann: AnnConfig | None) -> DenseChannel:
        """Make the dense channel over `vectors` (None: the vectors file beside the store, made
        if absent; in memory for a backend without a model_id or an in-memory store)."""
        backend = self.embedding_backend
        assert backend is not None
        key, problem = vector_key(backend), None
        if vectors is None and key is not None:  # a backend without a model_id: in memory only
            try:
                vectors = ChunkVectors.beside(
                    self.store, model_id=key, dim=getattr(backend, "dim", None), tag=index_text_tag(self.index_text)
                )
            except VectorFilesDamaged as exc:  # search goes on: BM25 (and a few vectors in memory)
                log.warning("%s; searching without the stored vectors", exc)
                problem = f"vectors unreadable: {exc}"
                vectors = ChunkVectors(None, model_id=key)
        self._absent = None
        self.dense = DenseChannel(backend, vectors, problem=problem, index_text=self.index_text, ann=ann)
        return self.dense

    def open_vectors(self) -> DenseChannel | None:
        """The dense channel a write embeds into (None without a backend): the vectors file is made
        now if it was absent. A search never calls it, nor does RAPTOR's `build` (it refuses
        without vectors), so a BM25-only store stays so until an ingest or embed writes vectors."""
        if self.embedding_backend is None:
            return None
        if self._absent is not None:
            with self._lock:
                if self._absent is not None:
                    self._open_dense(None, self._absent[2])
                    self._forget()
        return self.dense

    def vector_lookup(self, chunk_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """The stored vectors of `chunk_ids` (`VectorLookup`: rows, present mask), resolved at
        each call: none present while the store has no vectors file open (a BM25-only store),
        the channel's once an embed made it. MMR's similarity; it never makes the file."""
        dense = self.dense
        if dense is None:
            return np.zeros((len(chunk_ids), 0), dtype=np.float32), np.zeros(len(chunk_ids), dtype=bool)
        return dense.vectors.get(chunk_ids)

    def _dense_if_present(self) -> None:
        """A search over a store whose vectors file was absent: open it once it exists (an embed
        run in another process made it); else the search stays BM25-only and writes nothing.
        Called under `_lock`."""
        if self._absent is not None and os.path.exists(self._absent[0]):
            self._open_dense(None, self._absent[2])
            self._forget()

    def _forget(self) -> None:
        """Drop the retrievers and notes of the current state (called under `_lock`)."""
        self._retrievers.clear()
        self._notes.clear()
        self._generation += 1

    def ingest(self, text: str, meta: DocumentMeta, valid_as_of: str = "") -> int:
        """Chunk `text` (with the index's chunker) and make it the active version of `meta.doc_id`; return chunks written.

        The specification's low-level chunk-and-replace primitive: no label reading, no
        registry row. Products ingest through `ragspine.ingest.pipeline.IngestPipeline` (the
        CLI, `Workspace`, HTTP, eval), whose store step calls this method or `replace_chunks`;
        this layer never imports `ragspine.ingest`."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        if not isinstance(meta.doc_id, str) or not meta.doc_id.strip():
            raise ValueError("DocumentMeta.doc_id must be a non-empty string")
        chunks = self.chunker.chunk(text, meta)
        return self.replace_chunks(meta.doc_id, chunks, valid_as_of=valid_as_of)

    def replace_chunks(self, doc_id: str, chunks: Sequence[Chunk], valid_as_of: str = "") -> int:
        """Make already-made chunks (e.g. with page locators) the active version of `doc_id`."""
        written = self.store.replace_doc_chunks(doc_id, chunks, valid_as_of=valid_as_of)
        if self.embed_on_write and self.open_vectors() is not None:
            self._embed(chunks)
        self._after_write()
        return written

    def _embed(self, chunks: Sequence[Chunk]) -> None:
        """Vectors for the chunks that have none (RESTRICTED ones stay lexical-only on a remote
        backend)."""
        assert self.dense is not None
        try:
            embed_missing(self.dense.vectors, self.dense.backend, chunks, index_text=self.index_text)
        except (sqlite3.DatabaseError, VectorStoreError) as exc:  # the chunks are written: BM25 has them
            log.warning("could not store the new chunks' vectors (%s); run `ragspine embed` to embed them", exc)

    def embed_pending(
        self, *, progress: bool | None = None, batch_size: int = 64, embed_batches: BatchEmbedder | None = None
    ) -> EmbedReport | None:
        """Embed every active chunk that has no vector yet (batched by length, each batch
        committed: an interrupted run resumes), and drop vectors of chunks no longer active;
        at or above the ANN threshold, bring the HNSW index up to date too. `embed_batches`: who
        embeds the batches (e.g. `ray_embed.RayBatchEmbedder`); None: this index's backend. None
        when there is no embedding backend."""
        dense = self.open_vectors()
        if dense is None:
            return None
        vectors = dense.vectors
        with embedding_run(vectors.path if isinstance(vectors, ChunkVectors) else None):
            report = embed_chunks(
                self.store, vectors, dense.backend, batch_size=batch_size, progress=progress,
                index_text=self.index_text, embed_batches=embed_batches,
            )
        if isinstance(vectors, ChunkVectors) and dense.ann_config.applies(vectors.count()):
            with self._lock:
                self._forget()
            self.retriever()  # reads the new vectors: the ANN index is built or updated (and saved) now, not by a search
        return report

    def withdraw(self, doc_id: str) -> None:
        """Remove a document from the active set (its rows stay, inactive, for lineage)."""
        self.store.replace_doc_chunks(doc_id, [])
        self._after_write()

    def close(self) -> None:
        """Close the chunk vectors file and the reranker's connection, if it has one (the store
        stays the caller's to close)."""
        if self.dense is not None:
            self.dense.vectors.close()
        close_reranker = getattr(self.reranker, "close", None)
        if callable(close_reranker):
            close_reranker()

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
        top_k: int = DEFAULT_TOP_K,
        rerank: bool = True,
        where: Filter | Mapping[str, Any] | None = None,
        include_restricted: bool = False,
        trace: dict[str, Any] | None = None,
        variants: Sequence[str] | None = None,
        **fields: Unpack[FieldFilters],
    ) -> list[RetrievalResult]:
        """Ranked active chunks for `query` (the metadata filters `topic`, `entity`, `geography`,
        `period`, `language` and the typed `where` filter AND-ed, before scoring), reranked when a reranker (else a judge) is set: the first
        max(top_k, top_n) fused results are ranked, their head reordered, the first top_k kept.
        RESTRICTED candidates are never given to either (`rerank.guard`). RESTRICTED chunks are
        not candidates at all unless `include_restricted=True` (an owner's diagnostic and what
        the exits are tested on; no caller-facing path passes it). `trace`, when given,
        receives the rerank step's lineage under "rerank". `variants`: the screened query
        texts to search (`query` first); None: the query rewriter's."""
        step = self.rerank_step() if rerank else None
        filters = field_filters(fields, caller="retrieve")
        results = self.rank(query, top_k=top_k if step is None else step.depth(top_k), filters=filters, where=where,
                            variants=variants, include_restricted=include_restricted)  # fmt: skip
        if step is not None:
            results, lineage = step.apply(query, results, top_k)
            if trace is not None:
                trace["rerank"] = lineage
        return results

    def rank(
        self,
        query: str,
        *,
        top_k: int = DEFAULT_TOP_K,
        filters: Mapping[str, str | None] | None = None,
        where: Filter | Mapping[str, Any] | None = None,
        variants: Sequence[str] | None = None,
        include_restricted: bool = False,
        trace: Trace | None = None,
    ) -> list[RetrievalResult]:
        """The channels and fusion stages over the current snapshot (no rerank): `HybridRetriever.search`
        with `filters` the exact matches on the five metadata fields."""
        retriever = self.retriever(include_restricted=include_restricted)
        results = retriever.search(query, top_k=top_k, where=where, variants=variants, trace=trace, **(filters or {}))
        self._note_vectors(include_restricted, trace)
        return results

    def vectors_note(self, include_restricted: bool = False) -> VectorsNote | None:
        """What a search tells a caller (with RESTRICTED access or not) about the chunks it may
        see that have no vector, ranked by BM25 only; None when every one has (or there is no
        embedding backend, or the vectors are in a vector store). Worked out once per attach
        state (`DenseCoverage.seen_by`: RESTRICTED chunks never change what a caller without
        access is told), so a search pays a dictionary lookup; the embed marker is asked only
        while some chunks lack a vector, at most once per `_MARKER_RECHECK_S`."""
        if self.embedding_backend is None:
            return None
        note = self._notes.get(include_restricted, _UNSET)
        if note is _UNSET or (note is not None and note.stale()):
            generation = self._generation
            note = self._work_out_note(include_restricted)
            with self._lock:
                if generation == self._generation:  # else the state moved meanwhile: worked out again next time
                    self._notes[include_restricted] = note
        return note

    def _work_out_note(self, include_restricted: bool) -> VectorsNote | None:
        dense = self.dense
        if dense is None:  # a BM25-only store: no vectors file, none made by a search
            with self._lock:  # counted from the snapshot: no retriever is made (nor its attach)
                snapshot = self.lexical_index.snapshot()
            shown = (snapshot if include_restricted else snapshot.visible()).active_counts()[1]
            return VectorsNote(0, shown, "none", vector_note(0, shown, in_progress=False))
        if not isinstance(dense.vectors, ChunkVectors):
            return None
        with_vector, active = dense.coverage().seen_by(include_restricted)
        if with_vector >= active:
            return None
        in_progress = embedding_in_progress(dense.vectors.path)
        text = vector_note(with_vector, active, in_progress=in_progress)
        return VectorsNote(with_vector, active, "embedding" if in_progress else text, text, time.monotonic())

    def _note_vectors(self, include_restricted: bool, trace: Trace | None) -> None:
        """Say so when some chunks a search may see have no vector (`vectors_note`): in the
        trace's channels step every time; in the log once per process per vectors file, kind
        of caller and state (no vectors file, embedding in progress: INFO; X of N, `ragspine
        embed` fills the rest: WARNING), never on every search of a long-lived server."""
        note = self.vectors_note(include_restricted)
        if note is None:
            return
        if trace is not None:
            for step in trace.of("channels"):
                entry = step.decisions.setdefault("dense", {})
                entry.setdefault("vectors", {"with_vector": note.with_vector, "active": note.active})
                entry["note"] = note.text
        key = (self._note_key, include_restricted)
        if _NOTED.get(key) == note.state:
            return
        with _NOTED_LOCK:
            if _NOTED.get(key) == note.state:
                return
            _NOTED[key] = note.state
        level = logging.INFO if note.state in ("none", "embedding") else logging.WARNING
        log.log(level, "%s (%s)", note.text, self.store.db_path)

    def rerank_step(self) -> RerankStep | None:
        """The rerank stage: the reranker, else the listwise judge, else None (fused order)."""
        if self.reranker is not None:
            return RerankStep(self.reranker.rerank, reranker_name(self.reranker), self.top_n, self.rerank_timeout)
        if self.judge is not None:
            return RerankStep(self.judge.judge, "listwise judge", self.top_n, self.rerank_timeout)
        return None

    def variants(self, query: str) -> list[str]:
        """The query texts the rewriter makes of `query` (itself first; only itself without one)."""
        return self.query_rewriter.rewrite(query) if self.query_rewriter is not None else [query]

    def lexical_match(self, query: str, results: Sequence[RetrievalResult]) -> float:
        """How well BM25 matched `query`: the results' best BM25 score over the query's Σ idf
        (`HybridRetriever.lexical_match`, over what the caller may see), in [0, 1]."""
        best = max((r.bm25_score for r in results), default=0.0)
        return self.retriever().lexical_match(self.analyzer(query), best)

    def retriever(self, *, include_restricted: bool = False) -> HybridRetriever:
        """The ranker over the store's current active chunks (its index brought up to date),
        RESTRICTED ones masked out unless `include_restricted`."""
        with self._lock:
            self._dense_if_present()
            snapshot = self.lexical_index.snapshot()
            vectors_version = self._vectors_version()
            if snapshot is not self._snapshot or vectors_version != self._attached_vectors:
                self._forget()
                self._snapshot = snapshot
            retriever = self._retrievers.get(include_restricted)
            if retriever is None:
                self._attached_vectors = vectors_version
                retriever = self._retrievers[include_restricted] = self._over(snapshot, include_restricted)
                # the attach moved the dense coverage: a note worked out meanwhile (from the old
                # one, its generation read before this point) is not kept
                self._notes.clear()
                self._generation += 1
            return retriever

    def _vectors_version(self) -> int | None:
        """While some active chunks have no vector (an embed job may be writing them, e.g.
        `ragspine embed` in another process), the vectors file's version: when it moves, the
        dense channel is attached again and ranks the vectors written so far (read
        incrementally). None when every chunk the channel saw had a vector, or there is no
        vectors file (a vector store is asked per query): nothing is read then."""
        dense = self.dense
        if dense is None or not isinstance(dense.vectors, ChunkVectors) or dense.coverage().missing <= 0:
            return None
        try:
            return dense.vectors.version()
        except (sqlite3.DatabaseError, VectorStoreError):  # the attach says why (coverage().problem)
            return None

    def _over(self, snapshot: IndexSnapshot, include_restricted: bool) -> HybridRetriever:
        return HybridRetriever.over_snapshot(
            snapshot,
            StoreChunks(self.store, snapshot, self._row_cache),
            # no vectors file (a BM25-only store): lexical only, no vectors made in memory either
            embedding_backend=self.embedding_backend if self._absent is None else None,
            query_rewriter=self.query_rewriter,
            k1=self.k1,
            b=self.b,
            analyzer=self.analyzer,
            fusion=self.fusion,
            channels=self.channels if self._absent is None else "hybrid",
            dense=self.dense,
            include_restricted=include_restricted,
            extra_channels=self.extra_channels,
            feedback=self.feedback,
        )


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
        # Answer from a local list: another thread may clear the shared cache meanwhile.
        chunks = [cache.get(r) for r in row_ids]
        missing = [r for r, c in zip(row_ids, chunks, strict=True) if c is None]
        if not missing:
            return chunks  # type: ignore[return-value]  # none is None
        found = dict(zip(row_ids, chunks, strict=True))
        for row_id, row in zip(missing, self.store.chunks_by_row_ids(missing), strict=True):
            if row is None:
                raise RuntimeError("the chunk store lost rows its lexical index still holds")
            found[row_id] = cache[row_id] = row
        return [found[r] for r in row_ids]

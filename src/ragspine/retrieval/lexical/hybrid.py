"""HybridRetriever: metadata pre-filter → BM25 (+ optional vectors) per query variant → RRF.

Invariants: the metadata filter is applied before any scoring or embedding; BM25 statistics are
over every chunk given to the retriever, the filter only restricts which are scored; chunk
vectors are computed lazily for surviving candidates and cached by chunk_id; ties break by
(-fused_score, chunk_id); without an embedding backend a chunk that shares no token with any
query variant is never returned. RESTRICTED chunks are *not* removed here: the two exits
(rerank, link) do that.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ragspine.retrieval.chunking.chunking import FILTER_FIELDS, Chunk
from ragspine.retrieval.lexical.bm25 import DEFAULT_BM25_B, DEFAULT_BM25_K1, InvertedBM25
from ragspine.retrieval.lexical.fusion import DEFAULT_RRF_K, rrf_fuse
from ragspine.retrieval.lexical.protocols import EmbeddingBackend, QueryRewriter
from ragspine.retrieval.lexical.tokenize import tokenize

DEFAULT_TOP_K = 50
DEFAULT_RANK_DEPTH = 100


@dataclass(frozen=True)
class RetrievalResult:
    """One ranked chunk with its channel scores (vector_score is None when that channel is off)."""

    chunk: Chunk
    bm25_score: float
    vector_score: float | None
    fused_score: float


class HybridRetriever:
    """Ranks a fixed list of chunks.

    >>> from ragspine.retrieval.chunking.chunking import FILTER_FIELDS, Chunk
    >>> r = HybridRetriever([Chunk("a:0", "a", 0, "营收下滑", "a#p1@0-4")])
    >>> [x.chunk.chunk_id for x in r.search("营收")]
    ['a:0']
    """

    def __init__(
        self,
        chunks: Sequence[Chunk],
        *,
        embedding_backend: EmbeddingBackend | None = None,
        query_rewriter: QueryRewriter | None = None,
        k1: float = DEFAULT_BM25_K1,
        b: float = DEFAULT_BM25_B,
        rrf_k: int = DEFAULT_RRF_K,
        rank_depth: int = DEFAULT_RANK_DEPTH,
        vector_cache: dict[str, list[float]] | None = None,
        analyzer: Callable[[str], list[str]] = tokenize,
    ) -> None:
        ids = [c.chunk_id for c in chunks]
        if len(set(ids)) != len(ids):
            raise ValueError("HybridRetriever needs unique chunk_ids (pass only active chunks)")
        self.chunks = list(chunks)
        self._ids = ids
        self.embedding_backend = embedding_backend
        self.query_rewriter = query_rewriter
        self.rrf_k = rrf_k
        self.rank_depth = rank_depth
        self.analyzer = analyzer  # the same function tokenizes chunks and queries
        self._bm25 = InvertedBM25([analyzer(c.text) for c in self.chunks], k1=k1, b=b)
        self._by_field: dict[str, dict[str, set[int]]] = {f: {} for f in FILTER_FIELDS}
        for i, chunk in enumerate(self.chunks):
            for name in FILTER_FIELDS:
                self._by_field[name].setdefault(getattr(chunk, name), set()).add(i)
        # chunk_id → vector; ids carry a content digest, so a cache shared across rebuilds is safe.
        self._vectors: dict[str, list[float]] = {} if vector_cache is None else vector_cache

    def search(
        self,
        query: str,
        *,
        topic: str | None = None,
        entity: str | None = None,
        geography: str | None = None,
        period: str | None = None,
        language: str | None = None,
        top_k: int | None = None,
    ) -> list[RetrievalResult]:
        """The best `top_k` (default DEFAULT_TOP_K) chunks for `query` among those matching every
        given metadata field."""
        check_query(query)
        k = DEFAULT_TOP_K if top_k is None else top_k
        if k <= 0:
            raise ValueError(f"top_k must be a positive integer, got {top_k}")
        filters = {"topic": topic, "entity": entity, "geography": geography,
                   "period": period, "language": language}  # fmt: skip
        allowed = self._allowed(filters)
        if allowed is not None and not allowed:
            return []
        depth = max(k, self.rank_depth)
        variants = self.query_rewriter.rewrite(query) if self.query_rewriter else [query]
        rankings: list[list[int]] = []
        best_bm25: dict[int, float] = {}
        for variant in variants:
            scores = self._bm25.scores(self.analyzer(variant), allowed)
            rankings.append(self._ranked(scores, depth))
            for doc, score in scores.items():
                best_bm25[doc] = max(score, best_bm25.get(doc, 0.0))
        vector_scores = self._vector_channel(variants, allowed, depth, rankings)
        fused = rrf_fuse(rankings, k=self.rrf_k)  # positions stand in for chunk ids
        order = sorted(fused, key=lambda i: (-fused[i], self._ids[i]))[:k]
        return [
            RetrievalResult(
                chunk=self.chunks[i],
                bm25_score=best_bm25.get(i, 0.0),
                vector_score=vector_scores.get(i) if vector_scores is not None else None,
                fused_score=fused[i],
            )
            for i in order
        ]

    def _allowed(self, filters: dict[str, str | None]) -> set[int] | None:
        allowed: set[int] | None = None
        for name, value in filters.items():
            if value is None:
                continue
            matching = self._by_field[name].get(value, set())
            allowed = set(matching) if allowed is None else allowed & matching
        return allowed

    def _ranked(self, scores: dict[int, float], depth: int) -> list[int]:
        return sorted(scores, key=lambda i: (-scores[i], self._ids[i]))[:depth]

    def _vector_channel(
        self, variants: list[str], allowed: set[int] | None, depth: int, rankings: list[list[int]]
    ) -> dict[int, float] | None:
        """Cosine ranking per query variant over the candidates, appended to `rankings`."""
        if self.embedding_backend is None:
            return None
        candidates = range(len(self.chunks)) if allowed is None else sorted(allowed)
        missing = [i for i in candidates if self.chunks[i].chunk_id not in self._vectors]
        if missing:
            vectors = self.embedding_backend.embed_texts([self.chunks[i].text for i in missing])
            for i, vector in zip(missing, vectors, strict=True):
                self._vectors[self.chunks[i].chunk_id] = list(vector)
        best: dict[int, float] = {}
        for query_vector in self.embedding_backend.embed_texts(variants):
            scores = {i: cosine(query_vector, self._vectors[self.chunks[i].chunk_id]) for i in candidates}
            rankings.append(self._ranked(scores, depth))
            for i, score in scores.items():
                best[i] = max(score, best.get(i, -1.0))
        return best


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity; 0.0 when either vector is all zeros."""
    if len(a) != len(b):
        raise ValueError(f"vector dimensions differ: {len(a)} vs {len(b)}")
    dot = sum(x * y for x, y in zip(a, b))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def check_query(query: object) -> None:
    """Raise ValueError for a query that is not a non-blank string."""
    if not isinstance(query, str):
        raise ValueError(f"query must be a string, got {type(query).__name__}")
    if not query.strip():
        raise ValueError("query is empty: give some words to search for")

"""The dense channel over a vector store that ranks for it (pgvector, Qdrant, an in-process store).

`StoreVectors` is the strategy a `DenseChannel` uses for any `ChunkVectorStore` other than a
`ChunkVectors` file: it maps the snapshot's chunk ids to positions, embeds the chunks the store
lacks (`pending`, within the lazy limit), and returns a `StoreDenseView` that lets the store rank.

Invariants:
- The store is asked which ids it lacks only for ids not seen before (`_present`, `_lexical_only`
  remember the answers); an id's text, so its vector, never changes.
- A RESTRICTED chunk is never sent to a remote backend: it stays lexical-only.
- Ranking is the store's exact cosine, ties by chunk_id, plain cosine (no language centring).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ragspine.retrieval.chunking.protocol import IndexTextFn
from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot
from ragspine.retrieval.types import ChunkSource, EmbeddingBackend
from ragspine.retrieval.vector.dense.languages import crossed, language_code
from ragspine.retrieval.vector.dense.pending import embed_into, lazy_batch, select_missing
from ragspine.retrieval.vector.dense.ranking import ChunkIds, DenseCoverage, unit_query_vectors
from ragspine.retrieval.vector.stores.inprocess import SCORE_DECIMALS, ChunkVectorStore, top_k_rows

EXACT_IDS_MAX = 1_024  # a store view ranks up to this many allowed chunks by id lookup (exact)
# Vectors a store view has read by id, kept per channel (an id's text, so its vector, never
# changes for one model): about 75 MB of 384-d float32 at most, cleared when full.
VECTOR_CACHE_MAX = 50_000


class StoreVectors:
    """A dense channel's strategy over a `ChunkVectorStore` that ranks (see the module)."""

    def __init__(
        self,
        backend: EmbeddingBackend,
        vectors: ChunkVectorStore,
        *,
        index_text: IndexTextFn | None = None,
        exact_ids_max: int = EXACT_IDS_MAX,
    ) -> None:
        self.backend, self.vectors, self.index_text = backend, vectors, index_text
        self.exact_ids_max = exact_ids_max
        # nothing is cached or indexed locally: the counters stay at zero, the threshold unused
        self.cache_min_vectors: int | None = None
        self.cache_stats = {"matrix_loads": 0, "matrix_writes": 0, "align_loads": 0, "align_writes": 0, "records_read": 0}
        self.ann_stats = {"builds": 0, "loads": 0, "added": 0, "saves": 0}
        self._present: set[str] = set()  # ids the store is known to hold
        self._lexical_only: set[str] = set()  # ids a remote backend may not see (RESTRICTED)
        self._fetched: dict[str, np.ndarray] = {}  # vectors a store view read by id (VECTOR_CACHE_MAX)
        self._position_of: dict[str, int] = {}  # active chunk id → position, for `_positions_segments`
        self._id_at: list[str] = []  # chunk id of every position of `_positions_segments`
        self._positions_segments: list[Any] = []
        self._coverage = DenseCoverage(0, 0, 0)

    def attach(self, snapshot: IndexSnapshot, source: ChunkSource, limit: int) -> StoreDenseView:
        return self._view(snapshot, source, snapshot.active_positions(), limit)

    def view_over(self, snapshot: IndexSnapshot, source: ChunkSource, allowed: np.ndarray) -> StoreDenseView:
        return self._view(snapshot, source, allowed, None)

    def coverage(self) -> DenseCoverage:
        return self._coverage

    def _view(
        self, snapshot: IndexSnapshot, source: ChunkSource, positions: np.ndarray, limit: int | None
    ) -> StoreDenseView:
        """Map the snapshot's chunk ids to positions, find which of `positions` have no vector in
        the store (only ids not seen before are asked), embed them within `limit`, and return the
        view that lets the store rank."""
        self._map_positions(snapshot)
        ids = [self._id_at[p] for p in positions.tolist()]
        self._embed_unknown(source, positions, ids, limit)
        with_vector = sum(1 for i in ids if i in self._present)
        self._coverage = DenseCoverage(len(ids), with_vector, sum(1 for i in ids if i in self._lexical_only))
        return StoreDenseView(
            self.backend, snapshot, source, self.vectors, self._position_of, self._fetched,
            exact_ids_max=self.exact_ids_max,
        )  # fmt: skip

    def _map_positions(self, snapshot: IndexSnapshot) -> None:
        """Chunk id of every position and position of every active chunk id, rebuilt when the
        snapshot's segments are not the ones mapped last."""
        segments = list(snapshot.segments)
        if len(segments) != len(self._positions_segments) or any(
            a is not b for a, b in zip(segments, self._positions_segments, strict=True)
        ):
            self._id_at = [cid for segment in segments for cid in segment.chunk_ids.to_list()]
            self._position_of = {self._id_at[p]: p for p in snapshot.active_positions().tolist()}
            self._positions_segments = segments

    def _embed_unknown(self, source: ChunkSource, positions: np.ndarray, ids: list[str], limit: int | None) -> None:
        """Ask the store about the ids not seen before; embed those it lacks within `limit`."""
        unknown = [i for i in ids if i not in self._present and i not in self._lexical_only]
        if not unknown:
            return
        absent = set(self.vectors.missing(unknown))
        self._present.update(i for i in unknown if i not in absent)
        todo = [p for p, i in zip(positions.tolist(), ids, strict=True) if i in absent]
        missing = select_missing(self.vectors, self.backend, source.chunks_at(todo), known_missing=True)
        self._lexical_only.update(c.chunk_id for c in missing.lexical_only)
        batch = [c for _, c in lazy_batch([(0, c) for c in missing.sendable], limit)]
        for stored in embed_into(self.vectors, self.backend, batch, index_text=self.index_text):
            self._present.update(c.chunk_id for c in stored.chunks)


class StoreDenseView:
    """One snapshot's positions ranked by a vector store (pgvector, Qdrant, …): the store returns
    its best ids; the ones the query may not see (another filter, inactive, not in this snapshot)
    are dropped, asking for more until `depth` remain or the store has no more. When at most
    `exact_ids_max` positions are allowed (a selective filter), the filter goes down to the store
    as those chunks' ids instead: their vectors are fetched by id (kept in the channel's
    `fetched` cache, VECTOR_CACHE_MAX of them) and scored exactly. Order and
    scores are the store's exact re-ranked cosine, ties by chunk_id, as `DenseView` ranks
    without language centring."""

    def __init__(
        self,
        backend: EmbeddingBackend,
        snapshot: IndexSnapshot,
        source: ChunkSource,
        store: ChunkVectorStore,
        position_of: dict[str, int],
        fetched: dict[str, np.ndarray] | None = None,
        *,
        exact_ids_max: int = EXACT_IDS_MAX,
    ) -> None:
        self.backend, self.snapshot, self.source, self.store = backend, snapshot, source, store
        self.position_of = position_of
        self.fetched = {} if fetched is None else fetched
        self.exact_ids_max = exact_ids_max

    def embed_queries(self, texts: Sequence[str]) -> list[np.ndarray]:
        return unit_query_vectors(self.backend, texts, lambda vector, _text: vector)

    def rank(self, query: np.ndarray, allowed: np.ndarray, depth: int) -> tuple[list[int], dict[int, float]]:
        if depth <= 0 or not len(allowed):
            return [], {}
        if len(allowed) <= self.exact_ids_max:
            # A selective filter (or a small store): fetch exactly the allowed chunks' vectors by
            # id and score them here, the store's own exact rank, instead of over-fetching.
            scores = self.scores_at(query, allowed.tolist())
            if not scores:
                return [], {}
            rows = np.fromiter(scores, dtype=np.int64, count=len(scores))
            values = np.fromiter(scores.values(), dtype=np.float64, count=len(scores))
            best = top_k_rows(rows, values, depth, ChunkIds(self.snapshot))
            return [p for p, _ in best], dict(best)
        mask = np.zeros(int(allowed.max()) + 1, dtype=bool)
        mask[allowed] = True
        k = max(2 * depth, depth + 32)
        total: int | None = None  # the store's size: asked only when one round is not enough
        while True:
            kept: list[tuple[int, float]] = []
            for chunk_id, score in self.store.query(query, k=k):
                p = self.position_of.get(chunk_id)
                if p is not None and p < len(mask) and mask[p]:
                    kept.append((p, score))
            if len(kept) >= depth:
                break
            if total is None:
                total = self.store.count()
            if k >= total:
                break
            k = min(total, 4 * k)
        kept = kept[:depth]
        return [p for p, _ in kept], dict(kept)

    def vectors_at(self, positions: Sequence[int]) -> np.ndarray:
        """The stored vectors of the given positions that have one, in order (feedback)."""
        ids = [self.snapshot.chunk_id(int(p)) for p in positions]
        if not ids:
            return np.zeros((0, 0))
        rows, present = self.store.get(ids)
        kept = [row for row, ok in zip(rows, present.tolist(), strict=True) if ok]
        return np.stack(kept).astype(np.float64) if kept else np.zeros((0, 0))

    def scores_at(self, query: np.ndarray, positions: Sequence[int]) -> dict[int, float]:
        positions = [int(p) for p in positions]
        if not positions:
            return {}
        ids = [self.snapshot.chunk_id(p) for p in positions]
        fetched = self.fetched
        wanted = [i for i in ids if i not in fetched]
        if wanted:
            rows, present = self.store.get(wanted)
            if len(fetched) + len(wanted) > VECTOR_CACHE_MAX:
                fetched.clear()
            fetched.update((i, row) for i, row, ok in zip(wanted, rows, present.tolist(), strict=True) if ok)
        chosen = [(p, v) for p, i in zip(positions, ids, strict=True) if (v := fetched.get(i)) is not None]
        if not chosen:
            return {}
        matrix = np.stack([v for _, v in chosen])
        scores = np.round((matrix @ query).astype(np.float64), SCORE_DECIMALS)
        return dict(zip([p for p, _ in chosen], scores.tolist(), strict=True))

    def languages_crossed(self, text: str, positions: Sequence[int]) -> list[bool]:
        """As `DenseView.languages_crossed`; the chunks are read in one call."""
        if not positions:
            return []
        chunks = self.source.chunks_at(list(positions))
        return crossed(language_code(text), [language_code(c.text) for c in chunks])

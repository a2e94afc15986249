"""What the query pipeline asks of the dense channel, and what both of its strategies share.

`DenseRanking` is one snapshot's view (`DenseView` over a local matrix, `StoreDenseView` over a
vector store); `DenseVectors` is the strategy a `DenseChannel` delegates to, chosen once when the
channel is made (`LocalVectors` for a `ChunkVectors` file or memory, `StoreVectors` for any other
`ChunkVectorStore`).

Invariants: a query is embedded by `unit_query_vectors` only (all of a query's variants in one
backend call, each distinct text once, unit length); ties between equal scores break by chunk id
(`ChunkIds`, what `top_k_rows` is given), in either strategy.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot
from ragspine.retrieval.types import ChunkSource, EmbeddingBackend
from ragspine.retrieval.vector.arrays import as_matrix, unit_rows
from ragspine.retrieval.vector.embeddings.support import embed_queries

# the logger every part of the dense channel logs under (the name it has always had)
CHANNEL_LOGGER = "ragspine.retrieval.vector.dense.channel"


@dataclass(frozen=True)
class DenseCoverage:
    """How many active positions the dense channel can rank."""

    active: int
    with_vector: int
    lexical_only: int  # RESTRICTED chunks a remote backend may not see
    damaged: int = 0  # stored records that failed their checksum (ranked by BM25 until re-embedded)
    problem: str | None = None  # why the vectors could not be read at all (BM25 only), if so
    # (with a vector, active) among the chunks a caller without RESTRICTED access may see
    # (`IndexSnapshot.visible`); None: not counted (a vector store's view, or before the first
    # attach), so such a caller is told nothing (`seen_by`: fails closed)
    visible: tuple[int, int] | None = None

    @property
    def missing(self) -> int:
        return self.active - self.with_vector - self.lexical_only

    def seen_by(self, include_restricted: bool) -> tuple[int, int]:
        """(chunks with a vector, chunks that could have one) among those a caller may see: with
        RESTRICTED access every active chunk but the RESTRICTED ones a remote backend never
        embeds; without, only the chunks that are not RESTRICTED, so a RESTRICTED chunk never
        changes what such a caller is told. Without `visible` counted, such a caller gets (0, 0):
        nothing is said, rather than counts that include RESTRICTED chunks.

        >>> DenseCoverage(200, 164, 0, visible=(100, 100)).seen_by(False)
        (100, 100)
        >>> DenseCoverage(200, 100, 100).seen_by(True)
        (100, 100)
        >>> DenseCoverage(200, 100, 0).seen_by(False)
        (0, 0)
        """
        if include_restricted:
            return self.with_vector, self.active - self.lexical_only
        return self.visible if self.visible is not None else (0, 0)


class DenseRanking(Protocol):
    """What the pipeline asks of the dense channel for one snapshot (`DenseView`, `StoreDenseView`)."""

    def embed_queries(self, texts: Sequence[str]) -> list[np.ndarray]: ...

    def rank(self, query: np.ndarray, allowed: np.ndarray, depth: int) -> tuple[list[int], dict[int, float]]: ...

    def scores_at(self, query: np.ndarray, positions: Sequence[int]) -> dict[int, float]: ...

    def languages_crossed(self, text: str, positions: Sequence[int]) -> list[bool]: ...


class DenseVectors(Protocol):
    """A dense channel's strategy: where its vectors are and how a snapshot is ranked from them.
    The channel calls it under its lock, one call at a time."""

    cache_stats: dict[str, int]
    ann_stats: dict[str, int]
    cache_min_vectors: int | None  # a local matrix's cache threshold (`matrix_cache`)

    def attach(self, snapshot: IndexSnapshot, source: ChunkSource, limit: int) -> DenseRanking:
        """`DenseChannel.attach`, embedding at most `limit` missing chunks (the lazy limit)."""
        ...

    def view_over(self, snapshot: IndexSnapshot, source: ChunkSource, allowed: np.ndarray) -> DenseRanking:
        """`DenseChannel.view_over`."""
        ...

    def coverage(self) -> DenseCoverage:
        """How many active positions of the last snapshot can be ranked."""
        ...


class ChunkIds:
    """A snapshot's chunk ids indexed by position (what `top_k_rows` breaks ties by)."""

    def __init__(self, snapshot: IndexSnapshot) -> None:
        self.snapshot = snapshot

    def __getitem__(self, position: int) -> str:
        return self.snapshot.chunk_id(int(position))


def unit_query_vectors(backend: EmbeddingBackend, texts: Sequence[str], centre: Any) -> list[np.ndarray]:
    """Unit query vectors of `texts` from one backend call (each distinct text once), each
    passed through `centre(vector, text)`."""
    distinct = list(dict.fromkeys(texts))
    if not distinct:
        return []
    matrix = unit_rows(as_matrix(embed_queries(backend, distinct), what="query vectors"))
    if len(matrix) != len(distinct):
        raise ValueError(f"the embedding backend returned {len(matrix)} vectors for {len(distinct)} queries")
    _RECENT.last = (backend, dict(zip(distinct, matrix, strict=True)))
    vectors = {text: centre(row, text) for text, row in zip(distinct, matrix, strict=True)}
    return [vectors[text] for text in texts]


_RECENT = threading.local()  # this thread's latest `unit_query_vectors` call: (backend, text → unit vector)


def recent_state() -> tuple[EmbeddingBackend, dict[str, np.ndarray]] | None:
    """This thread's latest `unit_query_vectors` call (for `adopt_recent` on another thread)."""
    last: tuple[EmbeddingBackend, dict[str, np.ndarray]] | None = getattr(_RECENT, "last", None)
    return last


def adopt_recent(state: tuple[EmbeddingBackend, dict[str, np.ndarray]] | None) -> None:
    """Make `state` (`recent_state` of the thread that embedded a query) this thread's latest
    call, so `recent_query_vector` finds a query embedded ahead on a worker thread."""
    if state is not None:
        _RECENT.last = state


def recent_query_vector(backend: EmbeddingBackend, text: str) -> np.ndarray | None:
    """The unit (uncentred) vector this thread's latest `unit_query_vectors` call computed for
    `text` with this very `backend`, or None: a second consumer of one query (RAPTOR ranking its
    nodes after the dense channel ranked the chunks) need not embed it again."""
    last = getattr(_RECENT, "last", None)
    if last is None or last[0] is not backend:
        return None
    vector = last[1].get(text)
    return None if vector is None else np.array(vector)

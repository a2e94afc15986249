"""The seams and value types every retrieval stage shares, declared once and imported everywhere else."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ragspine.retrieval.model import Chunk


@runtime_checkable
class EmbeddingBackend(Protocol):
    """Turns texts into vectors (one per text, same dimension, same order)."""

    def embed_texts(self, texts: list[str]) -> list[list[float]]: ...


@runtime_checkable
class QueryRewriter(Protocol):
    """Expands a query into variants; the original query is always first."""

    def rewrite(self, query: str) -> list[str]: ...


class ChunkSource(Protocol):
    """The chunks behind a lexical index's positions."""

    def chunks_at(self, positions: Sequence[int]) -> list[Chunk]: ...


@dataclass(frozen=True)
class RetrievalResult:
    """One ranked chunk with its channel scores (vector_score is None when that channel is off).

    `prompt_text` (None: use the chunk's text) is what a prompt shows instead of the text; it is
    `" … "`-joined `chunk.text[s:e]` for each `(s, e)` in `prompt_spans` (set by a post-processor
    such as `compress`), never a citation. `channel_scores` holds the extra channels' scores
    (the channel slot, `retrieval.pipeline.channels`), empty without extra channels."""

    chunk: Chunk
    bm25_score: float
    vector_score: float | None
    fused_score: float
    prompt_text: str | None = None
    prompt_spans: tuple[tuple[int, int], ...] = ()
    channel_scores: tuple[tuple[str, float], ...] = ()  # (name, best score) per extra channel that ranked it

    @classmethod
    def lexical(cls, chunk: Chunk, bm25_score: float, fused_score: float) -> RetrievalResult:
        """`RetrievalResult(chunk, bm25_score, None, fused_score)`, the other fields at their
        defaults, made without the frozen dataclass's one `object.__setattr__` per field (a
        BM25-only search makes one per hit).

        >>> from ragspine.retrieval.model import Chunk
        >>> c = Chunk("a:0", "a", 0, "text", "a#p1@0-4")
        >>> RetrievalResult.lexical(c, 1.5, 0.5) == RetrievalResult(c, 1.5, None, 0.5)
        True
        """
        result = object.__new__(cls)
        result.__dict__.update(chunk=chunk, bm25_score=bm25_score, vector_score=None, fused_score=fused_score,
                               prompt_text=None, prompt_spans=(), channel_scores=())  # fmt: skip
        return result

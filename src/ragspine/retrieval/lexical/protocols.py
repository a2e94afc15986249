"""The seams of the retrieval core, declared once and imported everywhere else."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ragspine.retrieval.chunking.chunking import Chunk


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

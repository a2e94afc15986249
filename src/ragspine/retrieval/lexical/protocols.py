"""The seams of the retrieval core, declared once and imported everywhere else."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class EmbeddingBackend(Protocol):
    """Turns texts into vectors (one per text, same dimension, same order)."""

    def embed_texts(self, texts: list[str]) -> list[list[float]]: ...


@runtime_checkable
class QueryRewriter(Protocol):
    """Expands a query into variants; the original query is always first."""

    def rewrite(self, query: str) -> list[str]: ...

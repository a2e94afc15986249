"""The post-processor seam: after rerank, before the link builds snippets.

Invariant: a post-processor may reorder or drop results and may set derived fields
(`prompt_text`/`prompt_spans`), but never adds a result nor changes a chunk (the chain checks:
a chunk_id it was not given, or a changed chunk, is a PostprocessorError).

Two optional abilities a member may have, found by the chain with `isinstance`:
- `Selector` (MMR): picks `top_k` of a larger pool, so the retriever fetches `fetch_size(top_k)`
  candidates and the selector returns `top_k` of them;
- `UsesChunkVectors`: takes the dense channel's stored chunk vectors when the index has them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ragspine.errors import RagspineError
from ragspine.retrieval.types import RetrievalResult

# chunk_ids -> (rows, present): unit vectors (zero rows where absent) and a mask of the present ones.
VectorLookup = Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]]


@runtime_checkable
class Postprocessor(Protocol):
    """Takes the ranked, RESTRICTED-free results of one query and returns a subset, reordered."""

    def process(self, query: str, results: list[RetrievalResult]) -> list[RetrievalResult]: ...


@runtime_checkable
class Selector(Protocol):
    """A post-processor that chooses `top_k` results out of a larger candidate pool."""

    def fetch_size(self, top_k: int) -> int: ...

    def select(self, query: str, results: list[RetrievalResult], top_k: int) -> list[RetrievalResult]: ...


@runtime_checkable
class UsesChunkVectors(Protocol):
    """A post-processor that can use stored chunk vectors (given by the retriever)."""

    def use_vectors(self, lookup: VectorLookup) -> None: ...


class PostprocessorError(RagspineError, RuntimeError):
    """A post-processor returned a result it was not given (or the same one twice, or a changed chunk)."""

"""The post-processor seam: after rerank, before the link builds snippets.

Invariant: a post-processor may reorder or drop results and may set derived fields, but never
adds a result (the chain checks: a chunk_id it was not given is a PostprocessorError).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ragspine.retrieval.types import RetrievalResult


@runtime_checkable
class Postprocessor(Protocol):
    """Takes the ranked, RESTRICTED-free results of one query and returns a subset, reordered."""

    def process(self, query: str, results: list[RetrievalResult]) -> list[RetrievalResult]: ...


class PostprocessorError(RuntimeError):
    """A post-processor returned a result it was not given (or the same one twice)."""

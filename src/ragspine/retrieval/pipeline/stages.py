"""The rerank stage and RESTRICTED exit #2, as the pipeline runs them (and `NarrativeIndex.retrieve`).

Invariants: the rerank step reorders only the first `top_n` results and never adds, drops or
duplicates one; RESTRICTED candidates are never given to the reranker (`rerank.guard`, exit #1);
a reranker that fails or runs past `timeout_s` leaves the fused order (its lineage says so).
`restricted_exit` drops every RESTRICTED result (exit #2) and keeps the others' order.
`check_query` is the one check of a query's text (a non-blank string).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragspine.retrieval.rerank.guard import Order, rerank_traced
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.types import RetrievalResult


@dataclass(frozen=True)
class RerankStep:
    """A reranker (or the listwise judge) over the fused head: `order(query, texts)` is its
    permutation, `name` its lineage name, `top_n` how many fused results it sees."""

    order: Order
    name: str
    top_n: int
    timeout_s: float | None = None

    def depth(self, top_k: int) -> int:
        """How many fused results to ask for so that the reranker sees its `top_n`."""
        return max(top_k, self.top_n)

    def apply(self, query: str, results: Sequence[RetrievalResult], top_k: int) -> tuple[list[RetrievalResult], dict[str, Any]]:
        """The first `top_k` results after reranking the head, and the step's lineage."""
        ranked, lineage = rerank_traced(query, results, self.order, top_n=self.top_n, name=self.name, timeout_s=self.timeout_s)
        return ranked[:top_k], lineage.as_dict()


def check_query(query: object) -> None:
    """Raise ValueError for a query that is not a non-blank string."""
    if not isinstance(query, str):
        raise ValueError(f"query must be a string, got {type(query).__name__}")
    if not query.strip():
        raise ValueError("query is empty: give some words to search for")


def restricted_exit(results: Sequence[RetrievalResult]) -> list[RetrievalResult]:
    """RESTRICTED exit #2: the results a prompt may see, in order."""
    return [r for r in results if not is_restricted(r.chunk.sensitivity)]

"""The reranker seam: one Protocol every second-stage reranker implements.

Invariant: a reranker sees only candidate texts (never a RESTRICTED one: `guard.rerank_head`
filters them out before the call) and answers with a 0-based permutation of their indexes.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Reranker(Protocol):
    """Orders candidate passages for a query: a permutation of range(len(candidates)), best first."""

    def rerank(self, query: str, candidates: list[str]) -> list[int]: ...

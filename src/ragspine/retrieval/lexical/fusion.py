"""Reciprocal Rank Fusion: score(d) = Σ 1 / (k + rank_d), ranks counted from 1."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import TypeVar

DEFAULT_RRF_K = 60
K = TypeVar("K", bound=Hashable)


def rrf_fuse(rankings: Iterable[Sequence[K]], k: int = DEFAULT_RRF_K) -> dict[K, float]:
    """Fuse ranked id lists; an id absent from a list gets nothing from it.

    >>> rrf_fuse([["a", "b"], ["b"]], k=60) == {"a": 1 / 61, "b": 1 / 62 + 1 / 61}
    True
    """
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k}")
    fused: dict[K, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return fused

"""Reciprocal Rank Fusion: score(d) = Σ 1 / (k + rank_d), ranks counted from 1."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
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


def weighted_rrf(rankings: Iterable[tuple[Sequence[K], float]], k: int = DEFAULT_RRF_K) -> dict[K, float]:
    """RRF with a weight per ranking: score(d) = Σ w / (k + rank_d). All weights 1.0 is `rrf_fuse`.

    >>> weighted_rrf([(["a", "b"], 1.0), (["b"], 0.5)], k=60) == {"a": 1 / 61, "b": 1 / 62 + 0.5 / 61}
    True
    """
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k}")
    fused: dict[K, float] = {}
    for ranking, weight in rankings:
        if weight < 0:
            raise ValueError(f"RRF weights must be >= 0, got {weight}")
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + weight / (k + rank)
    return fused


FUSION_METHODS = ("adaptive", "weighted", "rrf")


@dataclass(frozen=True)
class Fusion:
    """How the lexical and dense rankings are combined (weighted RRF in every method).

    - rrf: every ranking weight 1.0 (`rrf_fuse`).
    - weighted: lexical rankings weigh `lexical_weight`, dense rankings `dense_weight`.
    - adaptive: the dense weight follows how well the lexical channel matched this query:
      `match` = best BM25 score / Σ idf of the query's tokens (tokens the corpus lacks count with
      the idf of an unseen term), clipped to [0, 1]. match >= match_high → dense weight
      `dense_low`; match <= match_low → `dense_high`; linear in between. A query the corpus's
      vocabulary covers well (Chinese question over Chinese text) leans on BM25; one it does not
      (a Chinese question over English text, a paraphrase) leans on the vectors.
    Deterministic and cheap: the statistics come from the lexical index already in memory.
    """

    method: str = "adaptive"
    k: int = DEFAULT_RRF_K
    lexical_weight: float = 1.0
    dense_weight: float = 1.0
    dense_low: float = 0.3
    dense_high: float = 3.0
    match_low: float = 0.2
    match_high: float = 0.6

    def __post_init__(self) -> None:
        if self.method not in FUSION_METHODS:
            raise ValueError(f"unknown fusion method {self.method!r}; valid: {', '.join(FUSION_METHODS)}")
        if self.k < 0:
            raise ValueError(f"RRF k must be >= 0, got {self.k}")
        weights = (self.lexical_weight, self.dense_weight, self.dense_low, self.dense_high)
        if min(weights) < 0:
            raise ValueError("fusion weights must be >= 0")
        if not 0.0 <= self.match_low < self.match_high <= 1.0:
            raise ValueError(
                f"need 0 <= match_low < match_high <= 1, got {self.match_low} and {self.match_high}"
            )

    def weights(self, match: float) -> tuple[float, float]:
        """(lexical weight, dense weight) for a query whose lexical match is `match`."""
        if self.method == "rrf":
            return 1.0, 1.0
        if self.method == "weighted":
            return self.lexical_weight, self.dense_weight
        if match >= self.match_high:
            return self.lexical_weight, self.dense_low
        if match <= self.match_low:
            return self.lexical_weight, self.dense_high
        t = (self.match_high - match) / (self.match_high - self.match_low)
        return self.lexical_weight, self.dense_low + t * (self.dense_high - self.dense_low)

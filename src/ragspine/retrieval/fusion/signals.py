"""Per-query signals the fusion reads, and the one function that turns them into model features.

Invariant: `query_features` is the only place features are computed: `HybridRetriever` builds
a `QuerySignals` per query from what its two channels already returned (no extra search, no
extra embedding) and the learned fusion reads `query_features(signals)`; the training data of
the shipped model (bench/fusion_learn.py) is recorded from those same `QuerySignals` objects
at query time, so training and serving cannot compute a feature differently.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ragspine.retrieval.language import detect_language

OVERLAP_DEPTH = 10  # the agreement of the two channels is read over their top 10
CROSS_DEPTH = 3  # how deep the dense head is checked for chunks in another language

# The order of `query_features`' values; a model file names them and must match.
FEATURE_NAMES = (
    "match",  # best BM25 score / Σ idf of the query's tokens, in [0, 1]
    "gap",  # (best − second best BM25 score) / best
    "covered",  # share of the query's distinct tokens the corpus has
    "log_tokens",  # log(1 + number of query tokens)
    "zh",  # 1.0 when the query is Chinese
    "dense_top",  # best cosine of the dense channel
    "dense_gap",  # best − second best cosine
    "overlap",  # share of BM25's top 10 also in the dense top 10
    "cross_share",  # share of the dense top CROSS_DEPTH in another language than the query
)


@dataclass(frozen=True)
class QuerySignals:
    """What one query's two channels showed (the first query variant's rankings).

    `lexical_top`: the best BM25 scores, best first (up to 2); `dense_top`: the best cosines,
    best first (up to 2); `overlap`: the share of the BM25 top `OVERLAP_DEPTH` also in the
    dense top `OVERLAP_DEPTH`; `crosses`: the best dense hit's language differs from the query's;
    `cross_share`: the share of the dense top `CROSS_DEPTH` whose language differs from the query's.
    """

    query: str
    tokens: int
    covered: float
    match: float
    lexical_top: tuple[float, ...]
    dense_top: tuple[float, ...]
    overlap: float
    crosses: bool
    cross_share: float = 0.0

    @property
    def gap(self) -> float:
        """(best − second best) / best BM25 score (1.0 with one hit, 0.0 with none)."""
        return lexical_gap(self.lexical_top)

    @property
    def crossing(self) -> bool:
        """A chunk among the dense top `CROSS_DEPTH` is in another language than the query (BM25
        cannot see a translation: both fusions then let the vectors decide)."""
        return self.crosses or self.cross_share > 0


def lexical_gap(best: Sequence[float]) -> float:
    """(best − second best) / best of the top BM25 scores given (1.0 with one hit, 0.0 with none).

    >>> lexical_gap([4.0, 3.0]), lexical_gap([2.0]), lexical_gap([])
    (0.25, 1.0, 0.0)
    """
    if not best or best[0] <= 0:
        return 0.0
    if len(best) == 1:
        return 1.0
    return (best[0] - best[1]) / best[0]


def top_overlap(lexical: Sequence[object], dense: Sequence[object], depth: int = OVERLAP_DEPTH) -> float:
    """Share of `lexical`'s first `depth` ids that are also among `dense`'s first `depth`.

    >>> top_overlap([1, 2, 3, 4], [4, 9, 1], depth=2), top_overlap([], [1])
    (0.0, 0.0)
    """
    head = lexical[:depth]
    if not head:
        return 0.0
    return len(set(head) & set(dense[:depth])) / len(head)


def query_features(signals: QuerySignals) -> tuple[float, ...]:
    """The model's inputs, in `FEATURE_NAMES` order (finite floats).

    >>> s = QuerySignals("营收下滑", 7, 1.0, 0.5, (4.0, 3.0), (0.9, 0.8), 0.5, False)
    >>> [round(x, 3) for x in query_features(s)]
    [0.5, 0.25, 1.0, 2.079, 1.0, 0.9, 0.1, 0.5, 0.0]
    """
    dense = signals.dense_top
    dense_top = dense[0] if dense else 0.0
    dense_gap = dense[0] - dense[1] if len(dense) > 1 else 0.0
    return (
        min(1.0, max(0.0, signals.match)),
        signals.gap,
        signals.covered,
        math.log1p(max(0, signals.tokens)),
        1.0 if detect_language(signals.query) == "zh" else 0.0,
        dense_top,
        dense_gap,
        signals.overlap,
        signals.cross_share,
    )

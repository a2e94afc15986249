"""Pseudo-relevance feedback inside the channels: RM3 for BM25, Rocchio for the dense query vector.

    HybridRetriever(chunks, feedback=Feedback("rm3"))      # or "rocchio", "both"; "none": off

After the first pass of the channels, the best `depth` passages of the query's own ranking (the
first variant) feed a second pass of the same channel, whose ranking replaces the first one in
fusion (the reported `bm25_score` and `vector_score` stay those of the query itself, and the
fusion's signals are read from the first pass):
- rm3: the relevance model P(w|R) = Σ_d P(w|d) · P(d|q) over the feedback passages, with
  P(w|d) = tf / |d| over the analyzer's own tokens (so CJK unigrams and bigrams take part as
  they are indexed) and P(d|q) the passages' BM25 scores normalised to sum 1; its best `terms`
  terms (ties by term) are mixed with the query: score(d) = (1 − w) · Σ_{t∈q} bm25_t(d) / |q|
  + w · Σ_e P(e|R) · bm25_e(d), with w = `lexical_weight`, over the first pass's candidates and
  the best `depth`… of the expansion terms' own search.
- rocchio: q' = q + `dense_weight` · mean of the feedback passages' unit vectors, ranked as a
  query vector is (the view's centring applies).
Invariant: the feedback passages come from rankings over the positions the filter and the
RESTRICTED mask allow (`ChannelQuery.allowed`), so a masked or filtered-out chunk never feeds
the feedback and is never ranked by the second pass; the same query over the same snapshot
gives the same expansion (terms ordered by (-weight, term)).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot
from ragspine.retrieval.types import ChunkSource

FEEDBACK_MODES = ("none", "rm3", "rocchio", "both")
DEFAULT_FEEDBACK_DEPTH = 10
DEFAULT_FEEDBACK_TERMS = 10
DEFAULT_LEXICAL_WEIGHT = 0.1  # with depth 10: the leave-one-dataset-out pick on train/dev (docs/benchmarks.md)
DEFAULT_DENSE_WEIGHT = 0.25  # the better weight at depth 10; no Rocchio setting passed the rule


@dataclass(frozen=True)
class Feedback:
    """Which feedback runs (`mode`, one of FEEDBACK_MODES), from how many passages (`depth`),
    with how many expansion terms (`terms`, RM3), the expansion's share of the RM3 query
    (`lexical_weight`) and the passages' mean vector's weight in the Rocchio query (`dense_weight`)."""

    mode: str = "none"
    depth: int = DEFAULT_FEEDBACK_DEPTH
    terms: int = DEFAULT_FEEDBACK_TERMS
    lexical_weight: float = DEFAULT_LEXICAL_WEIGHT
    dense_weight: float = DEFAULT_DENSE_WEIGHT

    def __post_init__(self) -> None:
        if self.mode not in FEEDBACK_MODES:
            raise ValueError(f"unknown feedback {self.mode!r}; valid: {', '.join(FEEDBACK_MODES)}")
        if self.depth < 1 or self.terms < 1:
            raise ValueError(f"feedback depth and terms must be at least 1, got {self.depth} and {self.terms}")
        if not 0.0 <= self.lexical_weight <= 1.0 or self.dense_weight < 0.0:
            raise ValueError("feedback lexical weight must be in [0, 1] and dense weight at least 0")

    @property
    def rm3(self) -> bool:
        return self.mode in ("rm3", "both")

    @property
    def rocchio(self) -> bool:
        return self.mode in ("rocchio", "both")


def relevance_model(
    texts: Sequence[str], scores: Sequence[float], analyzer: Callable[[str], list[str]], query: Sequence[str], n: int
) -> list[tuple[str, float]]:
    """The `n` best expansion terms of the feedback passages (not already in `query`) with
    P(w|R) renormalised over them, by (-weight, term)."""
    total = sum(max(s, 0.0) for s in scores)
    weights: dict[str, float] = {}
    for text, score in zip(texts, scores, strict=True):
        tokens = analyzer(text)
        if not tokens:
            continue
        prior = max(score, 0.0) / total if total > 0 else 1.0 / len(texts)
        for term, tf in Counter(tokens).items():
            weights[term] = weights.get(term, 0.0) + prior * tf / len(tokens)
    asked = set(query)
    best = sorted(((t, w) for t, w in weights.items() if t not in asked and w > 0), key=lambda x: (-x[1], x[0]))[:n]
    mass = sum(w for _, w in best)
    return [(t, w / mass) for t, w in best] if mass > 0 else []


def rm3_ranking(
    index: IndexSnapshot,
    query: Sequence[str],
    expansion: Sequence[tuple[str, float]],
    candidates: Sequence[int],
    search: Callable[[list[str]], list[tuple[int, float]]],
    *,
    k1: float,
    b: float,
    weight: float,
    depth: int,
) -> tuple[list[int], dict[int, float]]:
    """The RM3 query's best `depth` (positions, scores) among `candidates` and the expansion
    terms' own search (`search`, over the allowed positions), by (-score, chunk_id)."""
    pool = sorted(set(candidates) | {p for p, _ in search([t for t, _ in expansion])})
    if not pool:
        return [], {}
    total = np.zeros(len(pool))
    distinct = list(dict.fromkeys(query))
    counts = Counter(query)
    for term in distinct:
        part = index.score_positions([term], pool, k1=k1, b=b)
        total += (1.0 - weight) * counts[term] / len(query) * np.array([part[p] for p in pool])
    for term, p_term in expansion:
        part = index.score_positions([term], pool, k1=k1, b=b)
        total += weight * p_term * np.array([part[p] for p in pool])
    order = sorted(range(len(pool)), key=lambda i: (-total[i], index.chunk_id(pool[i])))[:depth]
    ranked = [pool[i] for i in order if total[i] > 0]
    return ranked, {pool[i]: float(total[i]) for i in order if total[i] > 0}


def rocchio_vector(query: np.ndarray, passages: np.ndarray, weight: float) -> np.ndarray:
    """q + weight · mean(passages), as a unit vector (the query when no passage is given)."""
    if not len(passages):
        return query
    moved = query + weight * passages.mean(axis=0)
    norm = float(np.linalg.norm(moved))
    return moved / norm if norm > 0 else query


def feedback_texts(source: ChunkSource, positions: Sequence[int]) -> list[str]:
    """The texts of the feedback passages (the analyzer sees them as the index did)."""
    return [chunk.text for chunk in source.chunks_at(list(positions))]

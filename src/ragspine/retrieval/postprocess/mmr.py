"""Maximal Marginal Relevance: pick results that are relevant and unlike those already picked.

    mmr = MMR(lambda_mult=0.7)          # top_n=None: as many as the retriever's top_k
    diverse = mmr.select("why did revenue fall", results, top_k=10)

Invariants:
- relevance is the upstream ranking (reranker included): the fused scores min-max scaled when
  the results come in non-increasing fused order, else the rank mapped linearly to [1, 0];
- similarity is the cosine of the dense channel's stored chunk vectors when every candidate has
  one (`use_vectors`), else the Jaccard overlap of their token sets (the BM25 analyzer's tokens);
- the first pick is always the top result; ties go to the earlier input position, so the same
  input gives the same output; the output is a subset of the input, chunks untouched.
"""

from __future__ import annotations

import numpy as np

from ragspine.retrieval.lexical.tokenize import tokenize
from ragspine.retrieval.postprocess.protocol import VectorLookup
from ragspine.retrieval.types import RetrievalResult

DEFAULT_LAMBDA = 0.7
DEFAULT_FETCH_FACTOR = 2  # candidates retrieved per result kept, when the retriever asks


class MMR:
    """λ·relevance − (1−λ)·(max similarity to a picked result), greedily.

    >>> from ragspine.testing.reranker import results
    >>> [r.chunk.chunk_id for r in MMR(lambda_mult=0.5, top_n=3).process("revenue", results(["PUBLIC"] * 6))]
    ['c0', 'c1', 'c2']
    """

    def __init__(
        self,
        lambda_mult: float = DEFAULT_LAMBDA,
        top_n: int | None = None,
        fetch_k: int | None = None,
        vectors: VectorLookup | None = None,
    ) -> None:
        if not 0.0 <= lambda_mult <= 1.0:
            raise ValueError(f"MMR lambda_mult must be in [0, 1] (1: relevance only), got {lambda_mult}")
        for name, value in (("top_n", top_n), ("fetch_k", fetch_k)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"MMR {name} must be a positive integer or None, got {value!r}")
        self.lambda_mult = lambda_mult
        self.top_n = top_n
        self.fetch_k = fetch_k
        self.vectors = vectors

    def use_vectors(self, lookup: VectorLookup) -> None:
        """Use the stored chunk vectors (unless vectors were given already)."""
        if self.vectors is None:
            self.vectors = lookup

    def fetch_size(self, top_k: int) -> int:
        """Candidates to retrieve: `fetch_k`, else twice the results kept."""
        keep = self.top_n or top_k
        return max(keep, self.fetch_k or DEFAULT_FETCH_FACTOR * keep)

    def process(self, query: str, results: list[RetrievalResult]) -> list[RetrievalResult]:
        """`top_n` results (all when None), diverse first."""
        return self.select(query, results, self.top_n or len(results))

    def select(self, query: str, results: list[RetrievalResult], top_k: int) -> list[RetrievalResult]:
        """The `top_n` (else `top_k`) results MMR picks, in the order picked."""
        keep = min(self.top_n or top_k, len(results))
        if keep <= 0:
            return []
        order = mmr_order(relevance(results), self.similarity(results), self.lambda_mult, keep)
        return [results[i] for i in order]

    def similarity(self, results: list[RetrievalResult]) -> np.ndarray:
        """Pairwise similarity of the results: vector cosine when all have vectors, else token overlap."""
        if self.vectors is not None and results:
            rows, present = self.vectors([r.chunk.chunk_id for r in results])
            if len(rows) == len(results) and bool(np.all(present)):
                unit = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
                return np.asarray(unit @ unit.T, dtype=np.float64)
        return token_overlap([r.chunk.text for r in results])

    def __repr__(self) -> str:
        return f"MMR(lambda_mult={self.lambda_mult}, top_n={self.top_n}, fetch_k={self.fetch_k})"


def relevance(results: list[RetrievalResult]) -> np.ndarray:
    """Upstream relevance in [0, 1], best first (see the module docstring).

    >>> from ragspine.testing.reranker import results
    >>> relevance(results(["PUBLIC"] * 3)).round(2).tolist()
    [1.0, 0.49, 0.0]
    """
    n = len(results)
    scores = np.array([r.fused_score for r in results], dtype=np.float64)
    if n > 1 and bool(np.all(np.diff(scores) <= 0)) and scores[0] > scores[-1]:
        return np.asarray((scores - scores[-1]) / (scores[0] - scores[-1]))
    return np.asarray(1.0 - np.arange(n) / max(n - 1, 1))


def token_overlap(texts: list[str]) -> np.ndarray:
    """Jaccard overlap of the texts' token sets (1.0 on the diagonal).

    >>> token_overlap(["revenue fell", "revenue fell sharply", "sunny"]).round(2).tolist()
    [[1.0, 0.67, 0.0], [0.67, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    sets = [set(tokenize(t)) for t in texts]
    vocabulary = {token: i for i, token in enumerate(sorted(set().union(*sets)))}
    incidence = np.zeros((len(sets), len(vocabulary)), dtype=np.float32)
    for row, tokens in enumerate(sets):
        incidence[row, [vocabulary[t] for t in tokens]] = 1.0
    shared = incidence @ incidence.T
    sizes = incidence.sum(axis=1)
    union = sizes[:, None] + sizes[None, :] - shared
    sim = np.divide(shared, union, out=np.zeros_like(shared), where=union > 0).astype(np.float64)
    np.fill_diagonal(sim, 1.0)
    return sim


def mmr_order(rel: np.ndarray, sim: np.ndarray, lambda_mult: float, keep: int) -> list[int]:
    """Greedy MMR: indexes in the order picked; a tie goes to the lower index.

    >>> mmr_order(np.array([1.0, 0.9, 0.5]), np.array([[1, .95, 0], [.95, 1, 0], [0, 0, 1.]]), 0.5, 2)
    [0, 2]
    """
    n = len(rel)
    picked: list[int] = []
    closest = np.full(n, -np.inf)  # max similarity to a picked result
    left = np.ones(n, dtype=bool)
    for _ in range(min(keep, n)):
        penalty = np.where(np.isfinite(closest), closest, 0.0)
        score = np.where(left, lambda_mult * rel - (1.0 - lambda_mult) * penalty, -np.inf)
        best = int(np.argmax(score))  # argmax returns the first of equal maxima
        picked.append(best)
        left[best] = False
        closest = np.maximum(closest, sim[best])
    return picked

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

from collections.abc import Callable

import numpy as np

from ragspine.retrieval.lexical.tokenize import tokenize
from ragspine.retrieval.postprocess.protocol import VectorLookup
from ragspine.retrieval.types import RetrievalResult

SimilarityRows = Callable[[int], np.ndarray]
DEFAULT_LAMBDA = 0.7
DEFAULT_FETCH_FACTOR = 2  # candidates retrieved per result kept, when the retriever asks
_TOKEN_CACHE_MAX = 50_000  # chunks whose token sets an MMR keeps between queries


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
        self._tokens: dict[str, tuple[str, list[str]]] = {}

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

    def similarity(self, results: list[RetrievalResult]) -> SimilarityRows:
        """Row i: the similarity of result i to every result. Vector cosine when all have
        vectors, else token overlap."""
        if self.vectors is not None and results:
            rows, present = self.vectors([r.chunk.chunk_id for r in results])
            if len(rows) == len(results) and bool(np.all(present)):
                unit = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
                return lambda i: np.asarray(unit @ unit[i], dtype=np.float64)
        return TokenOverlap([self._token_set(r) for r in results]).row

    def _token_set(self, result: RetrievalResult) -> list[str]:
        """The chunk's distinct tokens, sorted; cached by chunk_id (an id's text never changes)."""
        key = result.chunk.chunk_id
        tokens = self._tokens.get(key)
        if tokens is None or tokens[0] != result.chunk.text:
            if len(self._tokens) >= _TOKEN_CACHE_MAX:
                self._tokens.clear()
            tokens = self._tokens[key] = (result.chunk.text, sorted(set(tokenize(result.chunk.text))))
        return tokens[1]

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


class TokenOverlap:
    """Jaccard overlap of the texts' token sets (texts, or their sorted distinct tokens), one row at a time (an inverted list per token,
    so a row costs the postings of its tokens, not the square of the number of texts).

    >>> t = TokenOverlap(["revenue fell", "revenue fell sharply", "sunny"])
    >>> [t.row(i).round(2).tolist() for i in range(3)]
    [[1.0, 0.67, 0.0], [0.67, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """

    def __init__(self, texts: list[str] | list[list[str]]) -> None:
        self.sets = [sorted(set(tokenize(t))) if isinstance(t, str) else t for t in texts]
        postings: dict[str, list[int]] = {}
        for row, tokens in enumerate(self.sets):
            for token in tokens:
                postings.setdefault(token, []).append(row)
        self.postings = {token: np.asarray(rows, dtype=np.int64) for token, rows in postings.items()}
        self.sizes = np.array([len(tokens) for tokens in self.sets], dtype=np.float64)

    def row(self, i: int) -> np.ndarray:
        n = len(self.sets)
        hits = [self.postings[t] for t in self.sets[i]]
        shared = np.bincount(np.concatenate(hits), minlength=n).astype(np.float64) if hits else np.zeros(n)
        union = self.sizes + self.sizes[i] - shared
        sim = np.divide(shared, union, out=np.zeros(n), where=union > 0)
        sim[i] = 1.0
        return sim


def mmr_order(rel: np.ndarray, sim: SimilarityRows, lambda_mult: float, keep: int) -> list[int]:
    """Greedy MMR: indexes in the order picked; a tie goes to the lower index. `sim(i)` is the
    similarity of item i to every item.

    >>> m = np.array([[1, .95, 0], [.95, 1, 0], [0, 0, 1.]])
    >>> mmr_order(np.array([1.0, 0.9, 0.5]), lambda i: m[i], 0.5, 2)
    [0, 2]
    """
    n = len(rel)
    picked: list[int] = []
    closest = np.zeros(n)  # max similarity to a picked result (0 before the first pick)
    left = np.ones(n, dtype=bool)
    for _ in range(min(keep, n)):
        score = np.where(left, lambda_mult * rel - (1.0 - lambda_mult) * closest, -np.inf)
        best = int(np.argmax(score))  # argmax returns the first of equal maxima
        picked.append(best)
        left[best] = False
        closest = sim(best) if len(picked) == 1 else np.maximum(closest, sim(best))
    return picked

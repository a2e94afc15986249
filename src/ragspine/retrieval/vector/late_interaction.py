"""Late interaction (ColBERT's MaxSim): the one scorer the ColBERT reranker and the visual
(ColPali-style) layer share.

Invariant: `maxsim(q, d)` = Σ over query vectors of the largest dot product with any document
vector; rows are used as given (normalise them first for cosine, as ColBERT does). An empty query
scores 0.0; an empty document scores 0.0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def maxsim(query: np.ndarray, document: np.ndarray) -> float:
    """MaxSim of (q, dim) query vectors against (m, dim) document vectors.

    >>> q = np.array([[1.0, 0.0], [0.0, 1.0]]); d = np.array([[0.5, 0.5], [1.0, 0.0]])
    >>> maxsim(q, d)
    1.5
    """
    q, d = np.asarray(query, dtype=np.float32), np.asarray(document, dtype=np.float32)
    if q.ndim != 2 or d.ndim != 2 or (len(q) and len(d) and q.shape[1] != d.shape[1]):
        raise ValueError(f"maxsim needs (q, dim) and (m, dim) arrays, got {q.shape} and {d.shape}")
    if not len(q) or not len(d):
        return 0.0
    return float((q @ d.T).max(axis=1).sum())


def maxsim_scores(query: np.ndarray, documents: Sequence[np.ndarray]) -> list[float]:
    """`maxsim(query, d)` for each document, in order."""
    return [maxsim(query, d) for d in documents]

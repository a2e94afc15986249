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


def maxsim_packed(query: np.ndarray, rows: np.ndarray, offsets: Sequence[int] | np.ndarray) -> np.ndarray:
    """`maxsim(query, rows[offsets[i]:offsets[i + 1]])` for every document i, from one matrix
    product: the documents' vectors are packed one after another in `rows` and `offsets` (length
    documents + 1, starting at 0, non-decreasing, ending at len(rows)) says where each lies.
    Rows of any float dtype (e.g. float16) are scored in float32. An empty document scores 0.0.

    >>> q = np.array([[1.0, 0.0], [0.0, 1.0]]); rows = np.array([[0.5, 0.5], [1.0, 0.0], [0.0, 2.0]])
    >>> maxsim_packed(q, rows, [0, 2, 3]).tolist()
    [1.5, 2.0]
    """
    q = np.asarray(query, dtype=np.float32)
    bounds = np.asarray(offsets, dtype=np.int64)
    if q.ndim != 2 or rows.ndim != 2 or (len(q) and len(rows) and q.shape[1] != rows.shape[1]):
        raise ValueError(f"maxsim_packed needs (q, dim) and (m, dim) arrays, got {q.shape} and {rows.shape}")
    if bounds.ndim != 1 or not len(bounds) or bounds[0] != 0 or bounds[-1] != len(rows) or np.any(np.diff(bounds) < 0):
        raise ValueError(f"offsets must run from 0 to {len(rows)} without going down, got {bounds.tolist()[:8]}...")
    out = np.zeros(len(bounds) - 1, dtype=np.float32)
    if not len(q) or not len(rows):
        return out
    sims = np.asarray(rows, dtype=np.float32) @ q.T  # (m, q): the rows stay contiguous
    filled = np.flatnonzero(np.diff(bounds) > 0)
    best = np.maximum.reduceat(sims, bounds[filled], axis=0)  # (filled documents, q)
    out[filled] = best.sum(axis=1)
    return out

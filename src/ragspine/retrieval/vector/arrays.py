"""Small numpy helpers shared by the embedding backends and the vector stores.

Invariants: `as_matrix` returns a C-contiguous float32 matrix of shape (n, dim) or raises
ValueError naming what is wrong (ragged rows, wrong dimension, NaN or infinity); `unit_rows`
scales every non-zero row to length 1 and leaves all-zero rows all zero (their cosine with
anything is 0.0, as in `ragspine.retrieval.pipeline.hybrid.cosine`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

FloatMatrix = np.ndarray  # (n, dim) float32


def as_matrix(vectors: Any, *, dim: int | None = None, what: str = "vectors") -> FloatMatrix:
    """`vectors` (a sequence of equal-length float sequences, or a 2-D array) as float32 (n, dim).

    An empty input gives shape (0, dim) (dim 0 when unknown).
    """
    if isinstance(vectors, np.ndarray):
        matrix = vectors
    else:
        rows = list(vectors)
        if not rows:
            return np.zeros((0, dim or 0), dtype=np.float32)
        try:
            lengths = {len(row) for row in rows}
        except TypeError:
            raise ValueError(f"{what} must be a list of vectors (lists of numbers)") from None
        if len(lengths) > 1:
            raise ValueError(f"{what} have different lengths: {sorted(lengths)}")
        try:
            matrix = np.asarray(rows, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{what} must hold only numbers") from None
    if matrix.ndim != 2:
        raise ValueError(f"{what} must be a list of vectors (a 2-D array), got shape {matrix.shape}")
    if matrix.shape[0] and not np.isfinite(matrix).all():
        raise ValueError(f"{what} contain NaN or infinity")
    if matrix.shape[0] and matrix.shape[1] == 0:
        raise ValueError(f"{what} are empty (dimension 0)")
    if dim is not None and matrix.shape[0] and matrix.shape[1] != dim:
        raise ValueError(f"{what} have dimension {matrix.shape[1]}, expected {dim}")
    return np.ascontiguousarray(matrix, dtype=np.float32)


def as_vector(vector: Any, *, dim: int | None = None, what: str = "query vector") -> np.ndarray:
    """One vector as float32 (dim,), with the same checks as `as_matrix`."""
    try:
        array = np.asarray(vector, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a flat list of numbers") from None
    if array.ndim != 1 or array.shape[0] == 0:
        raise ValueError(f"{what} must be a non-empty flat list of numbers, got shape {array.shape}")
    row: np.ndarray = as_matrix(array[None, :], dim=dim, what=what)[0]
    return row


def unit_rows(matrix: FloatMatrix) -> FloatMatrix:
    """Each row divided by its L2 norm; all-zero rows stay zero. Returns float32."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: np.ndarray = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    return unit


def unit_vector(vector: Any, *, dim: int | None = None, what: str = "query vector") -> np.ndarray:
    """One vector checked as `as_vector` checks it, scaled to length 1 (all zeros stay zeros).

    >>> unit_vector([3.0, 4.0]).tolist()
    [0.6000000238418579, 0.800000011920929]
    """
    unit: np.ndarray = unit_rows(as_vector(vector, dim=dim, what=what)[None, :])[0]
    return unit


def to_lists(matrix: FloatMatrix) -> list[list[float]]:
    """The `EmbeddingBackend` return shape: one list of Python floats per row."""
    rows: list[list[float]] = np.asarray(matrix, dtype=np.float32).tolist()
    return rows


def batches(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    """`items` cut into consecutive slices of at most `size` (size >= 1)."""
    if size < 1:
        raise ValueError(f"batch size must be at least 1, got {size}")
    return [items[i : i + size] for i in range(0, len(items), size)]


def length_batches(lengths: Sequence[int], max_items: int | None, budget: int) -> list[list[int]]:
    """Indices of items cut into batches by length, shortest first: a batch holds at most
    `max_items` items (None: no cap), and adds an item only while (items + 1) × that item's
    length (the longest so far: lengths ascend) stays within `budget`; an item longer than
    `budget` goes alone. Padding to a batch's longest item then wastes little, and long items
    come in smaller batches. Equal lengths keep their order; every index appears once. (The
    e5 backend batches texts by characters with it; the BERT engines group token ids by it.)

    >>> length_batches([5, 1, 3, 1, 9], max_items=2, budget=100)
    [[1, 3], [2, 0], [4]]
    >>> length_batches([10, 10, 10, 60], max_items=8, budget=40)
    [[0, 1, 2], [3]]
    """
    if (max_items is not None and max_items < 1) or budget < 1:
        raise ValueError(f"max_items and budget must be at least 1, got {max_items} and {budget}")
    cap = len(lengths) if max_items is None else max_items
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    out: list[list[int]] = []
    batch: list[int] = []
    for i in order:
        if batch and (len(batch) >= cap or (len(batch) + 1) * max(1, lengths[i]) > budget):
            out.append(batch)
            batch = []
        batch.append(i)
    if batch:
        out.append(batch)
    return out

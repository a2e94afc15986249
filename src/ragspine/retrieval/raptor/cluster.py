"""Deterministic threshold clustering of unit vectors, built once or updated in place.

Invariants: members are visited in sorted id order; each joins the cluster whose centroid
(the unit mean of its members) is most similar, when that cosine is at least `threshold` and
the cluster has fewer than `max_size` members, else it starts a new cluster; ties go to the
older cluster. No randomness: the same clusters, vectors and changes give the same result.
An update removes the given members (their clusters are touched; an emptied cluster is gone)
and then places the added ones, so only the clusters a change reaches are touched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

_BLOCK = 64  # members compared with the centroids in one matrix product


def update_clusters(
    clusters: dict[str, list[str]],
    vectors: Mapping[str, np.ndarray],
    *,
    remove: Iterable[str] = (),
    add: Sequence[str] = (),
    threshold: float,
    max_size: int,
    new_id: Callable[[], str],
) -> set[str]:
    """Apply the change to `clusters` (id -> member ids, changed in place); return the ids of the
    clusters touched (created, changed or gone).

    >>> v = {"a": np.array([1.0, 0.0]), "b": np.array([0.99, 0.14]), "c": np.array([0.0, 1.0])}
    >>> ids = iter(["k1", "k2", "k3"]); clusters: dict[str, list[str]] = {}
    >>> sorted(update_clusters(clusters, v, add=["c", "a", "b"], threshold=0.9, max_size=8, new_id=lambda: next(ids)))
    ['k1', 'k2']
    >>> clusters
    {'k1': ['a', 'b'], 'k2': ['c']}
    >>> update_clusters(clusters, v, remove=["c"], threshold=0.9, max_size=8, new_id=lambda: next(ids)), clusters
    ({'k2'}, {'k1': ['a', 'b']})
    """
    touched: set[str] = set()
    owner = {m: c for c, members in clusters.items() for m in members}
    for member in sorted(set(remove)):
        cluster = owner.pop(member, None)
        if cluster is not None:
            clusters[cluster].remove(member)
            touched.add(cluster)
    for cluster in list(touched):
        if not clusters[cluster]:
            del clusters[cluster]
    pending = [m for m in sorted(set(add)) if m not in owner]
    if not pending:
        return touched
    order = sorted(clusters)
    dim = len(vectors[pending[0]])
    sums = np.zeros((len(order) + len(pending), dim), dtype=np.float64)
    sizes = np.zeros(len(order) + len(pending), dtype=np.int64)
    for row, cluster in enumerate(order):
        sums[row] = np.sum([vectors[m] for m in clusters[cluster]], axis=0)
        sizes[row] = len(clusters[cluster])
    centroids = np.zeros_like(sums)
    centroids[: len(order)] = _unit(sums[: len(order)])
    count = len(order)
    for first in range(0, len(pending), _BLOCK):
        block = pending[first : first + _BLOCK]
        matrix = np.asarray([vectors[m] for m in block], dtype=np.float64)
        # Similarities to the centroids as they are at the block's start, in one product; a
        # centroid changed (or made) inside the block is compared again exactly, below.
        start_count = count
        at_start = matrix @ centroids[:start_count].T
        at_start[:, sizes[:start_count] >= max_size] = -np.inf
        dirty: list[int] = []
        for j, member in enumerate(block):
            vector = matrix[j]
            sims = np.empty(count)
            sims[:start_count] = at_start[j]
            if dirty:
                rows = np.asarray(dirty)
                sims[rows] = np.where(sizes[rows] >= max_size, -np.inf, centroids[rows] @ vector)
            row = int(np.argmax(sims)) if count else -1
            if row < 0 or sims[row] < threshold:
                row, count = count, count + 1
                order.append(new_id())
                clusters[order[row]] = []
            clusters[order[row]].append(member)
            sums[row] += vector
            sizes[row] += 1
            centroids[row] = _unit(sums[row : row + 1])[0]
            if row not in dirty:
                dirty.append(row)
            touched.add(order[row])
    return touched


def centroid(vectors: Sequence[np.ndarray]) -> np.ndarray:
    """The unit mean of `vectors` (float32)."""
    return _unit(np.sum(np.asarray(vectors, dtype=np.float64), axis=0, keepdims=True))[0].astype(np.float32)


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)

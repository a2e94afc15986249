"""RESTRICTED exit #1 for every reranker, in one place.

Invariants: only the first `top_n` results are reordered; a RESTRICTED candidate is never given
to the reranker and keeps its position; with fewer than two open candidates the reranker is not
called; an exception or an answer that is not a permutation keeps the incoming (fused) order and
is logged. `rerank_head` never raises and never adds, drops or duplicates a result.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.types import RetrievalResult

DEFAULT_TOP_N = 10
_LOG = logging.getLogger(__name__)

Order = Callable[[str, list[str]], list[int]]


def rerank_head(
    query: str,
    results: Sequence[RetrievalResult],
    order: Order,
    *,
    top_n: int = DEFAULT_TOP_N,
    name: str = "reranker",
) -> list[RetrievalResult]:
    """`results` with the open members of its first `top_n` reordered by `order(query, texts)`.

    >>> from ragspine.retrieval.model import Chunk
    >>> rs = [RetrievalResult(Chunk(f"c{i}", "d", i, t, "d"), 0.0, None, 1.0 / (i + 1))
    ...       for i, t in enumerate(["a", "b", "c"])]
    >>> [r.chunk.chunk_id for r in rerank_head("q", rs, lambda q, texts: [2, 1, 0])]
    ['c2', 'c1', 'c0']
    """
    ranked = list(results)
    head = ranked[: max(top_n, 0)]
    open_slots = [i for i, r in enumerate(head) if not is_restricted(r.chunk.sensitivity)]
    if len(open_slots) < 2:
        return ranked
    candidates = [head[i].chunk.text for i in open_slots]
    try:
        permutation = list(order(query, candidates))
        if sorted(permutation) != list(range(len(candidates))):
            raise ValueError(f"returned {permutation!r}, not a permutation of {len(candidates)}")
    except Exception as exc:  # noqa: BLE001 - any reranker failure keeps the fused order
        _LOG.warning("%s failed (%s); keeping the fused order", name, exc)
        return ranked
    reordered = [head[open_slots[j]] for j in permutation]
    for slot, result in zip(open_slots, reordered, strict=True):
        ranked[slot] = result
    return ranked

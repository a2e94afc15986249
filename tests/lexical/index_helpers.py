"""Shared helpers of the lexical index tests: the reference ranking and its comparison."""

from __future__ import annotations

import math

from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.lexical.bm25 import bm25_scores
from ragspine.retrieval.lexical.tokenize import tokenize

REL = 1e-9


def reference_scores(
    store: ChunkStore, query: str, analyzer=tokenize, **filters: str
) -> dict[str, float]:
    """chunk_id → bm25_scores over the store's active chunks (statistics over all of them),
    for chunks that share a token with the query and match every filter."""
    active = store.iter_chunks()
    scores = bm25_scores(analyzer(query), [analyzer(c.text) for c in active])
    return {
        c.chunk_id: s
        for c, s in zip(active, scores, strict=True)
        if s > 0 and all(getattr(c, k) == v for k, v in filters.items())
    }


def ranked(scores: dict[str, float], k: int) -> list[tuple[str, float]]:
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL, abs_tol=0.0)


def assert_same_scores(got: dict[str, float], expected: dict[str, float]) -> None:
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert close(got[key], value), (key, got[key], value)


def assert_same_ranking(got: list[tuple[str, float]], expected: list[tuple[str, float]]) -> None:
    """Same length, same scores position by position; ids equal except among exact-score ties
    that float rounding may order either way."""
    assert len(got) == len(expected), (got, expected)
    for (gid, gs), (eid, es) in zip(got, expected, strict=True):
        assert close(gs, es), (got, expected)
        if gid != eid:
            assert any(i == gid and close(s, es) for i, s in expected) or close(gs, es)

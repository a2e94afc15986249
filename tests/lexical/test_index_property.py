"""Property: over any sequence of ingests, replacements and withdrawals (from this process or
another store handle, with the index reopened from disk in between), the index's scores equal
`bm25_scores` over the active chunks, and retrieval ranks as the reference does."""

from __future__ import annotations

import tempfile
from pathlib import Path
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.lexical.bm25 import DEFAULT_BM25_B, DEFAULT_BM25_K1
from ragspine.retrieval.lexical.index import scoring, snapshot, store_index
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.lexical.tokenize import tokenize

from index_helpers import assert_same_ranking, assert_same_scores, ranked, reference_scores

WORDS = ["alpha", "beta", "gamma", "delta", "营收", "下滑", "出口减少", "café", "москва", "3.5"]
DOCS = ["d1", "d2", "d3", "d4"]
TOPICS = ["", "t1", "t2"]

paragraph = st.lists(st.sampled_from(WORDS), min_size=0, max_size=8).map(" ".join)
text = st.lists(paragraph, min_size=1, max_size=4).map("\n\n".join)
query = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
op = st.one_of(
    st.tuples(st.just("ingest"), st.sampled_from(DOCS), text, st.sampled_from(TOPICS)),
    st.tuples(st.just("withdraw"), st.sampled_from(DOCS)),
    st.tuples(st.just("external"), st.sampled_from(DOCS), text, st.sampled_from(TOPICS)),
    st.tuples(st.just("reopen")),
    st.tuples(st.just("check"), query),
)


def _open(path: Path) -> tuple[ChunkStore, NarrativeIndex]:
    store = ChunkStore(path)
    store.init_schema()
    return store, NarrativeIndex(store, max_chars=40, overlap_chars=0)


def _check(store: ChunkStore, index: NarrativeIndex, q: str) -> None:
    expected = reference_scores(store, q)
    snap = index.lexical_index.snapshot()
    positions, scores = snap.scores(tokenize(q), k1=DEFAULT_BM25_K1, b=DEFAULT_BM25_B)
    got = {snap.chunk_id(p): s for p, s in zip(positions.tolist(), scores.tolist(), strict=True)}
    assert_same_scores(got, expected)
    for k in (1, 3, 50):
        results = index.retrieve(q, top_k=k, rerank=False)
        assert_same_ranking([(r.chunk.chunk_id, r.bm25_score) for r in results], ranked(expected, k))
    filtered = reference_scores(store, q, topic="t1")
    results = index.retrieve(q, topic="t1", top_k=50, rerank=False)
    assert_same_ranking([(r.chunk.chunk_id, r.bm25_score) for r in results], ranked(filtered, 50))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(op, min_size=1, max_size=14),
    final=query,
    compact=st.booleans(),
    prune=st.booleans(),
)
def test_index_scores_equal_reference_over_any_history(
    ops: list[tuple], final: str, compact: bool, prune: bool
) -> None:
    # Small stores compact on every update unless told not to; pruning starts only past a
    # postings budget unless the budget is 0: draw both ways, so every path is exercised.
    with (
        mock.patch.object(store_index, "COMPACT_SHARE", 0.25 if compact else 1e9),
        mock.patch.object(store_index, "MAX_SEGMENTS", 8 if compact else 3),
        mock.patch.object(snapshot, "EXHAUSTIVE_MAX", 200_000 if not prune else 0),
        mock.patch.object(scoring, "_ESSENTIAL_MIN", 2048 if not prune else 0),
        mock.patch.object(scoring, "_ESSENTIAL_SHARE", 1 / 16 if not prune else 0.0),
    ):
        _run(ops, final)


def _run(ops: list[tuple], final: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chunks.db"
        store, index = _open(path)
        try:
            for step in ops:
                kind = step[0]
                if kind == "ingest":
                    index.ingest(step[2], DocumentMeta(step[1], topic=step[3]))
                elif kind == "withdraw":
                    index.withdraw(step[1])
                elif kind == "external":
                    other, other_index = _open(path)
                    try:
                        other_index.ingest(step[2], DocumentMeta(step[1], topic=step[3]))
                    finally:
                        other.close()
                elif kind == "reopen":
                    had_files = index.lexical_index.loaded
                    store.close()
                    store, index = _open(path)
                    index.retrieve("alpha", rerank=False)
                    if had_files:
                        assert index.lexical_index.stats["builds"] == 0
                        assert index.lexical_index.stats["loads"] == 1
                else:
                    _check(store, index, step[1])
            _check(store, index, final)
        finally:
            store.close()

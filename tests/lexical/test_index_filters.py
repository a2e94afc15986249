"""A metadata filter restricts which chunks are scored, before scoring; it never changes the
statistics (N, df, avgdl stay those of every active chunk)."""

from __future__ import annotations

from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.model import Chunk, DocumentMeta
from ragspine.retrieval.lexical.bm25 import bm25_scores
from ragspine.retrieval.pipeline.hybrid import HybridRetriever
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.lexical.tokenize import tokenize

from index_helpers import assert_same_ranking, close, ranked, reference_scores


def _chunks() -> list[Chunk]:
    rows = [
        ("a", "ACME", "营收下滑 exports fell"),
        ("b", "ACME", "营收 grew"),
        ("c", "LOTUS", "营收下滑 营收下滑 exports"),
        ("d", "LOTUS", "unrelated text"),
    ]
    return [Chunk(f"{d}:0", d, 0, text, f"{d}#p1@0-1", entity=e) for d, e, text in rows]


def test_filtered_scores_use_unfiltered_statistics() -> None:
    chunks = _chunks()
    full = bm25_scores(tokenize("营收下滑 exports"), [tokenize(c.text) for c in chunks])
    results = HybridRetriever(chunks).search("营收下滑 exports", entity="ACME")
    assert {r.chunk.doc_id for r in results} == {"a", "b"}
    for r in results:
        assert close(r.bm25_score, full[chunks.index(r.chunk)])


def test_an_unknown_filter_value_gives_nothing() -> None:
    assert HybridRetriever(_chunks()).search("营收", entity="NOBODY") == []


def test_store_filters_match_the_reference(store: ChunkStore) -> None:
    index = NarrativeIndex(store)
    for chunk in _chunks():
        index.ingest(chunk.text, DocumentMeta(chunk.doc_id, entity=chunk.entity, topic="t"))
    for entity in ("ACME", "LOTUS"):
        got = [
            (r.chunk.chunk_id, r.bm25_score)
            for r in index.retrieve("营收下滑 exports", entity=entity, topic="t", rerank=False)
        ]
        expected = reference_scores(store, "营收下滑 exports", entity=entity)
        assert_same_ranking(got, ranked(expected, 50))
    assert index.retrieve("营收", topic="other", rerank=False) == []

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragspine.retrieval.model import Chunk
from ragspine.retrieval.lexical.retrieval import (
    DEFAULT_BM25_B,
    DEFAULT_BM25_K1,
    DEFAULT_RRF_K,
    DEFAULT_TOP_K,
    EmbeddingBackend,
    HybridRetriever,
    QueryRewriter,
    RetrievalResult,
    bm25_scores,
    rrf_fuse,
    tokenize,
)


def _chunk(cid: str, text: str, **meta: str) -> Chunk:
    return Chunk(cid, cid.split(":")[0], 0, text, f"{cid}#p1@0-{len(text)}", **meta)


def test_constants() -> None:
    assert (DEFAULT_BM25_K1, DEFAULT_BM25_B, DEFAULT_RRF_K, DEFAULT_TOP_K) == (1.5, 0.75, 60, 50)


def test_tokenize_ascii_runs_and_cjk_uni_bigrams() -> None:
    assert tokenize("Hello, World-42!") == ["hello", "world", "42"]
    assert tokenize("营收下滑") == ["营", "收", "下", "滑", "营收", "收下", "下滑"]
    assert tokenize("ACME营收") == ["acme", "营", "收", "营收"]
    assert tokenize("营 收") == ["营", "收"], "bigrams never span a break"
    assert tokenize("") == [] and tokenize("，。！ ...") == []


def test_tokenize_other_scripts_and_full_width() -> None:
    assert tokenize("Ｒｅｖｅｎｕｅ　２０２４") == ["revenue", "2024"]
    assert tokenize("naïve café") == ["naïve", "café"]
    assert tokenize("Выручка выросла") == ["выручка", "выросла"]
    assert tokenize("Αύξηση") == ["αύξηση"]
    assert tokenize("매출 증가") == ["매출", "증가"]
    assert tokenize("カタカナ") == ["カ", "タ", "カ", "ナ", "カタ", "タカ", "カナ"]
    assert tokenize("1,234.5 and 3.5%") == ["1,234.5", "and", "3.5"]
    assert tokenize("snake_case") == ["snake", "case"]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_tokenize_accepts_any_unicode(text: str) -> None:
    tokens = tokenize(text)
    assert all(isinstance(t, str) and t and not t.isspace() for t in tokens)


def _reference(query: list[str], docs: list[list[str]], k1: float = 1.5, b: float = 0.75) -> list[float]:
    n = len(docs)
    avgdl = sum(map(len, docs)) / n
    out = []
    for doc in docs:
        score = 0.0
        for term in query:
            df = sum(1 for d in docs if term in d)
            tf = doc.count(term)
            if tf:
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(doc) / avgdl))
        out.append(score)
    return out


def test_bm25_scores_match_the_okapi_formula() -> None:
    docs = [["a", "b", "a"], ["b", "c"], ["d"], []]
    for query in (["a"], ["b", "a"], ["a", "a"], ["z"], []):
        assert bm25_scores(query, docs) == pytest.approx(_reference(query, docs))
    assert bm25_scores(["a"], docs, k1=0.9, b=0.4) == pytest.approx(_reference(["a"], docs, 0.9, 0.4))
    assert bm25_scores(["a"], []) == []
    assert bm25_scores(["a"], [[], []]) == [0.0, 0.0]


def test_rrf_fuse() -> None:
    fused = rrf_fuse([["a", "b", "c"], ["c", "a"]])
    assert fused == pytest.approx({"a": 1 / 61 + 1 / 62, "b": 1 / 62, "c": 1 / 63 + 1 / 61})
    assert rrf_fuse([["x"]], k=0) == {"x": 1.0}
    assert rrf_fuse([]) == {}


def test_search_ranks_by_bm25_and_skips_chunks_without_query_terms() -> None:
    chunks = [
        _chunk("a:0", "营收下滑 营收下滑 原因"),
        _chunk("b:0", "营收增长"),
        _chunk("c:0", "completely unrelated"),
    ]
    results = HybridRetriever(chunks).search("营收下滑")
    assert [r.chunk.chunk_id for r in results] == ["a:0", "b:0"]
    assert all(isinstance(r, RetrievalResult) and r.vector_score is None for r in results)
    expected = bm25_scores(tokenize("营收下滑"), [tokenize(c.text) for c in chunks])
    assert [r.bm25_score for r in results] == pytest.approx(expected[:2])
    assert results[0].fused_score == pytest.approx(1 / 61)


def test_filters_restrict_candidates_but_not_statistics() -> None:
    chunks = [
        _chunk("a:0", "revenue fell", entity="ACME", period="2024"),
        _chunk("b:0", "revenue rose sharply", entity="ACME", period="2023"),
        _chunk("c:0", "revenue", entity="OTHER", period="2024"),
    ]
    retriever = HybridRetriever(chunks)
    filtered = retriever.search("revenue", entity="ACME", period="2024")
    assert [r.chunk.chunk_id for r in filtered] == ["a:0"]
    unfiltered = {r.chunk.chunk_id: r.bm25_score for r in retriever.search("revenue")}
    assert filtered[0].bm25_score == pytest.approx(unfiltered["a:0"])
    assert retriever.search("revenue", entity="NOBODY") == []
    assert [r.chunk.chunk_id for r in retriever.search("revenue", topic="")] == ["c:0", "a:0", "b:0"]


def test_ties_break_by_chunk_id() -> None:
    chunks = [_chunk(f"{name}:0", "same words here") for name in ("d", "b", "c", "a")]
    results = HybridRetriever(chunks).search("words")
    assert [r.chunk.chunk_id for r in results] == ["a:0", "b:0", "c:0", "d:0"]


def test_top_k_and_bad_input() -> None:
    chunks = [_chunk(f"d{i}:0", f"word {'x ' * i}") for i in range(10)]
    retriever = HybridRetriever(chunks)
    assert len(retriever.search("word", top_k=3)) == 3
    assert len(retriever.search("word")) == 10
    for bad in ("", "   "):
        with pytest.raises(ValueError, match="empty"):
            retriever.search(bad)
    with pytest.raises(ValueError, match="top_k"):
        retriever.search("word", top_k=0)
    with pytest.raises(ValueError, match="unique"):
        HybridRetriever([chunks[0], chunks[0]])


class _Rewriter:
    def rewrite(self, query: str) -> list[str]:
        return [query, "revenue"]


def test_query_variants_are_fused_by_rrf() -> None:
    chunks = [_chunk("a:0", "营收 下滑"), _chunk("b:0", "revenue fell")]
    assert isinstance(_Rewriter(), QueryRewriter)
    results = HybridRetriever(chunks, query_rewriter=_Rewriter()).search("营收")
    assert [r.chunk.chunk_id for r in results] == ["a:0", "b:0"]
    assert results[0].fused_score == pytest.approx(results[1].fused_score)  # both rank 1 once


class _CountingBackend:
    """A tiny hand-made embedding (test-only mock: users plug a real model)."""

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        self.embedded.extend(texts)
        return [[float("cat" in t), float("dog" in t), 1.0] for t in texts]


def test_vector_channel_embeds_chunks_once_and_ranks_only_the_filtered_set() -> None:
    chunks = [
        _chunk("a:0", "a cat sat", entity="X"),
        _chunk("b:0", "a dog ran", entity="X"),
        _chunk("c:0", "cat food", entity="Y"),
    ]
    backend = _CountingBackend()
    assert isinstance(backend, EmbeddingBackend)
    retriever = HybridRetriever(chunks, embedding_backend=backend)
    assert backend.embedded == [], "chunk vectors are made lazily, per query"
    results = retriever.search("cat", entity="X")
    assert backend.embedded == ["a cat sat", "a dog ran", "cat"], "only the filter's survivors, then the query"
    assert [r.chunk.chunk_id for r in results] == ["a:0", "b:0"], "the filter applies to both channels"
    assert results[0].vector_score == pytest.approx(1.0)
    assert results[1].bm25_score == 0.0, "the vector channel can bring a chunk BM25 missed"
    before = len(backend.embedded)
    retriever.search("cat", entity="X")
    assert backend.embedded[before:] == ["cat"], "chunk vectors are kept; only the query is embedded"


def test_packaged_mark_table_equals_the_scan_of_this_unicode_database() -> None:
    """tokenize skips the import-time scan when Python's Unicode version is the table's."""
    import unicodedata

    from ragspine.retrieval.lexical.marks import UNICODE_VERSION, mark_ranges
    from ragspine.retrieval.lexical.tokenize import scan_mark_ranges

    if unicodedata.unidata_version != UNICODE_VERSION:
        pytest.skip(f"table is for Unicode {UNICODE_VERSION}; this Python has {unicodedata.unidata_version}")
    assert mark_ranges() == scan_mark_ranges()

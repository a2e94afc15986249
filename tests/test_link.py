from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragspine.agent.agent import LLMProvider, NarrativeRetriever
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.link.narrative_link import (
    RESTRICTED_SENSITIVITY,
    NarrativeIndexRetriever,
    ProviderListwiseJudge,
    build_narrative_retriever,
)
from ragspine.retrieval.rerank.listwise_rerank import listwise_rerank

SNIPPET_KEYS = {"text", "doc_id", "title", "source_locator", "chunk_id", "topic", "entity",
                "geography", "period", "language", "sensitivity", "scores"}  # fmt: skip


class RecordingProvider:
    """Stands in for an LLM endpoint (test-only): records prompts, replies with a ranking."""

    def __init__(self, reply: str = "[2] > [1]", fail: bool = False) -> None:
        self.prompts: list[str] = []
        self.reply, self.fail = reply, fail

    def chat(self, messages: list[dict[str, str]], **options: Any) -> str:
        self.prompts.append("\n".join(m["content"] for m in messages))
        if self.fail:
            raise TimeoutError("provider timed out")
        return self.reply


def _ingest(index: NarrativeIndex) -> None:
    index.ingest("艾克美中国营收下滑，原因是出口订单减少。", DocumentMeta("cn", title="CN report",
                 entity="ACME_CN", period="2024", sensitivity="PUBLIC"))  # fmt: skip
    index.ingest("艾克美香港营收增长。", DocumentMeta("hk", entity="ACME_HK", period="2024"))
    index.ingest("机密：营收下滑后的裁员计划 SECRETMARK。",
                 DocumentMeta("memo", entity="ACME_CN", sensitivity="RESTRICTED"))  # fmt: skip


def test_contracts_are_protocols() -> None:
    assert RESTRICTED_SENSITIVITY == "RESTRICTED"
    assert isinstance(RecordingProvider(), LLMProvider)
    retriever, store = build_narrative_retriever(":memory:")
    assert isinstance(retriever, NarrativeRetriever)
    store.close()


def test_snippets_carry_lineage_and_never_restricted(store: ChunkStore) -> None:
    index = NarrativeIndex(store)
    _ingest(index)
    raw = index.retrieve("营收下滑", include_restricted=True)
    assert "memo" in {r.chunk.doc_id for r in raw}, "the memo is a real match before the exit"
    assert "memo" not in {r.chunk.doc_id for r in index.retrieve("营收下滑")}, "masked before scoring"
    snippets = NarrativeIndexRetriever(index).retrieve("营收下滑")
    assert snippets and all(SNIPPET_KEYS <= set(s) for s in snippets)
    assert {s["doc_id"] for s in snippets} == {"cn", "hk"}
    assert all("SECRETMARK" not in s["text"] for s in snippets)
    top = snippets[0]
    assert top["doc_id"] == "cn" and top["title"] == "CN report" and top["period"] == "2024"
    assert set(top["scores"]) == {"bm25", "vector", "fused"} and top["scores"]["vector"] is None
    assert top["source_locator"].startswith("cn#p1@")


def test_filters_map_to_metadata_and_retry_once_without(store: ChunkStore) -> None:
    index = NarrativeIndex(store)
    _ingest(index)
    retriever = NarrativeIndexRetriever(index)
    snippets = retriever.retrieve("营收", filters={"entity": "ACME_HK"})
    assert {s["doc_id"] for s in snippets} == {"hk"}
    assert snippets[0]["lineage"] == {
        "filters": {"entity": "ACME_HK"}, "where": None, "extracted": None, "retried_without_filters": False,
    }
    retried = retriever.retrieve("营收", filters={"entity": "NOBODY"})
    assert {s["doc_id"] for s in retried} == {"cn", "hk"}
    assert retried[0]["lineage"]["retried_without_filters"] is True
    strict = NarrativeIndexRetriever(index, retry_without_filters=False)
    assert strict.retrieve("营收", filters={"entity": "NOBODY"}) == []


def test_the_results_say_which_filters_were_dropped(store: ChunkStore) -> None:
    index = NarrativeIndex(store)
    _ingest(index)
    retriever = NarrativeIndexRetriever(index)  # the specification's default: retry once without filters
    kept = retriever.retrieve("营收", filters={"entity": "ACME_HK"})
    assert kept and kept.filters_dropped == []
    retried = retriever.retrieve("营收", filters={"entity": "NOBODY"}, where={"period": {"gte": "2020"}})
    assert retried and retried.filters_dropped == ["entity", "period"]
    assert retriever.retrieve_run("营收", filters={"entity": "NOBODY"}).filters_dropped == ["entity"]
    assert retriever.retrieve("营收", filters={"entity": "NOBODY"}, filter_fallback="strict") == []
    strict = NarrativeIndexRetriever(index, retry_without_filters=False)
    widened = strict.retrieve("营收", filters={"entity": "NOBODY"}, filter_fallback="retry")
    assert widened and widened.filters_dropped == ["entity"]
    with pytest.raises(ValueError, match="filter_fallback must be one of strict, retry"):
        retriever.retrieve("营收", filter_fallback="loose")


def test_unknown_filter_key_lists_valid_keys(store: ChunkStore) -> None:
    retriever = NarrativeIndexRetriever(NarrativeIndex(store))
    with pytest.raises(ValueError, match="unknown filter field.*company.*not one of topic, entity"):
        retriever.retrieve("营收", filters={"company": "ACME"})
    with pytest.raises(ValueError, match="unknown operator 'like'"):
        retriever.retrieve("营收", filters={"period": {"like": "2024"}})


def test_provider_judge_reranks_and_never_sees_restricted(store: ChunkStore) -> None:
    provider = RecordingProvider(reply="[2] > [1]")
    index = NarrativeIndex(store, judge=ProviderListwiseJudge(provider))
    _ingest(index)
    # Exit #1 in depth: the unmasked candidates (the default masks the memo before scoring).
    unreranked = [r.chunk.doc_id for r in index.retrieve("营收下滑", rerank=False, include_restricted=True)]
    reranked = [r.chunk.doc_id for r in index.retrieve("营收下滑", include_restricted=True)]
    assert len(provider.prompts) == 1
    assert "SECRETMARK" not in provider.prompts[0] and "裁员" not in provider.prompts[0]
    open_before = [d for d in unreranked if d != "memo"]
    assert [d for d in reranked if d != "memo"] == list(reversed(open_before))
    assert reranked.index("memo") == unreranked.index("memo")


def test_provider_failure_keeps_rrf_order(store: ChunkStore) -> None:
    index = NarrativeIndex(store, judge=ProviderListwiseJudge(RecordingProvider(fail=True)))
    _ingest(index)
    assert [r.chunk.chunk_id for r in index.retrieve("营收下滑")] == [
        r.chunk.chunk_id for r in index.retrieve("营收下滑", rerank=False)
    ]


def test_build_narrative_retriever_assembles_defaults(tmp_path: Path) -> None:
    provider = RecordingProvider()
    retriever, store = build_narrative_retriever(tmp_path / "x.db", provider)
    try:
        assert retriever.index.judge is not None and retriever.index.query_rewriter is not None
        assert retriever.index.embedding_backend is None
        _ingest(retriever.index)
        snippets = retriever.retrieve("为什么营收下滑", filters={"entity": "ACME_CN"}, top_k=10)
        assert [s["doc_id"] for s in snippets] == ["cn"]
        assert provider.prompts == [], "one open candidate: nothing to rerank"
    finally:
        store.close()


_LABELS = st.sampled_from(["RESTRICTED", "restricted", " Restricted", "PUBLIC", "INTERNAL", ""])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    docs=st.lists(st.tuples(_LABELS, st.sampled_from(["营收下滑", "revenue fell", "出口 订单"])),
                  min_size=1, max_size=8),  # fmt: skip
    query=st.sampled_from(["营收", "revenue", "订单 营收", "why did revenue fall"]),
)
def test_restricted_never_reaches_judge_or_snippets(tmp_path_factory: pytest.TempPathFactory,
                                                    docs: list[tuple[str, str]], query: str) -> None:  # fmt: skip
    path = tmp_path_factory.mktemp("prop") / "chunks.db"
    provider = RecordingProvider(reply="[3] > [1] > [2]")
    retriever, store = build_narrative_retriever(path, provider)
    try:
        for i, (label, words) in enumerate(docs):
            marker = f"SECRET{i}X" if label.strip().upper() == "RESTRICTED" else f"open{i}x"
            retriever.index.ingest(f"{words} {marker}", DocumentMeta(f"d{i}", sensitivity=label))
        snippets = retriever.retrieve(query, top_k=5)
        results = retriever.index.retrieve(query, top_k=5)
        listwise_rerank(query, results, ProviderListwiseJudge(provider))
    finally:
        store.close()
    assert all("SECRET" not in s["text"] and s["sensitivity"].strip().upper() != "RESTRICTED"
               for s in snippets)  # fmt: skip
    assert all("SECRET" not in prompt for prompt in provider.prompts)

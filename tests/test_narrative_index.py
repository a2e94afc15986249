from __future__ import annotations

from pathlib import Path

import pytest

from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex


def test_ingest_returns_chunk_count_and_retrieves(store: ChunkStore) -> None:
    index = NarrativeIndex(store, max_chars=60, overlap_chars=10)
    text = "\n\n".join(f"第{i}段：营收下滑的原因之一是出口订单减少，以及原材料上涨。" for i in range(5))
    written = index.ingest(text, DocumentMeta("r", entity="ACME_CN"), valid_as_of="2024-12-31")
    assert written == len(store.iter_chunks()) > 1
    results = index.retrieve("出口订单", entity="ACME_CN", top_k=3)
    assert len(results) == 3
    assert all(r.chunk.valid_as_of == "2024-12-31" for r in results)  # type: ignore[attr-defined]


def test_replacement_and_withdrawal_show_in_results(store: ChunkStore) -> None:
    index = NarrativeIndex(store)
    index.ingest("old wording about margins", DocumentMeta("d"))
    assert [r.chunk.doc_id for r in index.retrieve("margins")] == ["d"]
    index.ingest("new wording about revenue", DocumentMeta("d"))
    assert index.retrieve("margins") == []
    assert [r.chunk.text for r in index.retrieve("revenue")] == ["new wording about revenue"]
    index.withdraw("d")
    assert index.retrieve("revenue") == []


def test_sees_writes_from_another_handle(db_path: Path, store: ChunkStore) -> None:
    index = NarrativeIndex(store)
    index.ingest("alpha", DocumentMeta("a"))
    assert [r.chunk.doc_id for r in index.retrieve("alpha beta")] == ["a"]
    with ChunkStore(db_path) as other:
        NarrativeIndex(other).ingest("beta", DocumentMeta("b"))
    assert {r.chunk.doc_id for r in index.retrieve("alpha beta")} == {"a", "b"}


def test_bad_ingest_input(store: ChunkStore) -> None:
    index = NarrativeIndex(store)
    with pytest.raises(ValueError, match="doc_id"):
        index.ingest("text", DocumentMeta(""))
    with pytest.raises(ValueError, match="string"):
        index.ingest(b"bytes", DocumentMeta("d"))  # type: ignore[arg-type]
    assert store.iter_chunks(include_inactive=True) == []


def test_rerank_flag_without_judge_is_plain_ranking(store: ChunkStore) -> None:
    index = NarrativeIndex(store)
    index.ingest("revenue fell\n\nrevenue rose", DocumentMeta("d"))
    assert index.retrieve("revenue", rerank=True) == index.retrieve("revenue", rerank=False)


def test_row_cache_overflow_keeps_rows_in_use(store: ChunkStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from ragspine.retrieval.pipeline import narrative_index

    monkeypatch.setattr(narrative_index, "_ROW_CACHE_MAX", 5)
    index = NarrativeIndex(store)
    for i in range(8):
        index.ingest(f"shared words document {i}", DocumentMeta(f"d{i}"))
    assert len(index.retrieve("shared words", top_k=4)) == 4
    assert len(index.retrieve("document", top_k=8)) == 8  # more rows than the cache holds

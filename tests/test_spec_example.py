"""The specification's default-assembly example runs as written against a store the test builds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex


def test_default_assembly_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with ChunkStore("data/chunks.db") as setup:
        setup.init_schema()
        index = NarrativeIndex(setup)
        index.ingest("2024年营收下滑，主要因为出口订单减少。", DocumentMeta("cn", entity="ACME_CN"))
        index.ingest("2024年营收下滑后公司启动裁员。", DocumentMeta("memo", entity="ACME_CN",
                                                                 sensitivity="RESTRICTED"))  # fmt: skip
        index.ingest("营收增长。", DocumentMeta("hk", entity="ACME_HK"))

    # --- the specification's example, verbatim ---
    from ragspine.retrieval.link.narrative_link import build_narrative_retriever

    # Default: pure BM25 + RRF + glossary multi-query + (with a provider) listwise rerank.
    retriever, store = build_narrative_retriever("data/chunks.db")
    try:
        snippets = retriever.retrieve("为什么营收下滑", filters={"entity": "ACME_CN"}, top_k=10)
        # snippets is RESTRICTED-free and carries full lineage per item
    finally:
        store.close()
    # --- end of example ---

    assert [s["doc_id"] for s in snippets] == ["cn"]
    assert os.path.exists("data/chunks.db")

"""The five metadata filters are declared once (`FieldFilters`) and taken as keyword arguments by
`HybridRetriever.search` and `NarrativeIndex.retrieve`: a misspelt one is still a TypeError."""

from __future__ import annotations

import pytest

from ragspine.retrieval.model import FILTER_FIELDS, Chunk, DocumentMeta
from ragspine.retrieval.pipeline.hybrid import HybridRetriever
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.store.sqlite import ChunkStore


def test_the_five_fields_in_their_order() -> None:
    assert FILTER_FIELDS == ("topic", "entity", "geography", "period", "language")


def test_a_misspelt_filter_is_a_type_error_and_a_right_one_filters() -> None:
    chunks = [Chunk("a:0", "a", 0, "营收下滑", "a#p1@0-4", entity="ACME"), Chunk("b:0", "b", 0, "营收增长", "b#p1@0-4", entity="BETA")]
    retriever = HybridRetriever(chunks)
    with pytest.raises(TypeError, match="unexpected keyword argument 'entty'"):
        retriever.search("营收", entty="ACME")  # type: ignore[call-arg]
    assert [r.chunk.doc_id for r in retriever.search("营收", entity="BETA")] == ["b"]
    assert {r.chunk.doc_id for r in retriever.search("营收", entity=None)} == {"a", "b"}  # None: no filter
    store = ChunkStore(":memory:")
    store.init_schema()
    index = NarrativeIndex(store)
    index.ingest("营收下滑", DocumentMeta("r1", period="2024"))
    with pytest.raises(TypeError, match="retrieve\\(\\) got an unexpected keyword argument 'doc_id'"):
        index.retrieve("营收", doc_id="r1")  # type: ignore[call-arg]
    assert [r.chunk.doc_id for r in index.retrieve("营收", period="2024")] == ["r1"]
    assert index.retrieve("营收", period="2023") == []
    store.close()

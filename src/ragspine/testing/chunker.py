"""The conformance suite every Chunker runs (honest citations, metadata, determinism).

Subclass `ChunkerSuite` in a `Test*` class and give it a `chunker` fixture.
"""

from __future__ import annotations

from typing import Any

from ragspine.retrieval.chunking.protocol import Chunker
from ragspine.retrieval.model import DocumentMeta
from ragspine.testing.suite import required_fixture

TEXT = (
    "# 年度报告\n\n营收下滑的主要原因是海外需求减弱。公司随后调整了产品结构。\n\n"
    "## Outlook\n\nRevenue fell because overseas demand weakened. The board expects a recovery "
    "in 2025 as new products ship.\n\n" + "长段落。" * 200 + "\n\nLast paragraph."
)
META = DocumentMeta("doc-1", title="Annual report", entity="ACME_CN", period="2024", sensitivity="PUBLIC",
                    metadata={"region": "east"})  # fmt: skip


class ChunkerSuite:
    """Tests every chunker must pass."""

    chunker = required_fixture("chunker", "ChunkerSuite")

    def test_satisfies_the_protocol(self, chunker: Any) -> None:
        assert isinstance(chunker, Chunker)

    def test_every_chunk_is_a_verbatim_substring_the_locator_finds(self, chunker: Any) -> None:
        chunks = chunker.chunk(TEXT, META)
        assert chunks, "a non-empty document gives at least one chunk"
        for chunk in chunks:
            assert chunk.text and chunk.text in TEXT
            assert chunk.source_locator.startswith(META.doc_id)

    def test_chunks_carry_the_document_metadata_with_unique_ids_in_order(self, chunker: Any) -> None:
        chunks = chunker.chunk(TEXT, META)
        assert [c.seq for c in chunks] == list(range(len(chunks)))
        assert len({c.chunk_id for c in chunks}) == len(chunks)
        for chunk in chunks:
            assert (chunk.doc_id, chunk.title, chunk.entity, chunk.period, chunk.sensitivity) == (
                META.doc_id, META.title, META.entity, META.period, META.sensitivity,
            )  # fmt: skip
            assert META.metadata.items() <= chunk.metadata.items()  # a chunker may add keys (auto: "chunker")

    def test_same_input_same_chunks(self, chunker: Any) -> None:
        assert chunker.chunk(TEXT, META) == chunker.chunk(TEXT, META)

    def test_blank_text_gives_no_chunks(self, chunker: Any) -> None:
        assert chunker.chunk("  \n\n ", META) == []

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragspine.retrieval.chunking.chunking import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    chunk_document,
    paragraph_spans,
)
from ragspine.retrieval.model import Chunk, DocumentMeta

META = DocumentMeta("doc", title="T", topic="t", entity="E", geography="G", period="2024",
                    language="zh", sensitivity="PUBLIC")  # fmt: skip
_LOCATOR = re.compile(r"^(?P<doc>.+)#p(?P<a>\d+)(?:-(?P<b>\d+))?@(?P<start>\d+)-(?P<end>\d+)$")


def _span(chunk: Chunk) -> tuple[int, int]:
    match = _LOCATOR.match(chunk.source_locator)
    assert match, chunk.source_locator
    return int(match["start"]), int(match["end"])


def test_spec_constants() -> None:
    assert DEFAULT_CHUNK_CHARS == 480
    assert DEFAULT_OVERLAP_CHARS == 80


def test_meta_defaults_and_chunk_fields() -> None:
    meta = DocumentMeta("d")
    assert (meta.title, meta.entity, meta.sensitivity) == ("", "", "INTERNAL")
    chunk = Chunk("c", "d", 0, "text", "d#p1@0-4")
    assert (chunk.sensitivity, chunk.parent_id, chunk.window_text, chunk.parent_locator) == (
        "INTERNAL", "", "", "",
    )


@pytest.mark.parametrize(
    ("max_chars", "overlap"), [(0, 0), (-5, 0), (100, -1), (100, 100), (100, 150)]
)
def test_bad_budgets_raise(max_chars: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        chunk_document("text", META, max_chars=max_chars, overlap_chars=overlap)


def test_short_paragraphs_pack_into_one_chunk_with_metadata() -> None:
    text = "第一段。\n\n第二段。\n\n\n第三段。"
    chunks = chunk_document(text, META)
    assert len(chunks) == 1
    chunk = chunks[0]
    assert chunk.text == text
    assert chunk.source_locator == f"doc#p1-3@0-{len(text)}"
    assert (chunk.title, chunk.topic, chunk.entity, chunk.geography) == ("T", "t", "E", "G")
    assert (chunk.period, chunk.language, chunk.sensitivity) == ("2024", "zh", "PUBLIC")
    assert chunk.seq == 0 and chunk.doc_id == "doc"


def test_packing_respects_budget_and_overlaps_previous_tail() -> None:
    paragraphs = [f"Paragraph {i} says something about revenue and margins." for i in range(12)]
    text = "\n\n".join(paragraphs)
    chunks = chunk_document(text, META, max_chars=160, overlap_chars=40)
    assert len(chunks) > 3
    spans = [_span(c) for c in chunks]
    for chunk, (start, end) in zip(chunks, spans):
        assert len(chunk.text) <= 160
        assert text[start:end] == chunk.text
    for (_, prev_end), (start, _) in zip(spans, spans[1:]):
        assert start < prev_end, "each packed chunk after the first starts inside the previous one"
        assert prev_end - start <= 40
    assert [c.seq for c in chunks] == list(range(len(chunks)))


def test_zero_overlap_gives_disjoint_chunks() -> None:
    text = "\n\n".join("句子。" * 10 for _ in range(10))
    spans = [_span(c) for c in chunk_document(text, META, max_chars=70, overlap_chars=0)]
    for (_, prev_end), (start, _) in zip(spans, spans[1:]):
        assert start >= prev_end


def test_long_paragraph_splits_on_sentences_without_overlap() -> None:
    sentence = "营收下滑的主要原因是出口订单减少。"
    long_paragraph = sentence * 40  # 680 characters, one paragraph
    text = "开头。\n\n" + long_paragraph + "\n\n结尾。"
    chunks = chunk_document(text, META, max_chars=100, overlap_chars=30)
    pieces = [c for c in chunks if "#p2@" in c.source_locator]
    assert len(pieces) >= 7
    for piece in pieces:
        assert piece.text.endswith("。"), "a piece ends on a sentence boundary"
        assert len(piece.text) <= 100
    spans = [_span(c) for c in pieces]
    for (_, prev_end), (start, _) in zip(spans, spans[1:]):
        assert start >= prev_end, "pieces of one paragraph never overlap"
    assert "".join(p.text for p in pieces) == long_paragraph


def test_overlong_sentence_is_hard_split() -> None:
    text = "x" * 1000
    chunks = chunk_document(text, META, max_chars=300, overlap_chars=50)
    assert [len(c.text) for c in chunks] == [300, 300, 300, 100]
    assert "".join(c.text for c in chunks) == text


def test_decimal_points_do_not_end_sentences() -> None:
    text = ("Revenue fell 3.5% to NOK 6.42 billion in 2024. " * 20).strip()
    chunks = chunk_document(text, META, max_chars=200, overlap_chars=0)
    assert all(c.text.endswith("2024.") for c in chunks)


def test_empty_and_blank_text_give_no_chunks() -> None:
    assert chunk_document("", META) == []
    assert chunk_document(" \n\n\t\n", META) == []


def test_chunk_ids_are_deterministic_and_unique() -> None:
    text = "\n\n".join(f"段落{i}。" * 30 for i in range(6))
    first = chunk_document(text, META, max_chars=120, overlap_chars=20)
    second = chunk_document(text, META, max_chars=120, overlap_chars=20)
    assert [c.chunk_id for c in first] == [c.chunk_id for c in second]
    assert len({c.chunk_id for c in first}) == len(first)


def test_paragraph_spans_trim_whitespace() -> None:
    text = "  a  \n \n\u3000b\n\n\n"
    assert [text[s:e] for s, e in paragraph_spans(text)] == ["a", "b"]


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(max_size=1500),
    max_chars=st.integers(min_value=1, max_value=300),
    overlap_ratio=st.floats(min_value=0.0, max_value=0.99),
)
def test_chunks_are_contiguous_substrings_of_any_unicode(
    text: str, max_chars: int, overlap_ratio: float
) -> None:
    overlap = min(int(max_chars * overlap_ratio), max_chars - 1)
    chunks = chunk_document(text, META, max_chars=max_chars, overlap_chars=overlap)
    for chunk in chunks:
        start, end = _span(chunk)
        assert chunk.text == text[start:end]
        assert chunk.text in text
        assert 0 < len(chunk.text) <= max_chars
        assert chunk.text == chunk.text.strip()
    # Every non-blank paragraph's content is covered by some chunk.
    covered = set()
    for chunk in chunks:
        covered.update(range(*_span(chunk)))
    for p_start, p_end in paragraph_spans(text):
        for i in range(p_start, p_end):
            assert i in covered or text[i].isspace()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), min_size=1,
                        max_size=60), min_size=1, max_size=12))  # fmt: skip
def test_paragraph_text_concatenation_property(paragraphs: list[str]) -> None:
    text = "\n\n".join(paragraphs)
    chunks = chunk_document(text, META, max_chars=100, overlap_chars=20)
    assert all(c.text in text for c in chunks)

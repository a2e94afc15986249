"""Paragraph-grained chunker.

Invariant: every `Chunk.text` is a contiguous substring of the text given to `chunk_document`
(honest citations), and `source_locator` names the document, the paragraph range and the exact
character span (`doc#p3-4@812-1290`: paragraphs 3 to 4, counted from 1; characters 812 up to,
not including, 1290 of that text). Token budgets are approximated by characters: no tokenizer,
offline and deterministic.

Packing: paragraphs (separated by blank lines) are packed greedily into chunks of at most
`max_chars` characters. Each packed chunk after the first starts with up to `overlap_chars`
characters of the previous chunk's tail (snapped forward to a whitespace or sentence boundary
when one is inside that window). A paragraph longer than `max_chars` is cut on sentence ends
(。！？；.!?;), and a sentence that is still too long is cut hard; its pieces never overlap each
other nor their neighbours.
"""

from __future__ import annotations

import bisect
import re
from typing import Any

from ragspine.retrieval.model import (
    FILTER_FIELDS,
    INDEXED_FIELDS,
    RESERVED_FIELDS,
    Chunk,
    DocumentMeta,
    check_user_metadata,
    index_field_values,
    make_chunk_id,
    metadata_json,
)

__all__ = [
    "DEFAULT_CHUNK_CHARS",
    "DEFAULT_OVERLAP_CHARS",
    "FILTER_FIELDS",
    "INDEXED_FIELDS",
    "RESERVED_FIELDS",
    "Chunk",
    "DocumentMeta",
    "check_user_metadata",
    "chunk_document",
    "index_field_values",
    "make_chunk_id",
    "metadata_json",
    "paragraph_spans",
]

DEFAULT_CHUNK_CHARS = 480
DEFAULT_OVERLAP_CHARS = 80

_BLANK_LINE = re.compile(r"\n\s*\n")
# A sentence ends after CJK terminators, or after ASCII ones followed by whitespace or the end
# (so "3.5%" and "e.g.x" are not cut).
_SENTENCE_END = re.compile(r"[。！？；]+[」』”’）)]*|[.!?;]+[\"')\]]*(?=\s|$)")
_BOUNDARY_CHARS = frozenset("。！？；.!?;，,、：:")

Span = tuple[int, int]


def chunk_document(
    text: str,
    meta: DocumentMeta,
    *,
    max_chars: int = DEFAULT_CHUNK_CHARS,
    overlap_chars: int = DEFAULT_OVERLAP_CHARS,
) -> list[Chunk]:
    """Split `text` into chunks of at most `max_chars` characters; see the module docstring.

    >>> [c.source_locator for c in chunk_document("Alpha.\\n\\nBeta.", DocumentMeta("d"))]
    ['d#p1-2@0-13']
    """
    check_budget(max_chars, overlap_chars)
    paragraphs = paragraph_spans(text)
    spans = _pack(text, paragraphs, max_chars, overlap_chars)
    starts = [p_start for p_start, _ in paragraphs]
    ends = [p_end for _, p_end in paragraphs]
    return [
        document_chunk(meta, seq, text[start:end], _locator(meta.doc_id, starts, ends, start, end))
        for seq, (start, end) in enumerate(spans)
    ]


def document_chunk(meta: DocumentMeta, seq: int, text: str, locator: str, **fields: Any) -> Chunk:
    """Chunk `seq` of a document: its id, `text` and locator, the document's fields, and `fields`
    (parent_id, heading, window_text, parent_locator, metadata) where given."""
    return Chunk(
        chunk_id=make_chunk_id(meta.doc_id, seq, text),
        doc_id=meta.doc_id,
        seq=seq,
        text=text,
        source_locator=locator,
        title=meta.title,
        topic=meta.topic,
        entity=meta.entity,
        geography=meta.geography,
        period=meta.period,
        language=meta.language,
        sensitivity=meta.sensitivity,
        **{"metadata": dict(meta.metadata), **fields},
    )


def paragraph_spans(text: str) -> list[Span]:
    """Spans of the non-blank paragraphs of `text`, whitespace-trimmed, in order."""
    spans: list[Span] = []
    start = 0
    for match in _BLANK_LINE.finditer(text):
        _append_trimmed(spans, text, start, match.start())
        start = match.end()
    _append_trimmed(spans, text, start, len(text))
    return spans


def check_budget(max_chars: int, overlap_chars: int) -> None:
    if max_chars <= 0:
        raise ValueError(f"max_chars must be > 0, got {max_chars}")
    if overlap_chars < 0:
        raise ValueError(f"overlap_chars must be >= 0, got {overlap_chars}")
    if overlap_chars >= max_chars:
        raise ValueError(
            f"overlap_chars ({overlap_chars}) must be smaller than max_chars ({max_chars})"
        )


def trim_span(text: str, start: int, end: int) -> Span:
    """`(start, end)` moved inward past the whitespace at both ends (empty when all blank).

    >>> trim_span("  ab  ", 0, 6)
    (2, 4)
    """
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _append_trimmed(spans: list[Span], text: str, start: int, end: int) -> None:
    start, end = trim_span(text, start, end)
    if end > start:
        spans.append((start, end))


def _pack(text: str, paragraphs: list[Span], max_chars: int, overlap_chars: int) -> list[Span]:
    out: list[Span] = []
    current: Span | None = None
    previous: Span | None = None  # last packed chunk that may lend an overlap
    for p_start, p_end in paragraphs:
        if p_end - p_start > max_chars:
            if current is not None:
                out.append(current)
                current = None
            out.extend(_split_long(text, p_start, p_end, max_chars))
            previous = None  # pieces of a long paragraph neither lend nor borrow overlap
            continue
        if current is not None and p_end - current[0] <= max_chars:
            current = (current[0], p_end)
            continue
        if current is not None:
            out.append(current)
            previous = current
        start = _overlap_start(text, previous, p_start, p_end, max_chars, overlap_chars)
        current = (start, p_end)
    if current is not None:
        out.append(current)
    return out


def _overlap_start(
    text: str, previous: Span | None, p_start: int, p_end: int, max_chars: int, overlap: int
) -> int:
    """Where a chunk starting at paragraph `p_start` begins once it borrows the previous tail."""
    if previous is None or overlap == 0:
        return p_start
    start = max(previous[1] - overlap, p_end - max_chars, previous[0])
    if start >= previous[1]:
        return p_start
    for i in range(start, previous[1]):  # snap to the first clean boundary in the window
        if text[i].isspace() or text[i] in _BOUNDARY_CHARS:
            start = i + 1
            break
    while start < p_start and text[start].isspace():
        start += 1
    return start if start < previous[1] else p_start


def _split_long(text: str, start: int, end: int, max_chars: int) -> list[Span]:
    """Pieces of one over-long paragraph: whole sentences packed, over-long sentences cut."""
    pieces: list[Span] = []
    current: Span | None = None
    for s_start, s_end in _sentence_spans(text, start, end):
        if current is not None and s_end - current[0] <= max_chars:
            current = (current[0], s_end)
            continue
        if current is not None:
            pieces.append(current)
            current = None
        if s_end - s_start <= max_chars:
            current = (s_start, s_end)
        else:
            pieces.extend(_hard_split(text, s_start, s_end, max_chars))
    if current is not None:
        pieces.append(current)
    return pieces


def sentence_spans(text: str) -> list[Span]:
    """(start, end) of each sentence of `text`, whitespace trimmed: `text[s:e]` is the sentence.

    >>> t = "营收下滑。出口减少！ Costs rose 3.5% in Q2. Done"
    >>> [t[s:e] for s, e in sentence_spans(t)]
    ['营收下滑。', '出口减少！', 'Costs rose 3.5% in Q2.', 'Done']
    """
    return _sentence_spans(text, 0, len(text))


def _sentence_spans(text: str, start: int, end: int) -> list[Span]:
    spans: list[Span] = []
    cursor = start
    for match in _SENTENCE_END.finditer(text, start, end):
        _append_trimmed(spans, text, cursor, match.end())
        cursor = match.end()
    _append_trimmed(spans, text, cursor, end)
    return spans


def _hard_split(text: str, start: int, end: int, max_chars: int) -> list[Span]:
    """Cut into windows of at most `max_chars`, preferring a whitespace in the window's back half."""
    pieces: list[Span] = []
    while end - start > max_chars:
        cut = start + max_chars
        for i in range(cut - 1, start + max_chars // 2, -1):
            if text[i].isspace():
                cut = i
                break
        _append_trimmed(pieces, text, start, cut)
        start = cut
    _append_trimmed(pieces, text, start, end)
    return pieces


def _locator(doc_id: str, starts: list[int], ends: list[int], start: int, end: int) -> str:
    """`doc#pA-B@start-end`; paragraphs counted from 1 are those the span touches."""
    first = bisect.bisect_right(ends, start) + 1
    last = bisect.bisect_left(starts, end)
    para = f"p{first}" if first == last else f"p{first}-{last}"
    return f"{doc_id}#{para}@{start}-{end}"

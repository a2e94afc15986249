"""Carry PDF page numbers into chunk locators.

Invariant: only `source_locator` changes, and only by a suffix: `doc#p3-4@812-1290` becomes
`doc#p3-4@812-1290;pages=2` (or `;pages=2-3` when the chunk's characters cross a page boundary),
where the pages are exactly those whose text the span `[812, 1290)` touches. `p` still counts
paragraphs and `@start-end` still counts characters of the document text, so the chunker's
locator stays parseable as it was; chunk text and ids are untouched.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import replace

from ragspine.retrieval.model import Chunk

_SPAN = re.compile(r"@(\d+)-(\d+)$")


def page_range(
    start: int, end: int, page_spans: Sequence[tuple[int, int]], page_numbers: Sequence[int]
) -> tuple[int, int]:
    """First and last page numbers whose spans the character span [start, end) touches."""
    starts = [s for s, _ in page_spans]
    first = max(bisect.bisect_right(starts, start) - 1, 0)
    last = max(bisect.bisect_left(starts, end) - 1, first)
    return page_numbers[first], page_numbers[last]


def with_pages(
    chunks: Sequence[Chunk], page_spans: Sequence[tuple[int, int]], page_numbers: Sequence[int]
) -> list[Chunk]:
    """`chunks` with `;pages=N` or `;pages=A-B` appended to each locator (see the module docstring)."""
    if not page_spans:
        return list(chunks)
    out: list[Chunk] = []
    for chunk in chunks:
        match = _SPAN.search(chunk.source_locator)
        if match is None:
            raise ValueError(f"chunk locator {chunk.source_locator!r} has no @start-end span")
        first, last = page_range(int(match.group(1)), int(match.group(2)), page_spans, page_numbers)
        pages = str(first) if first == last else f"{first}-{last}"
        out.append(replace(chunk, source_locator=f"{chunk.source_locator};pages={pages}"))
    return out

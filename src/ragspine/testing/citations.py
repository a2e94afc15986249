"""The citation check a stored chunk must pass against the text its document was chunked from.

Invariant checked: the chunk's text is exactly `text[start:end]` for the `@start-end` its
`source_locator` cites, and when the document has pages the locator's `;pages=A-B` names exactly
the pages whose spans that slice touches (computed here from the spans, independently of
`ragspine.ingest.pages`); a document without pages has no `;pages=`. Used by the PDF tests and
`bench.pdf_bench`, so a benchmark's store is held to the tests' guarantee.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragspine.retrieval.visual.protocol import locator_pages

_SPAN = re.compile(r"@(\d+)-(\d+)(?:;pages=[\d-]+)?$")


def citation_failure(
    chunk_text: str,
    locator: str,
    text: str,
    page_spans: Sequence[tuple[int, int]] = (),
    page_numbers: Sequence[int] = (),
) -> str | None:
    """None when the chunk is the slice of `text` its `locator` cites, inside exactly the pages
    it names; else the reason in one line.

    >>> citation_failure("cd", "a.pdf#p1@2-4;pages=1", "abcdef", [(0, 3), (3, 6)], [1, 2])
    'a.pdf#p1@2-4;pages=1: cites pages 1-1, the slice touches 1-2'
    >>> citation_failure("cd", "a.pdf#p1@2-4;pages=1-2", "abcdef", [(0, 3), (3, 6)], [1, 2]) is None
    True
    """
    match = _SPAN.search(locator)
    if match is None:
        return f"{locator}: no @start-end span"
    start, end = int(match.group(1)), int(match.group(2))
    if text[start:end] != chunk_text:
        return f"{locator}: the chunk's text is not the cited slice"
    touched = [n for (s, e), n in zip(page_spans, page_numbers, strict=True) if s < end and start < e]
    pages = locator_pages(locator)
    if pages is None:
        return f"{locator}: no ;pages= although the document has pages" if page_spans else None
    first, last = pages
    if touched != [n for n in page_numbers if first <= n <= last]:
        shown = f"{touched[0]}-{touched[-1]}" if touched else "none"
        return f"{locator}: cites pages {first}-{last}, the slice touches {shown}"
    return None

"""Contextual Retrieval without a model: a deterministic context header on the text the channels
index (RAGSPINE_CONTEXTUAL=header).

    from ragspine.retrieval.chunking.contextual import ContextHeader

    ContextHeader()(chunk)   # "Annual report 2023 · ACME_CN · 2023Q4 · Risks > Exports\\n\\n<chunk.text>"

Invariants:
- The header is built from the chunk's own document fields only — title · entity · period ·
  heading path, in that order, blanks and repeats left out — nothing is invented, looked up or
  generated; the same chunk always gives the same index text.
- Only the index text changes: BM25 tokenizes it and the dense channel embeds it; the chunk's
  `text`, `source_locator` and every citation field stay byte-identical.
- The scheme is part of the index identity (`index_text_id`, recorded in the store's index
  settings as RAGSPINE_CONTEXTUAL): an index or vectors made with another scheme are never
  served; they are rebuilt (the lexical index) or re-embedded into their own file (vectors).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ragspine.retrieval.model import Chunk

HEADER_SEPARATOR = " · "
MAX_HEADER_CHARS = 400  # a runaway field (a whole paragraph as "title") is cut, never the text


class ContextHeader:
    """The index text `header + blank line + text`; the chunk's own text when no field is set.

    >>> from ragspine.retrieval.model import Chunk
    >>> chunk = Chunk("d:0", "d", 0, "Exports fell.", "d#p2@9-22", title="Report", entity="ACME",
    ...               period="2023", heading="Report > Risks")
    >>> ContextHeader()(chunk)
    'Report · ACME · 2023 · Risks\\n\\nExports fell.'
    >>> ContextHeader()(Chunk("d:0", "d", 0, "plain", "d#p1@0-5"))
    'plain'
    """

    index_text_id = "header-v1"

    def __call__(self, chunk: Chunk) -> str:
        header = context_header(chunk)
        return f"{header}\n\n{chunk.text}" if header else chunk.text

    def __repr__(self) -> str:
        return "ContextHeader()"


def context_header(chunk: Any) -> str:
    """title · entity · period · heading path of `chunk` (see the module docstring)."""
    parts: list[str] = []
    seen: set[str] = set()
    heading = str(getattr(chunk, "heading", "") or "").split(" > ")
    for value in (getattr(chunk, "title", ""), getattr(chunk, "entity", ""), getattr(chunk, "period", ""), *heading):
        cleaned = " ".join(str(value or "").split())
        if cleaned and cleaned.casefold() not in seen:
            seen.add(cleaned.casefold())
            parts.append(cleaned)
    return HEADER_SEPARATOR.join(parts)[:MAX_HEADER_CHARS]


def indexed_text(chunk: Chunk, index_text: Callable[[Chunk], str] | None) -> str:
    """What the channels index and embed for `chunk`: its index text, or its own text (None)."""
    return chunk.text if index_text is None else index_text(chunk)


def index_text_tag(index_text: object) -> str:
    """The suffix that keeps an index text's derived files apart ("" for the chunk's own text):
    `<db><tag>.vectors.sqlite` holds the vectors of that index text.

    >>> index_text_tag(None), index_text_tag(ContextHeader())
    ('', '.ctx-header-v1')
    """
    if index_text is None:
        return ""
    name = getattr(index_text, "index_text_id", None) or f"{type(index_text).__module__}.{type(index_text).__qualname__}"
    return ".ctx-" + "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in str(name))

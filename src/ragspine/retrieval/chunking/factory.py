"""The chunker and index-text factories: `make_chunker` (RAGSPINE_CHUNKER) and
`make_index_text_fn` (RAGSPINE_CONTEXTUAL).

    from ragspine.retrieval.chunking.factory import make_chunker

    chunker = make_chunker("paragraph", max_chars=480, overlap_chars=80)   # the default
    chunks = chunker.chunk(text, DocumentMeta("doc-1"))

Invariants: names and errors come from the CHUNKERS / INDEX_TEXTS registries (the tables of
`ragspine.catalog`, whose names the settings accept); `paragraph` is exactly the specification's
`chunk_document`; every chunker takes `max_chars` / `overlap_chars` (RAGSPINE_CHUNK_CHARS /
RAGSPINE_CHUNK_OVERLAP) and keeps the citation invariant (`chunking.structure`);
`make_index_text_fn("none")` is None, meaning each chunk's own text; "header" is Contextual
Retrieval's deterministic context header (`chunking.contextual`).
"""

from __future__ import annotations

from typing import Any

from ragspine import catalog
from ragspine.registry import Registry
from ragspine.retrieval.chunking.chunking import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    check_budget,
    chunk_document,
)
from ragspine.retrieval.chunking.protocol import Chunker, IndexTextFn
from ragspine.retrieval.model import Chunk, DocumentMeta


class ParagraphChunker:
    """The specification's paragraph packer (`chunk_document`) as a Chunker.

    >>> [c.text for c in ParagraphChunker(max_chars=8, overlap_chars=0).chunk("Alpha.\\n\\nBeta.", DocumentMeta("d"))]
    ['Alpha.', 'Beta.']
    """

    def __init__(self, max_chars: int = DEFAULT_CHUNK_CHARS, overlap_chars: int = DEFAULT_OVERLAP_CHARS) -> None:
        check_budget(max_chars, overlap_chars)
        self.max_chars, self.overlap_chars = max_chars, overlap_chars

    def chunk(self, text: str, meta: DocumentMeta) -> list[Chunk]:
        return chunk_document(text, meta, max_chars=self.max_chars, overlap_chars=self.overlap_chars)

    def __repr__(self) -> str:
        return f"ParagraphChunker(max_chars={self.max_chars}, overlap_chars={self.overlap_chars})"


CHUNKERS: Registry[Chunker] = catalog.CHUNKERS.bind(Chunker)

INDEX_TEXTS: Registry[IndexTextFn] = catalog.INDEX_TEXTS.bind(IndexTextFn)


def make_chunker(spec: str = "paragraph", **options: Any) -> Chunker:
    """The chunker `spec` names, built with `options`.

    >>> make_chunker("paragraph")
    ParagraphChunker(max_chars=480, overlap_chars=80)
    >>> try:
    ...     make_chunker("by-vibes")
    ... except ValueError as exc:
    ...     print(exc)
    unknown chunker 'by-vibes'; valid: paragraph, layout, parent_child, sentence_window, semantic, laws, book, qa, auto, or a dotted path package.module:Class
    """
    chunker = CHUNKERS.make(spec, **options)
    assert chunker is not None  # no chunker name means "empty"
    return chunker


def make_index_text_fn(spec: str = "none", **options: Any) -> IndexTextFn | None:
    """The index-text function `spec` names; None for "none" (index each chunk's own text).

    >>> make_index_text_fn("none") is None
    True
    >>> make_index_text_fn("header")
    ContextHeader()
    """
    return INDEX_TEXTS.make(spec, **options)

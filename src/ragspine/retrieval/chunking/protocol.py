"""The chunker and index-text seams.

Invariants: a Chunker's every `Chunk.text` is a contiguous substring of the text it was given
and its `source_locator` finds it (honest citations); an IndexTextFn only changes what the
channels index for a chunk, never the chunk's `text` or citation fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ragspine.retrieval.model import Chunk, DocumentMeta


@runtime_checkable
class Chunker(Protocol):
    """Cuts one document's text into chunks carrying its metadata, in reading order."""

    def chunk(self, text: str, meta: DocumentMeta) -> list[Chunk]: ...


@dataclass(frozen=True)
class Layout:
    """The structure a loader saw in a document's text, as character offsets of that text:
    heading lines `(start, end, level)` (level 0 = title, 1 = top heading, …) and the offsets
    where pages after the first start."""

    headings: tuple[tuple[int, int, int], ...] = ()
    page_starts: tuple[int, ...] = ()


@runtime_checkable
class StructureAwareChunker(Protocol):
    """A chunker that also takes the loader's `Layout` (ingest calls `chunk_structured` when the
    loader saw headings or pages; `chunk` otherwise). Same invariants as `Chunker`."""

    def chunk(self, text: str, meta: DocumentMeta) -> list[Chunk]: ...

    def chunk_structured(self, text: str, meta: DocumentMeta, layout: Layout) -> list[Chunk]: ...


@runtime_checkable
class IndexTextFn(Protocol):
    """The text the lexical and dense channels index for a chunk (e.g. with a context header)."""

    def __call__(self, chunk: Chunk) -> str: ...

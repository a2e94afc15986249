"""The visual embedder seam: one Protocol, and the page record every implementation receives.

Invariants: `embed_pages` gives one (patches, dim) float32 array of unit rows per image, in
order; `embed_queries` one (tokens, dim) array of unit rows per query; the same input gives the
same vectors whatever else is in the batch (up to float rounding); `model_id` names the weights
and settings the vectors depend on (the page index refuses vectors of another model).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class VisualEmbedder(Protocol):
    """Late-interaction embedder for page images and text queries.

    >>> from ragspine.retrieval.visual.tiny import TinyVisualEmbedder
    >>> embedder = TinyVisualEmbedder()
    >>> page = np.full((64, 48, 3), 255, dtype=np.uint8)
    >>> [v.shape for v in embedder.embed_pages([page])], embedder.embed_queries(["营收 revenue"])[0].shape
    ([(64, 32)], (4, 32))
    """

    model_id: str
    dim: int

    def embed_pages(self, images: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Each (height, width, 3) uint8 RGB image's (patches, dim) unit vectors."""
        ...

    def embed_queries(self, queries: Sequence[str]) -> list[np.ndarray]:
        """Each query's (tokens, dim) unit vectors."""
        ...


@dataclass(frozen=True)
class PageRecord:
    """What the page index keeps about one page besides its vectors (never its pixels).

    `fields`: what filters see (doc_id, sensitivity, the non-empty metadata dimensions and the
    document's user metadata); `text`: the page's extracted text ("" for a scan); `version`: the
    document version the page belongs to (a hit of an older version is not shown)."""

    doc_id: str
    page: int
    sensitivity: str
    title: str = ""
    text: str = ""
    version: int = 0
    fields: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The page's id in rankings: `doc_id#page=N`."""
        return page_key(self.doc_id, self.page)

    def filter_record(self) -> dict[str, Any]:
        """The record `filters.matches` reads: the fields, plus doc_id, sensitivity and page."""
        return {**self.fields, "doc_id": self.doc_id, "sensitivity": self.sensitivity, "page": self.page}


@dataclass(frozen=True)
class PageImage:
    """A page record and its rendered pixels ((height, width, 3) uint8 RGB)."""

    record: PageRecord
    pixels: np.ndarray


def page_key(doc_id: str, page: int) -> str:
    """`doc_id#page=N`, the key a page has in rankings and lineage."""
    return f"{doc_id}#page={page}"


_PAGES = re.compile(r";pages=(\d+)(?:-(\d+))?$")


def locator_pages(locator: str) -> tuple[int, int] | None:
    """(first, last) page of a PDF chunk's locator (`…;pages=3` or `…;pages=3-4`, written by
    `ragspine.ingest.pages.with_pages`); None for a locator without pages.

    >>> locator_pages("r.pdf#p2@10-90;pages=3-4"), locator_pages("r.md#p1@0-5")
    ((3, 4), None)
    """
    found = _PAGES.search(locator)
    if found is None:
        return None
    first = int(found.group(1))
    return first, int(found.group(2) or first)

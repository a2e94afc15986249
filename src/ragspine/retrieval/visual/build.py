"""Build the page index: render, embed and store the pages of documents, RESTRICTED never.

Invariants: a page whose label `sensitivity.is_restricted` calls RESTRICTED is never rendered,
never given to the embedder and never stored (the index drops it again, defence in depth); the
pages of one document are written together (a document is replaced as a unit); a document
whose pages are all dropped (or which has none) loses any pages an earlier version left.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.visual.index import VisualIndex
from ragspine.retrieval.visual.protocol import PageRecord, VisualEmbedder

PageSource = tuple[PageRecord, Callable[[], np.ndarray]]  # a record and how to render its pixels
DEFAULT_BATCH_SIZE = 8  # pages per embedder call
FLUSH_PAGES = 256  # pages embedded before they are written (at a document boundary)


@dataclass
class PageBuildReport:
    """What one build wrote: pages embedded, RESTRICTED pages dropped, documents written, and
    documents whose earlier pages were removed (withdrawn, or now without an open page)."""

    embedded: int = 0
    restricted: int = 0
    documents: list[str] = field(default_factory=list)
    cleared: list[str] = field(default_factory=list)


def index_pages(
    documents: Iterable[tuple[str, Sequence[PageSource]]],
    embedder: VisualEmbedder,
    index: VisualIndex,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    report: PageBuildReport | None = None,
) -> PageBuildReport:
    """Embed and store each (doc_id, pages) document's pages; see the module docstring.

    >>> from ragspine.retrieval.visual.tiny import TinyVisualEmbedder
    >>> embedder = TinyVisualEmbedder()
    >>> index = VisualIndex(None, model_id=embedder.model_id, dim=embedder.dim)
    >>> blank = lambda: np.full((40, 30, 3), 255, dtype=np.uint8)
    >>> pages = [(PageRecord("a.pdf", 1, "PUBLIC"), blank), (PageRecord("a.pdf", 2, "restricted"), blank)]
    >>> r = index_pages([("a.pdf", pages)], embedder, index)
    >>> r.embedded, r.restricted, len(index)
    (1, 1, 1)
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    out = report if report is not None else PageBuildReport()
    pending: list[tuple[PageRecord, np.ndarray]] = []
    empty: list[str] = []
    had = index.doc_versions()  # a document that loses all its pages is reported as cleared
    for doc_id, pages in documents:
        open_pages = [(r, render) for r, render in pages if not is_restricted(r.sensitivity)]
        out.restricted += len(pages) - len(open_pages)
        if not open_pages:
            empty.append(doc_id)
            out.cleared.extend([doc_id] if doc_id in had else [])
            continue
        for start in range(0, len(open_pages), batch_size):
            batch = open_pages[start : start + batch_size]
            vectors = embedder.embed_pages([render() for _, render in batch])
            if len(vectors) != len(batch):
                raise ValueError(f"the visual embedder gave {len(vectors)} results for {len(batch)} pages")
            pending.extend((record, v) for (record, _), v in zip(batch, vectors, strict=True))
        out.embedded += len(open_pages)
        out.documents.append(doc_id)
        if len(pending) >= FLUSH_PAGES:
            index.write(pending, remove=empty)
            pending, empty = [], []
    if pending or empty:
        index.write(pending, remove=empty)
    return out

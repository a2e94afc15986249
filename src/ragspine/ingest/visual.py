"""The visual pass of an ingest: the active PDF documents' pages into the page index.

Invariants:
- The page index follows the store: a PDF whose active version is not the one indexed is
  indexed again (its pages replaced as a unit); a document no longer active loses its pages.
- A page carries its document's label and metadata as the store has them (the text ingest's
  labels, sidecars and rules decide, once): a document with any RESTRICTED chunk has every page
  dropped before rendering, so its pixels are never rendered, embedded or stored.
- A file changed or gone since the text ingest is skipped with a warning (its pages would not
  match the stored text); a file that fails is reported and never stops the pass.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ragspine.ingest.document import content_hash
from ragspine.ingest.files import FileFailure
from ragspine.ingest.loaders.pdf_loader import load_pdf
from ragspine.ingest.loaders.pdf_pages import DEFAULT_DPI, open_pdf_pages
from ragspine.ingest.registry import ACTIVE, DocumentRecord, DocumentRegistry
from ragspine.retrieval.model import FILTER_FIELDS
from ragspine.retrieval.sensitivity import RESTRICTED_SENSITIVITY, is_restricted
from ragspine.retrieval.store.protocol import StoredChunk
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.visual.build import DEFAULT_BATCH_SIZE, PageBuildReport, PageSource, index_pages
from ragspine.retrieval.visual.index import VisualIndex, index_folder
from ragspine.retrieval.visual.protocol import PageRecord, VisualEmbedder


@dataclass
class VisualIngestReport(PageBuildReport):
    """The page build's counts plus what the pass skipped or failed, and how long it took."""

    unchanged: int = 0
    warnings: list[FileFailure] = field(default_factory=list)
    failures: list[FileFailure] = field(default_factory=list)
    seconds: float = 0.0

    def headline(self) -> str:
        rate = self.embedded / self.seconds if self.seconds else 0.0
        return (
            f"visual: {self.embedded} page(s) of {len(self.documents)} document(s) embedded "
            f"({rate:.1f} pages/s); RESTRICTED pages dropped: {self.restricted}; unchanged documents: "
            f"{self.unchanged}; removed: {len(self.cleared)}"
        )


def ingest_visual(
    db: str,
    embedder: VisualEmbedder,
    *,
    dpi: int = DEFAULT_DPI,
    batch_size: int = DEFAULT_BATCH_SIZE,
    force: bool = False,
    progress: bool | None = None,
) -> VisualIngestReport:
    """Bring the page index of the store at `db` up to date; see the module docstring.
    `force`: index every active PDF again."""
    started = time.perf_counter()
    folder = index_folder(db)
    index = VisualIndex(folder, model_id=embedder.model_id, dim=embedder.dim)
    report = VisualIngestReport()
    with ChunkStore(db) as store, DocumentRegistry(db) as registry:
        pdfs = {r.doc_id: r for r in registry.all() if r.status == ACTIVE and r.loader == "pdf"}
        indexed = index.doc_versions()
        gone = [doc_id for doc_id in indexed if doc_id not in pdfs]
        todo: list[tuple[DocumentRecord, int]] = []
        for doc_id, record in sorted(pdfs.items()):
            version = store.active_version(doc_id)  # the chunks are read only for a document to index
            if version is None:
                gone.append(doc_id)
            elif force or indexed.get(doc_id) != version:
                todo.append((record, version))
            else:
                report.unchanged += 1
        if gone:
            index.write([], remove=gone)
            report.cleared.extend(gone)
        hide = None if progress is None else not progress
        documents = _documents(tqdm(todo, desc="pages", unit="doc", disable=hide), store, dpi, report)
        index_pages(documents, embedder, index, batch_size=batch_size, report=report)
    report.seconds = time.perf_counter() - started
    return report


def _documents(
    todo: Sequence[tuple[DocumentRecord, int]] | tqdm, store: ChunkStore, dpi: int, report: VisualIngestReport
) -> Iterator[tuple[str, list[PageSource]]]:
    """(doc_id, pages) for each document to index; a PDF stays open while its pages are taken."""
    for record, version in todo:
        chunks = [c for c in store.iter_chunks(doc_id=record.doc_id) if c.version == version]
        if not chunks:
            continue  # withdrawn or re-ingested since the pass began: the next pass sees it
        with ExitStack() as stack:
            try:
                pages = _pages(record, version, chunks, dpi, stack, report)
            except (OSError, ValueError) as exc:  # a missing extra (ImportError) stops the pass: every PDF would fail
                report.failures.append(FileFailure(Path(record.source_path), f"visual: {exc}"))
                continue
            if pages is not None:
                yield record.doc_id, pages


def _pages(
    record: DocumentRecord, version: int, chunks: list[StoredChunk], dpi: int, stack: ExitStack,
    report: VisualIngestReport,
) -> list[PageSource] | None:  # fmt: skip
    first = chunks[0]
    fields = {**first.metadata, **{n: v for n in FILTER_FIELDS if (v := getattr(first, n))}}
    if first.valid_as_of:
        fields["valid_as_of"] = first.valid_as_of
    if any(is_restricted(c.sensitivity) for c in chunks):  # never rendered, embedded or stored
        restricted = [PageRecord(record.doc_id, n, RESTRICTED_SENSITIVITY, version=version)
                      for n in range(1, max(record.pages, 1) + 1)]  # fmt: skip
        return [(r, _never) for r in restricted]
    path = Path(record.source_path)
    data = path.read_bytes()
    if content_hash(data) != record.content_hash:
        report.warnings.append(FileFailure(path, "changed since it was ingested; run `ragspine ingest` on it first"))
        return None
    loaded = load_pdf(data, path)
    texts = {n: loaded.text[s:e] for n, (s, e) in zip(loaded.page_numbers, loaded.page_spans, strict=True)}
    rendered = stack.enter_context(open_pdf_pages(data, dpi=dpi))
    return [
        (PageRecord(record.doc_id, n, first.sensitivity, title=first.title, text=texts.get(n, ""), version=version,
                    fields=fields), functools.partial(rendered.render, n))
        for n in range(1, len(rendered) + 1)
    ]  # fmt: skip


def _never() -> np.ndarray:
    raise AssertionError("a RESTRICTED page was about to be rendered")

"""Ingest files into a chunk store: one document per file, one transaction per document.

Invariant: a file that fails (unreadable, not UTF-8, empty) is reported with its reason and
never stops the batch; a document is either fully written as a new version or not at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from ragspine.ingest.files import (
    SUPPORTED_SUFFIXES,
    FileFailure,
    detect_language,
    discover,
    guess_title,
    read_text,
)
from ragspine.retrieval.chunking.chunk_store import ChunkStore
from ragspine.retrieval.chunking.chunking import DocumentMeta
from ragspine.retrieval.lexical.narrative_index import NarrativeIndex


@dataclass
class IngestReport:
    """What an ingest run did."""

    db: str
    ingested: list[str] = field(default_factory=list)
    chunks: int = 0
    failures: list[FileFailure] = field(default_factory=list)


def ingest_paths(
    paths: Sequence[Path],
    db: str,
    *,
    entity: str | None = None,
    period: str | None = None,
    topic: str | None = None,
    geography: str | None = None,
    language: str | None = None,
    sensitivity: str | None = "INTERNAL",
) -> IngestReport:
    """Ingest every supported file under `paths` into the store at `db`."""
    files, failures = discover(paths)
    report = IngestReport(db=db, failures=failures)
    if not files:
        if not failures:
            supported = ", ".join(SUPPORTED_SUFFIXES)
            raise ValueError(f"no {supported} files found under {', '.join(map(str, paths))}")
        return report
    with ChunkStore(db) as store:
        store.init_schema()
        index = NarrativeIndex(store)
        for source in tqdm(files, desc="ingest", unit="file", disable=None):
            try:
                text = read_text(source.path)
                meta = DocumentMeta(
                    doc_id=source.doc_id,
                    title=guess_title(text, source.path),
                    topic=topic or "",
                    entity=entity or "",
                    geography=geography or "",
                    period=period or "",
                    language=language or detect_language(text),
                    sensitivity=sensitivity or "INTERNAL",
                )
                report.chunks += index.ingest(text, meta)
            except ValueError as exc:
                report.failures.append(FileFailure(source.path, str(exc)))
            else:
                report.ingested.append(source.doc_id)
    return report

"""Where a document came from, for its registry row: `Origin`, from a file (`file_origin`) or a
text (`text_origin`); and what the store step wrote for it (`Written`).

Invariant: the `ingest_key` of an origin covers everything that decides the document's chunks
(`ingest.document.ingest_key`): its doc_id, content, sidecar or own fields, the settings and,
for a file, its loader's revision (`loaders.READER_REVISIONS`), so an unchanged key means
unchanged chunks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ragspine.ingest.document import IngestSettings, content_hash, ingest_key
from ragspine.ingest.files import SourceFile
from ragspine.ingest.loaders import READER_REVISIONS
from ragspine.ingest.metadata import DocumentFields, Sidecar
from ragspine.retrieval.chunking.protocol import Chunker

__all__ = ["Origin", "Written", "file_origin", "now", "text_origin"]


@dataclass(frozen=True)
class Origin:
    """Where a document came from, for its registry row: the folder a run found it under ('' when
    it was given directly), its file ('' for a text or an upload), its content hash, its
    `ingest_key` and its size in bytes."""

    content_hash: str
    ingest_key: str
    size_bytes: int
    root: str = ""
    source_path: str = ""


@dataclass(frozen=True)
class Written:
    """What the store step wrote for one document: its new active version, how many chunks,
    and the warnings to show (a kept stricter label, garbled text, a near-miss sidecar name)."""

    doc_id: str
    chunks: int
    version: int
    warnings: tuple[str, ...] = ()
    duplicate_of: str = ""  # recorded as a copy of this stored document (a folder run), nothing written


def file_origin(source: SourceFile, data: bytes, sidecar: Sidecar, settings: IngestSettings, root: str = "") -> Origin:
    """A file's registry origin: `root` the folder a run found it under ('' when given
    directly); its path only when it is a file on disk (not an upload's name)."""
    file_hash = content_hash(data)
    path = str(source.path.resolve()) if root else ""
    reader = READER_REVISIONS.get(source.path.suffix.lower(), 0)
    key = ingest_key(source.doc_id, file_hash, sidecar, settings, reader=reader)
    return Origin(file_hash, key, len(data), root, path)


def text_origin(
    doc_id: str,
    text: str,
    fields: Mapping[str, Any],
    settings: IngestSettings | None,
    *,
    chunker: Chunker | None = None,
) -> Origin:
    """A text's registry origin: its content hash, and an ingest key over it, its own `fields`
    and the settings (or, without settings, the `chunker` that cut it)."""
    data = text.encode("utf-8")
    digest = content_hash(json.dumps(fields, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8"))
    if settings is None:
        settings = IngestSettings(chunker=chunker)
    text_hash = content_hash(data)
    return Origin(text_hash, ingest_key(doc_id, text_hash, Sidecar(DocumentFields(), digest), settings), len(data))


def now() -> str:
    """The registry's timestamp: UTC, to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")

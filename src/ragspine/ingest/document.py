"""Turn one file's bytes into the chunks of one document version (no store, no registry).

Invariants: the same bytes, sidecar and settings give the same chunks (deterministic), and
`ingest_key` changes whenever any of them changes, so an unchanged key means unchanged chunks.
Field precedence, highest first: sidecar, Markdown front matter, CLI defaults; `language` falls
back to detection on the text; `sensitivity` is the per-document value, else the strictest
matching rule, else the CLI default. Every chunk's text is a substring of the loaded text; PDF
locators gain `;pages=…` (see `pages`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from ragspine.ingest.files import SourceFile
from ragspine.retrieval.language import detect_language
from ragspine.ingest.loaders import LoadedDocument, load_document
from ragspine.ingest.metadata import DocumentFields, Sidecar, filterable, to_fields
from ragspine.ingest.pages import with_pages
from ragspine.ingest.sensitivity_rules import SensitivityRules, normalize_label
from ragspine.retrieval.chunking.chunking import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    chunk_document,
)
from ragspine.retrieval.model import Chunk, DocumentMeta

# Bump when loaders or locators change what the same bytes turn into, so re-runs re-ingest.
INGEST_FORMAT = 1
DIMENSIONS = ("topic", "entity", "geography", "period", "language")


@dataclass(frozen=True)
class IngestSettings:
    """Everything besides the file that shapes a document's chunks."""

    defaults: DocumentFields = field(default_factory=DocumentFields)
    sensitivity: str = "INTERNAL"
    rules: SensitivityRules = field(default_factory=SensitivityRules)
    max_chars: int = DEFAULT_CHUNK_CHARS
    overlap_chars: int = DEFAULT_OVERLAP_CHARS

    def fingerprint(self) -> str:
        """A digest of these settings (part of every document's `ingest_key`)."""
        data = {
            "defaults": dict(sorted(self.defaults.known.items())),
            "sensitivity": self.sensitivity,
            "rules": self.rules.fingerprint(),
            "chunking": [self.max_chars, self.overlap_chars],
        }
        return _digest(data)


@dataclass(frozen=True)
class PreparedDocument:
    """A document version ready to write: its metadata, chunks, and what the loader found."""

    meta: DocumentMeta
    chunks: list[Chunk]
    loaded: LoadedDocument
    metadata: dict[str, Any]


def content_hash(data: bytes) -> str:
    """SHA-256 of a file's bytes."""
    return hashlib.sha256(data).hexdigest()


def ingest_key(doc_id: str, file_hash: str, sidecar: Sidecar, settings: IngestSettings) -> str:
    """A digest of everything that decides a document's chunks (see the module docstring)."""
    return _digest(
        {
            "format": INGEST_FORMAT,
            "doc_id": doc_id,
            "content": file_hash,
            "sidecar": sidecar.digest,
            "settings": settings.fingerprint(),
        }
    )


def prepare(
    source: SourceFile, data: bytes, sidecar: Sidecar, settings: IngestSettings
) -> PreparedDocument:
    """Load, label and chunk one file; ValueError (or MissingExtraError) with the reason on failure."""
    loaded = load_document(source.path, data)
    front = to_fields(loaded.metadata, "front matter") if loaded.metadata else DocumentFields()
    own = sidecar.fields.over(front)
    fields = own.over(settings.defaults).known
    title = fields.get("title") or loaded.title
    sensitivity, source_of_label = _sensitivity(source.doc_id, loaded, title, own, settings)
    meta = DocumentMeta(
        doc_id=source.doc_id,
        title=title,
        topic=fields.get("topic", ""),
        entity=fields.get("entity", ""),
        geography=fields.get("geography", ""),
        period=fields.get("period", ""),
        language=fields.get("language") or detect_language(loaded.text),
        sensitivity=sensitivity,
        metadata=filterable(own.free),
    )
    chunks = chunk_document(
        loaded.text, meta, max_chars=settings.max_chars, overlap_chars=settings.overlap_chars
    )
    if not chunks:
        raise ValueError("no text to index")
    chunks = with_pages(chunks, loaded.page_spans, loaded.page_numbers)
    metadata: dict[str, Any] = {name: getattr(meta, name) for name in ("title", *DIMENSIONS)}
    metadata.update(sensitivity=sensitivity, sensitivity_from=source_of_label, free=dict(own.free))
    return PreparedDocument(meta, chunks, loaded, metadata)


def _sensitivity(
    doc_id: str, loaded: LoadedDocument, title: str, own: DocumentFields, settings: IngestSettings
) -> tuple[str, str]:
    given = own.known.get("sensitivity")
    if given:
        return normalize_label(given), "document"
    ruled = settings.rules.classify(doc_id, loaded.text, title)
    if ruled is not None:
        return ruled, "rule"
    return normalize_label(settings.sensitivity), "default"


def _digest(data: Any) -> str:
    blob = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()

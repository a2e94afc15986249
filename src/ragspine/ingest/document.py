"""Turn one file's bytes into the chunks of one document version (no store, no registry).

Invariants: the same bytes, sidecar and settings give the same chunks (deterministic), and
`ingest_key` changes whenever any of them changes, so an unchanged key means unchanged chunks.
Field precedence, highest first: sidecar, Markdown front matter, CLI defaults; `language` falls
back to detection on the text; `sensitivity` is the per-document value, else the strictest
matching rule, else the CLI default, normalised and checked against the known levels (an unknown
label fails the document, naming where it came from). Every chunk's text is a substring of the
loaded text; PDF locators gain `;pages=…` (see `pages`).

This is the one preparation path: the folder pipeline (`prepare`), and `Workspace.ingest_bytes`
(HTTP upload, `ragspine.open().ingest`) and `Workspace.ingest_text` (via `prepare_loaded`) all
label and chunk here, so the same file and metadata give the same chunks whichever way it came.
Chunks are cut by `IngestSettings.chunker` (the workspace passes its configured one), else by the
paragraph packer with the settings' budget.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ragspine.ingest.files import SourceFile
from ragspine.retrieval.language import detect_language
from ragspine.ingest.loaders import LoadedDocument, load_document
from ragspine.ingest.metadata import DocumentFields, Sidecar, filterable, to_fields
from ragspine.ingest.pages import with_pages
from ragspine.ingest.sensitivity_rules import SensitivityRules
from ragspine.retrieval.sensitivity import check_label
from ragspine.retrieval.chunking.chunking import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    chunk_document,
)
from ragspine.retrieval.chunking.protocol import Chunker, Layout, StructureAwareChunker
from ragspine.retrieval.model import Chunk, DocumentMeta

# Bump when loaders, locators or labels change what the same bytes turn into, so re-runs
# re-ingest. 2: sensitivity labels normalised by NFKC (full-width spellings), unknown ones refused.
INGEST_FORMAT = 2
DIMENSIONS = ("topic", "entity", "geography", "period", "language")


@dataclass(frozen=True)
class IngestSettings:
    """Everything besides the file that shapes a document's chunks."""

    defaults: DocumentFields = field(default_factory=DocumentFields)
    sensitivity: str = "INTERNAL"
    rules: SensitivityRules = field(default_factory=SensitivityRules)
    max_chars: int = DEFAULT_CHUNK_CHARS
    overlap_chars: int = DEFAULT_OVERLAP_CHARS
    # Where the default label comes from, for the unknown-label error.
    sensitivity_from: str = field(default="--sensitivity", compare=False)
    # The configured chunker (RAGSPINE_CHUNKER); None: the paragraph packer with the budget above.
    chunker: Chunker | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        label = check_label(self.sensitivity, self.rules.levels, source=self.sensitivity_from)
        object.__setattr__(self, "sensitivity", label)

    def fingerprint(self) -> str:
        """A digest of these settings (part of every document's `ingest_key`)."""
        data = {
            "defaults": dict(sorted(self.defaults.known.items())),
            "sensitivity": self.sensitivity,
            "rules": self.rules.fingerprint(),
            "chunking": [self.max_chars, self.overlap_chars],
        }
        if self.chunker is not None:
            data["chunker"] = _identity(self.chunker)
        return _digest(data)


def ingest_settings(
    defaults: Mapping[str, str | None], sensitivity: str | None = None, **options: Any
) -> IngestSettings:
    """IngestSettings from the defaults a caller gives (CLI flags, `Workspace.ingest_bytes`
    arguments): blank values dropped, the rest stripped; a blank `sensitivity` is INTERNAL.
    `options`: the other IngestSettings fields."""
    given = {k: v.strip() for k, v in defaults.items() if v and v.strip()}
    return IngestSettings(
        defaults=DocumentFields(given), sensitivity=(sensitivity or "").strip() or "INTERNAL", **options
    )


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
    where = "sidecar" if sidecar.fields.known.get("sensitivity") else "front matter"
    origin = f"the {where} of {source.doc_id!r}"
    return prepare_loaded(
        source.doc_id, loaded, own, settings, user_metadata=filterable(own.free), own_from=origin
    )


def prepare_loaded(
    doc_id: str,
    loaded: LoadedDocument,
    own: DocumentFields,
    settings: IngestSettings,
    *,
    user_metadata: dict[str, Any],
    own_from: str,
) -> PreparedDocument:
    """Label and chunk a loaded document whose own fields are `own` (`own_from` names where
    they came from, for errors); `settings` fill the rest. ValueError with the reason."""
    fields = own.over(settings.defaults).known
    title = fields.get("title") or loaded.title
    sensitivity, source_of_label = _sensitivity(doc_id, loaded, title, own, own_from, settings)
    meta = DocumentMeta(
        doc_id=doc_id,
        title=title,
        topic=fields.get("topic", ""),
        entity=fields.get("entity", ""),
        geography=fields.get("geography", ""),
        period=fields.get("period", ""),
        language=fields.get("language") or detect_language(loaded.text),
        sensitivity=sensitivity,
        metadata=user_metadata,
    )
    layout = Layout(loaded.headings, tuple(start for start, _ in loaded.page_spans[1:]))
    if isinstance(settings.chunker, StructureAwareChunker) and (layout.headings or layout.page_starts):
        chunks = settings.chunker.chunk_structured(loaded.text, meta, layout)  # the loader's structure too
    elif settings.chunker is not None:
        chunks = settings.chunker.chunk(loaded.text, meta)
    else:
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
    doc_id: str,
    loaded: LoadedDocument,
    title: str,
    own: DocumentFields,
    own_from: str,
    settings: IngestSettings,
) -> tuple[str, str]:
    levels = settings.rules.levels
    given = own.known.get("sensitivity")
    if given:
        return check_label(given, levels, source=own_from), "document"
    ruled = settings.rules.classify(doc_id, loaded.text, title)
    if ruled is not None:
        return ruled, "rule"
    return settings.sensitivity, "default"


def _identity(chunker: Chunker) -> str:
    """The chunker's repr when its class defines one (e.g. its budget), else its class path."""
    kind = type(chunker)
    path = f"{kind.__module__}.{kind.__qualname__}"
    return repr(chunker) if kind.__repr__ is not object.__repr__ else path


def _digest(data: Any) -> str:
    blob = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()
